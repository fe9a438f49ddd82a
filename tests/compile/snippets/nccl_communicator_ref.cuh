// The names nccl/communicator_ref.cuh's snippet uses.
#include <cohort/nccl/collectives.cuh>
#include <cohort/nccl/communicator.cuh>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::communicator &comm, ncclComm_t handle, int rank, int size,                              \
      cuda::std::span<float> data, cohort::stream_ref stream
