// The names streams/stream_ref.cuh's snippet uses.
#include <cohort/execution/launch.cuh>

__global__ void scale_kernel(float*, std::size_t) {}
constexpr unsigned blocks = 64;
#define COHORT_SNIPPET_PARAMETERS cudaStream_t handle
