// Must not compile: a user operator on __half2 that takes no floats, while the peer-to-peer
// engine compiles the accumulate_in_float form (lanes in float) beside the pair form. The message
// says what the operator must take.
#include <cohort/cohort.cuh>

struct pair_max {
  __device__ __half2 operator()(__half2 a, __half2 b) const { return __hmax2(a, b); }
};

void reduce(cohort::p2p_clique& peers, cohort::distributed_buffer<__half2>& x) {
  cohort::all_reduce(peers, x, pair_max{});
}

int main() {}
