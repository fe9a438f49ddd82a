// The names nccl/collectives.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::communicator &comm, cuda::std::span<float> data, cuda::std::span<const float> send,     \
      cuda::std::span<float> recv, cuda::std::span<float> mine, cuda::std::span<float> everyone,  \
      cuda::std::span<float> a, cuda::std::span<float> b, cohort::stream_ref stream
