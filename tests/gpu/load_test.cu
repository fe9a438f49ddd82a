// Load: 100,000 back-to-back small collectives and for_each calls with no host synchronisation in
// between, from one host thread and from one host thread per GPU: nothing deadlocks, and the
// result is exact. Each round adds one to every element on every member, then all members take
// the minimum: a member that read a peer's value from before the peer's addition (an ordering
// lost anywhere) falls one behind for good, so the final value counts every round.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <exception>
#include <thread>

namespace {

constexpr int rounds = 100000;
constexpr std::size_t n = 256; // elements per member: a 1 KiB message

struct add_one {
  __device__ void operator()(int& x) const { x += 1; }
};

// A buffer over `group` holding the same random values on every member, and those values.
std::vector<int> fill_replicated(cohort::distributed_buffer<int>& x, unsigned seed) {
  const auto start = cohort::testing::random_values<int>(n, seed);
  for (std::size_t r = 0; r < x.shards(); ++r)
    x.local(r).copy_from_host(start);
  return start;
}

void check_every_member(cohort::distributed_buffer<int>& x, const std::vector<int>& start,
                        int added) {
  for (std::size_t r = 0; r < x.shards(); ++r) {
    std::vector<int> got(n, -1);
    x.local(r).copy_to_host(got);
    x.shard(r).stream.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += got[i] != start[i] + added;
    CAPTURE(r);
    CHECK_MESSAGE(wrong == 0,
                  wrong << " element(s) of member " << r << " are not start + " << added);
  }
}

} // namespace

TEST_CASE("100,000 back-to-back p2p all_reduces and for_each calls from one thread") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2); // two GPUs, or an emulated pair on one
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, group.size()));
  const auto start = fill_replicated(x, 41);
  for (int k = 0; k < rounds; ++k) {
    cohort::multi_device_for_each(group, x, add_one{});
    cohort::all_reduce(peers, x, cohort::min);
  }
  check_every_member(x, start, rounds);
}

#if COHORT_WITH_NCCL

TEST_CASE("100,000 back-to-back NCCL all_reduces and for_each calls from one thread") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::device_group group(cohort::devices()); // every GPU: NCCL needs distinct ones
  cohort::nccl_clique nccl(group);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, group.size()));
  const auto start = fill_replicated(x, 43);
  for (int k = 0; k < rounds; ++k) {
    cohort::multi_device_for_each(group, x, add_one{});
    cohort::all_reduce(nccl, x, cohort::min);
  }
  check_every_member(x, start, rounds);
}

TEST_CASE("100,000 back-to-back NCCL all_reduces and for_each calls from one thread per GPU") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, group.size()));
  const auto start = fill_replicated(x, 47);
  group.synchronize(); // the threads' streams start from the filled buffers
  std::vector<std::exception_ptr> failed(group.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        const cohort::shard<int> mine = x.shard(r);
        int* p = mine.data.data();
        for (int k = 0; k < rounds; ++k) {
          cohort::for_each_n(mine.stream, n, [=] __device__(std::size_t i) { p[i] += 1; });
          cohort::all_reduce(nccl.rank(r), mine.data, cohort::min, mine.stream);
        }
        nccl.rank(r).wait(mine.stream);
      } catch (...) {
        failed[r] = std::current_exception();
      }
    });
  for (auto& t : threads)
    t.join();
  for (auto& e : failed)
    if (e) std::rethrow_exception(e);
  check_every_member(x, start, rounds);
}

#endif // COHORT_WITH_NCCL
