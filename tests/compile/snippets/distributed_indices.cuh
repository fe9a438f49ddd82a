// The names distributed/indices.cuh's snippet uses.
#include <cohort/algorithms/for_each.cuh>

struct snippet_f {
  __device__ void operator()(std::size_t) const {}
};
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, std::size_t n, snippet_f f
