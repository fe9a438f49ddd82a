// The names distributed/shard.cuh's snippet uses.
#include <cohort/distributed/distributed_buffer.cuh>
#include <cohort/execution/launch.cuh>

__global__ void scale(cuda::std::span<float>, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS cohort::distributed_buffer<float> &x
