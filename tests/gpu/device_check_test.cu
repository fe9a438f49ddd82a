// The device API's debug checks (COHORT_DEVICE_CHECKS): a peer rank outside the clique stops the
// kernel (a trap, after a printf naming p2p_handle::peer), reported as a lost context. Its own
// program: a trapped kernel ends the CUDA context for the rest of the process.
#define COHORT_DEVICE_CHECKS 1
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>

namespace {

__global__ void read_past_the_last_rank(cohort::p2p_handle<int> h, int* out) {
  auto s = h.session();
  s.sync();
  *out = __ldcg(h.peer(h.ranks())); // one past the last rank: the check traps here
  s.end();
}

} // namespace

TEST_CASE("p2p_handle::peer with a rank outside the clique traps in a checked build") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::p2p_clique peers(group, {.patience = cohort::testing::patience()});
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(16, 2));
  cohort::distributed_buffer<int> out(group, cohort::partition::replicated(1, 2));
  try {
    cohort::p2p_launch(
        peers, {.grid = 1, .block = 32}, read_past_the_last_rank, [&](std::size_t r) {
          return std::make_tuple(cohort::p2p_handle_for(peers, x, r), out.shard(r).data.data());
        });
    group.synchronize();
    FAIL("the out-of-range rank was not caught");
  } catch (const cohort::cuda_error& e) {
    CHECK(e.context_lost());
  }
}
