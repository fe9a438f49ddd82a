// The names docs/graphs.md's blocks use.
#include "docs_common.cuh"

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::distributed_buffer<float> &x, cohort::stream_ref origin
