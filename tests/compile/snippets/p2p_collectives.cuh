// The names p2p/collectives.cuh's snippet uses.
#include <cuda_bf16.h>

struct stats {
  float total;
};
__host__ __device__ inline stats merge(stats a, stats b) { return {a.total + b.total}; }
struct snippet_op {
  __device__ float operator()(float a, float b) const { return a + b; }
};
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::p2p_clique &peers, cohort::device_group &group, std::size_t n,                          \
      cohort::distributed_buffer<__nv_bfloat16> &grads, cohort::distributed_buffer<float> &mine,  \
      cohort::distributed_buffer<float> &everyone, cohort::distributed_buffer<float> &weights,    \
      const cohort::distributed_buffer<float> &x, cohort::distributed_buffer<float> &y,           \
      snippet_op op
