// The names communication/operators.cuh's snippet uses (both engines).
#include <cohort/nccl/nccl_clique.cuh>
#include <cohort/p2p/collectives.cuh>

struct stats {
  float total;
};
__host__ __device__ inline stats merge(stats a, stats b) { return {a.total + b.total}; }
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::nccl_clique &nccl, cohort::distributed_buffer<float> &grads, cohort::p2p_clique &peers, \
      cohort::distributed_buffer<stats> &summaries
