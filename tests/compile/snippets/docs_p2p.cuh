// The names docs/p2p.md's blocks use.
#include "docs_common.cuh"

#include <cuda_bf16.h>

#include <cstdio>
#include <thread>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, std::size_t features,                                              \
      cohort::distributed_buffer<__nv_bfloat16> &grads, cohort::distributed_buffer<float> &mine,  \
      cohort::distributed_buffer<float> &everyone, cohort::distributed_buffer<float> &x,          \
      cohort::distributed_buffer<float> &y
