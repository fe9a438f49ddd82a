// Load: 100,000 back-to-back small collectives and for_each calls with no host synchronisation in
// between, from one host thread and from one host thread per GPU: nothing deadlocks, and the
// result is exact. Each round member r adds r + 1 to every element, then all members take the
// minimum (even rounds) or the maximum (odd rounds), so every member ends a round at the same
// value. A read of a peer's value from before its addition (too old) lowers a maximum round's
// result, or a minimum round's where the peer holds the minimum; a read from after the peer's next
// addition (too new) raises a minimum round's result. Either is kept for good, so the final value
// checks every round. The NCCL cases need two GPUs: with one rank, min and max are the identity.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <exception>
#include <thread>

namespace {

constexpr int rounds = 100000;
constexpr std::size_t n = 256; // elements per member: a 1 KiB message

struct add {
  int* x;
  int amount;
  __device__ void operator()(std::size_t i) const { x[i] += amount; }
};

// Member r adds r + 1 to its copy.
void add_per_member(cohort::distributed_buffer<int>& x) {
  for (std::size_t r = 0; r < x.shards(); ++r)
    cohort::for_each_n(x.shard(r).stream, n, add{x.shard(r).data.data(), static_cast<int>(r) + 1});
}

// What `rounds` rounds add over `members` members: 1 a minimum round, `members` a maximum round.
int added_by(int rounds, std::size_t members) {
  return (rounds + 1) / 2 + rounds / 2 * static_cast<int>(members);
}

// NCCL needs distinct GPUs; with one, the clique has one rank and the check would test nothing.
bool too_few_gpus_for_nccl() {
  if (cohort::device_count() >= 2) return false;
  cohort::testing::skip("needs 2 GPUs: an NCCL clique over one GPU has one rank, where min and max "
                        "are the identity and an ordering lost between ranks cannot show");
  return true;
}

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
    add_per_member(x);
    if (k % 2 == 0)
      cohort::all_reduce(peers, x, cohort::min);
    else
      cohort::all_reduce(peers, x, cohort::max);
  }
  check_every_member(x, start, added_by(rounds, group.size()));
}

#if COHORT_WITH_NCCL

TEST_CASE("100,000 back-to-back NCCL all_reduces and for_each calls from one thread") {
  if (too_few_gpus_for_nccl()) return;
  cohort::device_group group(cohort::devices()); // every GPU: NCCL needs distinct ones
  cohort::nccl_clique nccl(group);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, group.size()));
  const auto start = fill_replicated(x, 43);
  for (int k = 0; k < rounds; ++k) {
    add_per_member(x);
    if (k % 2 == 0)
      cohort::all_reduce(nccl, x, cohort::min);
    else
      cohort::all_reduce(nccl, x, cohort::max);
  }
  check_every_member(x, start, added_by(rounds, group.size()));
}

TEST_CASE("100,000 back-to-back NCCL all_reduces and for_each calls from one thread per GPU") {
  if (too_few_gpus_for_nccl()) return;
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
        const add mine_add{mine.data.data(), static_cast<int>(r) + 1};
        for (int k = 0; k < rounds; ++k) {
          cohort::for_each_n(mine.stream, n, mine_add);
          if (k % 2 == 0)
            cohort::all_reduce(nccl.rank(r), mine.stream, mine.data, cohort::min);
          else
            cohort::all_reduce(nccl.rank(r), mine.stream, mine.data, cohort::max);
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
  check_every_member(x, start, added_by(rounds, group.size()));
}

#endif // COHORT_WITH_NCCL
