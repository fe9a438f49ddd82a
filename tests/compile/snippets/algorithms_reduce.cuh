// The names algorithms/reduce.cuh's snippet uses.
#include <cuda/functional>

#include <cmath>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::distributed_buffer<float> &x, std::size_t n,               \
      const float *a, const float *b
