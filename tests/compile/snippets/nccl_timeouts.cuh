// The names nccl/timeouts.cuh's snippet uses.
#include <cohort/nccl/communicator.cuh>

#define COHORT_SNIPPET_PARAMETERS cohort::communicator &comm, cohort::stream_ref stream
