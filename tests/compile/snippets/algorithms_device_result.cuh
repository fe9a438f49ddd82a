// The names algorithms/device_result.cuh's snippet uses.
#include <cohort/algorithms/reduce.cuh>

#include <cuda/functional>

#define COHORT_SNIPPET_PARAMETERS cohort::device_group &group, cohort::distributed_buffer<float> &x
