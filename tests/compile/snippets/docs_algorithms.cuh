// The names docs/algorithms.md's blocks use.
#include "docs_common.cuh"

struct point {
  float x, y;
};
struct add_one {
  __device__ void operator()(std::size_t) const {}
};
void more_work();
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::distributed_buffer<float> &x,                              \
      const cohort::distributed_buffer<float> &cx, cohort::distributed_buffer<float> &y,          \
      cohort::distributed_buffer<unsigned long long> &offsets,                                    \
      cohort::distributed_buffer<std::uint32_t> &keys,                                            \
      cohort::distributed_buffer<float> &values, cohort::distributed_buffer<point> &points,       \
      cohort::stream_ref stream, std::size_t n, const float *a, const float *b, add_one f
