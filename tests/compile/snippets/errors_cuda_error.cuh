// The names errors/cuda_error.cuh's snippet uses.
#include <cstddef>

#define COHORT_SNIPPET_PARAMETERS void *p, std::size_t bytes, cudaStream_t s, int device_id
