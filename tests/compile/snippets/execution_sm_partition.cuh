// The names execution/sm_partition.cuh's snippet uses.
#include <cohort/execution/launch.cuh>
#include <cohort/streams/stream.cuh>

__global__ void my_kernel(float*) {}
#define COHORT_SNIPPET_PARAMETERS cohort::device_ref dev, unsigned g, unsigned b, float *x
