// The names execution/capability.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS std::size_t n, const cohort::device_group &group
