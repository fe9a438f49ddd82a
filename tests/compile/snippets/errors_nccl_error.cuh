// The names errors/nccl_error.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS                                                                  \
  ncclComm_t comm, int n, ncclUniqueId id, int rank, int device
