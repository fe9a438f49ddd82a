// The names devices/scoped_device.cuh's snippet uses.
#include <cstddef>

__global__ void my_kernel(float*, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS dim3 grid, dim3 block, cudaStream_t stream, float *x, std::size_t n
