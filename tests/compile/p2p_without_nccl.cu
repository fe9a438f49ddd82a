// The peer-to-peer engine with no NCCL: nccl.h is emptied (its include guard defined first) and
// the NCCL layer switched off, so any use of NCCL by the engine would fail to compile here.
#define NCCL_H_
#undef COHORT_WITH_NCCL
#define COHORT_WITH_NCCL 0
#include <cohort/cohort.cuh>

namespace {
struct pair_sum {
  __device__ int2 operator()(int2 a, int2 b) const { return {a.x + b.x, a.y + b.y}; }
};
} // namespace

void use_every_p2p_collective(cohort::p2p_clique& peers, cohort::distributed_buffer<int2>& x,
                              cohort::distributed_buffer<int2>& all) {
  cohort::all_reduce(peers, x, pair_sum{});
  cohort::all_reduce(peers, std::as_const(x), all, pair_sum{},
                     {.algorithm = cohort::p2p_algorithm::two_shot});
  cohort::all_gather(peers, std::as_const(x), all);
  cohort::broadcast(peers, x, 0);
  cohort::reduce(peers, std::as_const(x), x, pair_sum{}, 0);
  cohort::reduce_scatter(peers, std::as_const(all), x, pair_sum{});
}

// Moves take any trivially copyable type, one without a default constructor too.
namespace {
struct no_default {
  explicit __host__ __device__ no_default(int value)
      : value(value) {}
  int value;
};
} // namespace

void move_a_type_without_a_default_constructor(cohort::p2p_clique& peers,
                                               cohort::distributed_buffer<no_default>& x,
                                               cohort::distributed_buffer<no_default>& all) {
  cohort::all_gather(peers, std::as_const(x), all);
  cohort::broadcast(peers, x, 0);
}

// An operator that merges into its first argument, taken by reference: the engine calls it with
// its accumulator and a value, both named (a check that asked for temporaries would refuse it).
namespace {
struct merge_into {
  __device__ int2 operator()(int2& into, const int2& b) const {
    into.x += b.x;
    into.y += b.y;
    return into;
  }
};
} // namespace

void reduce_with_a_merging_operator(cohort::p2p_clique& peers,
                                    cohort::distributed_buffer<int2>& x) {
  cohort::all_reduce(peers, x, merge_into{});
}
