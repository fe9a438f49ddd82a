// What the host makes of a peer that did not arrive, without a GPU: p2p_error's text and
// accessors, the progress report's text, the names of the engine's calls, the checks a group runs
// after synchronizing (group_watch), and the NCCL time-out that names every unfinished rank.
#include <cohort/errors/p2p_error.cuh>
#include <cohort/execution/detail/group_watch.cuh>
#include <cohort/p2p/detail/fault.cuh>
#include <cohort/p2p/p2p_progress.cuh>

#if COHORT_WITH_NCCL
#include <cohort/nccl/timeouts.cuh>
#endif

#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

cohort::p2p_wait barrier_wait() {
  cohort::p2p_wait w;
  w.rank = 2;
  w.device = 5;
  w.peer = 1;
  w.block = 3;
  w.call = "all_reduce (two-shot)";
  w.value = 41;
  w.seen = 37;
  w.waited = std::chrono::milliseconds(1500);
  w.reached = {41, 37, 41};
  return w;
}

} // namespace

TEST_CASE("p2p_error names the host call, each waiting rank, its block, call, peer and values") {
  cohort::p2p_wait signal = barrier_wait();
  signal.rank = 0;
  signal.device = 4;
  signal.peer = 1;
  signal.call = "p2p_session::wait";
  signal.point_to_point = true;
  signal.value = 3;
  signal.seen = 2;
  const cohort::p2p_error e("device_group::synchronize", {barrier_wait(), signal});
  const std::string text = e.what();
  CHECK(contains(text, "device_group::synchronize: the p2p clique has stopped."));
  CHECK(contains(text, "Rank 2 (device 5), block 3, waited 1500 ms in all_reduce (two-shot) for "
                       "rank 1, which did not arrive (barrier value 41 awaited, 37 reached"));
  CHECK(contains(text, "rank 0 41, rank 1 37, rank 2 41"));
  CHECK(contains(text, "Rank 0 (device 4)"));
  CHECK(contains(text, "signal 3 awaited, 2 received"));
  CHECK(contains(text, "make a new p2p_clique"));
  CHECK(contains(text, "wait_forever"));
  CHECK(e.call() == "device_group::synchronize");
  CHECK(e.rank() == 2);
  CHECK(e.peer() == 1);
  CHECK(e.waits().size() == 2);
  // A runtime error, as cuda_error is: the context is intact, the clique is not.
  const std::runtime_error& base = e;
  CHECK(contains(base.what(), "Rank 2"));
}

TEST_CASE("every call the engine reports has a name of its own") {
  using cohort::detail::p2p::call_kind;
  std::set<std::string> names;
  for (auto c : {call_kind::none, call_kind::one_shot_all_reduce, call_kind::two_shot_all_reduce,
                 call_kind::reduce_or_reduce_scatter, call_kind::all_gather, call_kind::broadcast,
                 call_kind::user_kernel, call_kind::session_sync, call_kind::session_wait,
                 call_kind::session_grid_sync})
    names.insert(cohort::detail::p2p::call_name(c));
  CHECK(names.size() == 10);
  CHECK(!names.contains("an unknown call"));
  CHECK(std::string(cohort::detail::p2p::call_name(static_cast<call_kind>(99))) ==
        "an unknown call");
}

TEST_CASE("the progress report says which rank is in its call, and on whom it waits") {
  cohort::p2p_rank_progress waiting;
  waiting.rank = 0;
  waiting.device = 0;
  waiting.started_call = "all_reduce (one-shot)";
  waiting.started_epoch = 8;
  waiting.finished_call = "all_reduce (one-shot)";
  waiting.finished_epoch = 8;
  waiting.waiting = true;
  waiting.waiting_call = "all_reduce (one-shot)";
  waiting.waiting_block = 0;
  waiting.waiting_peer = 1;
  waiting.waiting_value = 9;
  cohort::p2p_rank_progress idle;
  idle.rank = 1;
  idle.device = 0;
  idle.started_call = "all_reduce (one-shot)";
  idle.started_epoch = 4;
  idle.finished_call = "all_reduce (one-shot)";
  idle.finished_epoch = 8;
  cohort::p2p_rank_progress fresh;
  fresh.rank = 2;
  CHECK(waiting.in_call());
  CHECK(!idle.in_call());
  CHECK(!fresh.in_call());
  const std::string text = cohort::to_string({waiting, idle, fresh});
  CHECK(contains(text, "rank 0 (device 0): last started all_reduce (one-shot) at 8, last "
                       "finished all_reduce (one-shot) (to 8), in its call, block 0 waiting in "
                       "all_reduce (one-shot) for rank 1 (value 9)"));
  CHECK(contains(text, "rank 1 (device 0): last started all_reduce (one-shot) at 4"));
  CHECK(contains(text, "(to 8), idle"));
  CHECK(contains(text, "rank 2 (device 0): no call started, idle"));
}

TEST_CASE("a group's watch runs its checks in order, and a removed one no more") {
  cohort::detail::group_watch watch;
  std::vector<int> ran;
  const std::size_t first = watch.add([&] { ran.push_back(1); });
  const std::size_t second = watch.add([&] { ran.push_back(2); });
  CHECK(first != second);
  watch.check();
  CHECK(ran == std::vector<int>{1, 2});
  watch.remove(first);
  ran.clear();
  watch.check();
  CHECK(ran == std::vector<int>{2});
  // A check that throws ends the round, with its exception.
  (void)watch.add([] { throw std::runtime_error("broken clique"); });
  (void)watch.add([&] { ran.push_back(4); });
  ran.clear();
  CHECK_THROWS_WITH_AS(watch.check(), "broken clique", std::runtime_error);
  CHECK(ran == std::vector<int>{2});
  // A check may remove itself while the checks run (no deadlock), and is then gone.
  cohort::detail::group_watch other;
  int runs = 0;
  std::size_t self = 0;
  self = other.add([&] {
    ++runs;
    other.remove(self);
  });
  other.check();
  other.check();
  CHECK(runs == 1);
}

#if COHORT_WITH_NCCL
TEST_CASE("an NCCL time-out names every rank whose work did not finish") {
  try {
    cohort::detail::throw_timed_out("nccl_clique::wait", {{1, 1}, {3, 3}}, 4,
                                    std::chrono::milliseconds(2000));
    FAIL("no timeout_error");
  } catch (const cohort::timeout_error& e) {
    const std::string text = e.what();
    CHECK(contains(text, "nccl_clique::wait: the work of rank 1 of 4 (device 1), rank 3 of 4 "
                         "(device 3) did not finish within 2000 ms"));
    CHECK(contains(text, "make a new one"));
    CHECK(!contains(text, "rank 0"));
  }
}
#endif
