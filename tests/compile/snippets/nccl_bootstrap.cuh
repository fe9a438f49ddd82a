// The names nccl/bootstrap.cuh's snippet uses.
#include <cohort/memory/device_buffer.cuh>
#include <cohort/nccl/collectives.cuh>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  char **argv, cohort::device_buffer<float> &grads, cohort::stream_ref stream
