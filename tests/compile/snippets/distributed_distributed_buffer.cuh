// The names distributed/distributed_buffer.cuh's snippet uses.
#include <cohort/execution/launch.cuh>

#include <vector>

__global__ void scale(float*, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS std::size_t n, std::vector<float> &host_x, unsigned g, unsigned b
