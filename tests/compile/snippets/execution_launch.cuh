// The names execution/launch.cuh's snippet uses. (The snippet declares `scale`; it is defined
// here, as the snippet's reader would.)
#include <cuda/std/span>

__global__ void scale(cuda::std::span<float> x, float a) {}
__global__ void persistent(cuda::std::span<float> x) {}
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::stream_ref stream, cuda::std::span<float> x, unsigned blocks, unsigned fits
