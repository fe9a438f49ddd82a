// The names algorithms/sort.cuh's snippet uses.
struct point {
  float x, y;
};
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  const cohort::device_group &group, std::size_t n, cohort::distributed_buffer<unsigned> &values, \
      cohort::distributed_buffer<point> &points,                                                   \
      const std::vector<cuda::std::span<float>> &spans
