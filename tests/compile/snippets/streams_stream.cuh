// The names streams/stream.cuh's snippet uses.
#include <cohort/execution/launch.cuh>

__global__ void my_kernel(float*, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS unsigned g, unsigned b, float *x, std::size_t n
