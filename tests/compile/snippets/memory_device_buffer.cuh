// The names memory/device_buffer.cuh's snippet uses.
#include <cohort/execution/launch.cuh>
#include <cohort/streams/stream.cuh>

#include <vector>

__global__ void my_kernel(float*, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS std::size_t n, std::vector<float> &host_x, unsigned g, unsigned b
