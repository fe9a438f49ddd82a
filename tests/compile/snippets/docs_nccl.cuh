// The names docs/nccl.md's blocks use.
#include "docs_common.cuh"

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, std::size_t count, char **argv, cohort::stream_ref stream,        \
      cuda::std::span<float> local_grads, cuda::std::span<const float> send,                      \
      cuda::std::span<float> recv, cuda::std::span<float> everyone
