// The names nccl/traits.cuh's snippet uses.
#include <cohort/nccl/collectives.cuh>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::communicator &comm, cuda::std::span<float> data, cohort::stream_ref stream
