// The names nccl/communicator.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  const cohort::unique_id &id, int world_size, int rank, int local_rank,                          \
      const cohort::device_group &group, cohort::stream_ref stream
