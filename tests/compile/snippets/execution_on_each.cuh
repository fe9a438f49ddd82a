// The names execution/on_each.cuh's snippet uses.
#include <cohort/execution/launch.cuh>

__global__ void my_kernel(float*, std::size_t) {}
#define COHORT_SNIPPET_PARAMETERS cohort::device_group &group, float *const *my_data, unsigned blocks
