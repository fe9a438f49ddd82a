// The sharded model the ZeRO stage 3 snippets use (training/sharded_parameters.cuh's and
// docs/training.md's): its layers' sizes, the members' shards of their weights and gradients (one
// span per member), its passes on the gathered weights, and the update of one member's shard.
#pragma once

#include <cohort/streams/stream.cuh>
#include <cohort/training/sharded_parameters.cuh>

#include <cuda_bf16.h>

#include <cstddef>
#include <vector>

std::size_t count_of(int layer);
std::vector<cuda::std::span<__nv_bfloat16>> weight_shards_of(int layer);
std::vector<cuda::std::span<__nv_bfloat16>> gradient_shards_of(int layer);
void forward(int layer, cohort::sharded_parameters<__nv_bfloat16>& params,
             std::vector<cohort::stream>& compute);
void backward(int layer, cohort::sharded_parameters<__nv_bfloat16>& params,
              std::vector<cohort::stream>& compute);
void update(cuda::std::span<__nv_bfloat16> weights, cuda::std::span<__nv_bfloat16> gradients,
            cohort::stream_ref stream);
