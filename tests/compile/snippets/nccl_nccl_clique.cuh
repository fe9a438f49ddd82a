// The names nccl/nccl_clique.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS std::size_t count, cohort::distributed_buffer<float> &weights
