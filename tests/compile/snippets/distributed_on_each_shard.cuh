// The names distributed/on_each_shard.cuh's snippet uses.
#include <cohort/execution/launch.cuh>

__global__ void scale(cuda::std::span<float>, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS cohort::distributed_buffer<float> &buffer, unsigned blocks
