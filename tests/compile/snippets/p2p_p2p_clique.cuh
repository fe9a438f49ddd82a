// The names p2p/p2p_clique.cuh's snippet uses.
#include <cohort/p2p/collectives.cuh>

struct snippet_op {
  __device__ float operator()(float a, float b) const { return a + b; }
};
#define COHORT_SNIPPET_PARAMETERS cohort::distributed_buffer<float>&data, snippet_op my_op
