// The names partitioning/adaptive_weights.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS std::size_t n
