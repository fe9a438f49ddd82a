// The names errors/p2p_error.cuh's snippet uses: a group, and the rank found missing.
#include <cohort/execution/device_group.cuh>

#define COHORT_SNIPPET_PARAMETERS const cohort::device_group &group, int &missing
