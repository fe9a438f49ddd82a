// The names distributed/managed_buffer.cuh's snippet uses.
#include <cohort/algorithms/for_each.cuh>

#define COHORT_SNIPPET_PARAMETERS const cohort::device_group &group, std::size_t n
