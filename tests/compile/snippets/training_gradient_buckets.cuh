// The names training/gradient_buckets.cuh's snippet uses: a model's layers, their gradients and
// weights (one span per member), its backward pass and the update of one member's shard.
#include <cuda_bf16.h>

#include <vector>

std::vector<cuda::std::span<__nv_bfloat16>> gradients_of(int layer);
std::vector<cuda::std::span<__nv_bfloat16>> weights_of(int layer);
void backward(int layer, std::vector<cohort::stream>& compute);
void update(cuda::std::span<__nv_bfloat16> shard, cohort::stream_ref stream);
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::p2p_clique &peers, std::vector<cohort::stream>&compute,     \
      int layers
