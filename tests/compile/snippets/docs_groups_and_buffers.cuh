// The names docs/groups_and_buffers.md's blocks use.
#include "docs_common.cuh"

void compute_chunk(cohort::stream_ref stream, std::size_t rank, std::size_t chunk);
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::stream &s, cohort::stream_ref other,                        \
      cohort::stream_ref origin, std::size_t n, std::vector<float>&host,                           \
      cohort::device_buffer<float>&b, float *ptr0, std::size_t n0, float *ptr1, std::size_t n1,    \
      cohort::p2p_clique &peers, std::size_t chunks,                                               \
      std::vector<std::vector<cuda::std::span<float>>> chunk_spans, cohort::device_ref dev,        \
      cudaStream_t handle, cohort::distributed_buffer<unsigned>&keys
