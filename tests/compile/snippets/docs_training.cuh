// The names docs/training.md's blocks use: a model's layers, their gradients and weights (one
// span per member; bfloat16, and half for the loss scale), its backward pass and updates.
#include "docs_common.cuh"
#include "sharded_model.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

std::vector<cuda::std::span<__nv_bfloat16>> gradients_of(int layer);
std::vector<cuda::std::span<__nv_bfloat16>> weights_of(int layer);
void backward(int layer, std::vector<cohort::stream>& compute);
void update(int layer, std::vector<cohort::stream>& compute);
void update_block(cuda::std::span<__nv_bfloat16> block, cohort::stream_ref stream);
// The half model of the loss scale's block: its backward reads the scale on the device.
std::vector<cuda::std::span<__half>> half_gradients_of(int layer);
std::vector<cuda::std::span<__half>> half_weights_of(int layer);
void backward(int layer, std::vector<cohort::stream>& compute, const cohort::loss_scaler& scaler);
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::p2p_clique &peers, std::vector<cohort::stream>&compute,     \
      int layers, cohort::communicator &comm
