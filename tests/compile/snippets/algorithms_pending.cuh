// The names algorithms/pending.cuh's snippet uses.
#include <cohort/algorithms/reduce.cuh>

void more_work();
#define COHORT_SNIPPET_PARAMETERS cohort::device_group &group, cohort::distributed_buffer<float> &x
