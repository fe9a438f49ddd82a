// The names p2p/p2p_options.cuh's snippet uses.
#include <cohort/p2p/collectives.cuh>

#include <cuda_bf16.h>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::p2p_clique &peers, cohort::distributed_buffer<float>&data,                               \
      cohort::distributed_buffer<__nv_bfloat16>&grads
