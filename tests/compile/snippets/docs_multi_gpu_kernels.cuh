// The names docs/multi_gpu_kernels.md's blocks use.
#include "docs_common.cuh"

__device__ inline float compute(std::size_t i) { return float(i); }
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, std::size_t n, unsigned blocks, std::vector<float *> out
