// The names training/loss_scaler.cuh's snippet uses: a model's layers, their half gradients and
// weights (one span per member), and its backward pass, which reads the scaler's scale.
#include <cuda_fp16.h>

#include <cstdio>
#include <vector>

std::vector<cuda::std::span<__half>> gradients_of(int layer);
std::vector<cuda::std::span<__half>> weights_of(int layer);
void backward(int layer, std::vector<cohort::stream>& compute, const cohort::loss_scaler& scaler);
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::p2p_clique &peers, std::vector<cohort::stream>&compute,     \
      int layers
