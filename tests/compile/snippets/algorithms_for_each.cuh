// The names algorithms/for_each.cuh's snippet uses.
#include <cohort/execution/adaptive_balancer.cuh>

struct snippet_f {
  __device__ void operator()(std::size_t) const {}
};
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::distributed_buffer<float> &x, std::size_t n, float *out,   \
      snippet_f f, cohort::adaptive_balancer &balancer, cohort::stream_ref stream, float *y,      \
      const float *in, float a
