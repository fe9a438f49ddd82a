// The names algorithms/scan.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  const cohort::device_group &group, std::size_t n, cohort::distributed_buffer<float> &y,         \
      cohort::distributed_buffer<unsigned long long> &offsets
