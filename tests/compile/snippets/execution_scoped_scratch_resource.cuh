// The names execution/scoped_scratch_resource.cuh's snippet uses.
#include <cohort/algorithms/reduce.cuh>
#include <cohort/algorithms/scan.cuh>
#include <cohort/distributed/distributed_buffer.cuh>

#include <cuda/functional>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::distributed_buffer<float>&x,                                \
      cohort::device_pool_resource &torch_scratch
