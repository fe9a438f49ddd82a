// The names distributed/distributed_view.cuh's snippet uses.
#include <cohort/algorithms/for_each.cuh>

#include <vector>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  const cohort::device_group &group, float *ptr0, float *ptr1, std::size_t n0, std::size_t n1
