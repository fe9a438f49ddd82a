// The names execution/chunk_pipeline.cuh's snippet uses.
#include <cohort/p2p/collectives.cuh>

#include <vector>

void my_compute(cohort::stream_ref stream, std::size_t rank, std::size_t chunk);
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::p2p_clique &peers, std::size_t chunks,                      \
      std::vector<std::vector<cuda::std::span<float>>> chunk_spans
