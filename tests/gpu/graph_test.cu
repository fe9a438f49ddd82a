// The engine's state on the GPUs, and whole-group work captured into graphs: every p2p
// collective replayed 1000 times from a group_graph, interleaved with direct calls, with a
// different rank delayed before each call; sizes around the one-shot limit; epochs moved past
// 2^32; two threads with cliques of their own on the same GPUs; a clique destroyed right after a
// call; a launch that fails part-way; for_each, on_each_member and peer copies in a graph.
#include "held_stream.cuh"
#include "p2p_hooks.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <numeric>
#include <thread>
#include <utility>

namespace {

using cohort::p2p_algorithm;

__global__ void spin_for(unsigned long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

// Holds member `rank`'s stream for a while, so that its peers reach the next call first.
void delay(const cohort::device_group& group, std::size_t rank, unsigned long long ns = 20'000) {
  cohort::launch(group.stream(rank % group.size()), {.grid = 1, .block = 1}, spin_for, ns);
}

__global__ void add_to_each(int* x, std::size_t n, int value) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] += value;
}

void add_one(const cohort::device_group& group, cohort::distributed_buffer<int>& x) {
  cohort::multi_device_for_each(group, x, [] __device__(int& v) { v += 1; });
}

std::vector<std::vector<int>> initial(std::size_t ranks, std::size_t count, unsigned seed) {
  std::vector<std::vector<int>> v;
  for (std::size_t r = 0; r < ranks; ++r)
    v.push_back(cohort::testing::random_values<int>(count, seed + static_cast<unsigned>(r)));
  return v;
}

void load(cohort::distributed_buffer<int>& x, const std::vector<std::vector<int>>& values) {
  for (std::size_t r = 0; r < values.size(); ++r)
    x.local(r).copy_from_host(values[r]);
}

std::vector<int> read(const cohort::distributed_buffer<int>& y, std::size_t r) {
  return cohort::testing::shard_to_host(y, r);
}

// `step` adds one to every rank's input and runs a collective from it into its output; `check`
// compares the outputs after `k` steps with the host's reference. The step is captured into a
// graph (rank 1 delayed inside it), then replayed `rounds` times (fewer under the sanitizers:
// testing::rounds), every other round replaced by a direct call with rank 0 delayed; outputs are
// poisoned before each round.
void replay_interleaved(cohort::device_group& group, const std::function<void()>& step,
                        const std::function<void()>& poison, const std::function<void(int)>& check,
                        cohort::capture_mode mode, int rounds = 1000) {
  cohort::group_graph graph = cohort::group_graph::capture(
      group,
      [&] {
        delay(group, 1);
        step();
      },
      mode);
  const int made = cohort::testing::rounds(rounds);
  for (int k = 1; k <= made; ++k) {
    poison();
    if (k % 2 == 1) {
      graph.launch();
    } else {
      delay(group, 0);
      step();
    }
    check(k);
  }
}

const std::size_t one_shot_limit = 4096; // bytes: the counts below straddle it
// A barrier that waits this long stops the kernel: a defect costs the run 20 s, not 5 minutes.
const std::chrono::milliseconds patience = cohort::testing::patience();
const std::size_t sizes[] = {1, 1023, 1024, 1025, 7919};

} // namespace

TEST_CASE("p2p all_reduce replayed from a graph 1000 times, interleaved with direct calls") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const std::size_t members : {2, 3})
    for (const auto algorithm :
         {p2p_algorithm::automatic, p2p_algorithm::one_shot, p2p_algorithm::two_shot})
      for (const std::size_t count : sizes) {
        if (algorithm == p2p_algorithm::one_shot && count * sizeof(int) > one_shot_limit) continue;
        CAPTURE(members);
        CAPTURE(static_cast<int>(algorithm));
        CAPTURE(count);
        auto group = cohort::testing::group_of(members);
        cohort::p2p_clique peers(group, {.one_shot_limit = one_shot_limit, .patience = patience});
        const auto split = cohort::partition::replicated(count, members);
        cohort::distributed_buffer<int> x(group, split), y(group, split);
        const auto x0 = initial(members, count, 11);
        load(x, x0);
        std::size_t wrong = 0;
        replay_interleaved(
            group,
            [&] {
              add_one(group, x);
              cohort::all_reduce(peers, std::as_const(x), y, cohort::sum, {.algorithm = algorithm});
            },
            [&] { y.fill_bytes(cohort::testing::poison_byte); },
            [&](int k) {
              for (std::size_t r = 0; r < members; ++r) {
                const auto got = read(y, r);
                for (std::size_t i = 0; i < count; ++i) {
                  long long want = 0;
                  for (std::size_t q = 0; q < members; ++q)
                    want += x0[q][i] + k;
                  wrong += got[i] != want;
                }
              }
            },
            count % 2 ? cohort::capture_mode::global : cohort::capture_mode::this_thread,
            count == 7919 ? 200 : 1000);
        CHECK(wrong == 0);
      }
}

TEST_CASE("p2p reduce_scatter, reduce, all_gather and broadcast replayed from graphs") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const std::size_t members : {2, 3}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    cohort::p2p_clique peers(group, {.one_shot_limit = one_shot_limit, .patience = patience});
    const std::size_t count = 1000;
    const auto poison_byte = cohort::testing::poison_byte;
    {
      INFO("reduce_scatter");
      cohort::distributed_buffer<int> x(group,
                                        cohort::partition::replicated(count * members, members));
      cohort::distributed_buffer<int> y(group, cohort::partition::replicated(count, members));
      const auto x0 = initial(members, count * members, 21);
      load(x, x0);
      std::size_t wrong = 0;
      replay_interleaved(
          group,
          [&] {
            add_one(group, x);
            cohort::reduce_scatter(peers, std::as_const(x), y, cohort::sum);
          },
          [&] { y.fill_bytes(poison_byte); },
          [&](int k) {
            for (std::size_t r = 0; r < members; ++r) {
              const auto got = read(y, r);
              for (std::size_t i = 0; i < count; ++i) {
                long long want = 0;
                for (std::size_t q = 0; q < members; ++q)
                  want += x0[q][r * count + i] + k;
                wrong += got[i] != want;
              }
            }
          },
          cohort::capture_mode::global);
      CHECK(wrong == 0);
    }
    {
      INFO("reduce to the last rank");
      const int root = static_cast<int>(members) - 1;
      const auto split = cohort::partition::replicated(count, members);
      cohort::distributed_buffer<int> x(group, split), y(group, split);
      const auto x0 = initial(members, count, 31);
      load(x, x0);
      std::size_t wrong = 0;
      replay_interleaved(
          group,
          [&] {
            add_one(group, x);
            cohort::reduce(peers, std::as_const(x), y, cohort::sum, root);
          },
          [&] { y.fill_bytes(poison_byte); },
          [&](int k) {
            const auto got = read(y, static_cast<std::size_t>(root));
            for (std::size_t i = 0; i < count; ++i) {
              long long want = 0;
              for (std::size_t q = 0; q < members; ++q)
                want += x0[q][i] + k;
              wrong += got[i] != want;
            }
          },
          cohort::capture_mode::this_thread);
      CHECK(wrong == 0);
    }
    {
      INFO("all_gather");
      cohort::distributed_buffer<int> x(group, cohort::partition::replicated(count, members));
      cohort::distributed_buffer<int> y(group,
                                        cohort::partition::replicated(count * members, members));
      const auto x0 = initial(members, count, 41);
      load(x, x0);
      std::size_t wrong = 0;
      replay_interleaved(
          group,
          [&] {
            add_one(group, x);
            cohort::all_gather(peers, std::as_const(x), y);
          },
          [&] { y.fill_bytes(poison_byte); },
          [&](int k) {
            for (std::size_t r = 0; r < members; ++r) {
              const auto got = read(y, r);
              for (std::size_t q = 0; q < members; ++q)
                for (std::size_t i = 0; i < count; ++i)
                  wrong += got[q * count + i] != x0[q][i] + k;
            }
          },
          cohort::capture_mode::global);
      CHECK(wrong == 0);
    }
    {
      INFO("broadcast from rank 1");
      cohort::distributed_buffer<int> x(group, cohort::partition::replicated(count, members));
      const auto x0 = initial(members, count, 51);
      // The broadcast is in place, so after one round every rank would hold the root's values
      // and a broadcast that did nothing would pass every later round. Before each round the
      // root is reloaded with its values (x0[1] + k - 1, which the step's add_one makes
      // x0[1] + k) and every other rank is poisoned again.
      const std::vector<int> poisoned(count, cohort::testing::poison_value<int>());
      std::vector<int> root_before(count);
      int before_round = 0;
      std::size_t wrong = 0;
      replay_interleaved(
          group,
          [&] {
            add_one(group, x);
            cohort::broadcast(peers, x, 1);
          },
          [&] {
            for (std::size_t i = 0; i < count; ++i)
              root_before[i] = x0[1][i] + before_round;
            ++before_round;
            for (std::size_t r = 0; r < members; ++r)
              x.local(r).copy_from_host(r == 1 ? root_before : poisoned);
          },
          [&](int k) {
            for (std::size_t r = 0; r < members; ++r) {
              const auto got = read(x, r);
              for (std::size_t i = 0; i < count; ++i)
                wrong += got[i] != x0[1][i] + k;
            }
          },
          cohort::capture_mode::global);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("p2p calls stay right with epochs moved past 2^32 and near 2^62, a block unused long") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, {.one_shot_limit = one_shot_limit, .patience = patience});
  for (const std::uint64_t epoch :
       {(std::uint64_t{1} << 31) - 4, (std::uint64_t{1} << 32) - 8, std::uint64_t{1} << 62}) {
    CAPTURE(epoch);
    cohort::testing::p2p::set_epochs(peers, epoch);
    // Small calls (one block), then a large two-shot call over many blocks: the blocks unused
    // until then must still wait for their peers.
    for (const std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1} << 22}) {
      const auto split = cohort::partition::replicated(count, 2);
      cohort::distributed_buffer<int> x(group, split), y(group, split);
      const auto x0 = initial(2, count, 61);
      load(x, x0);
      for (int round = 0; round < 4; ++round) {
        y.fill_bytes(cohort::testing::poison_byte);
        delay(group, static_cast<std::size_t>(round), 200'000);
        cohort::all_reduce(peers, std::as_const(x), y, cohort::sum);
        std::size_t wrong = 0;
        for (std::size_t r = 0; r < 2; ++r) {
          const auto got = read(y, r);
          for (std::size_t i = 0; i < count; ++i)
            wrong += got[i] != x0[0][i] + x0[1][i];
        }
        CAPTURE(count);
        CAPTURE(round);
        CHECK(wrong == 0);
      }
    }
  }
}

// Two threads, each with its own emulated pair and clique on the same GPU, make 1000 calls of a
// one-shot and then 1000 of a two-shot size each, reading the outputs back every `read_every`
// calls and after each size's last call.
namespace {
void two_threads_with_own_cliques(int read_every) {
  std::atomic<std::size_t> wrong{0};
  std::atomic<int> failures{0};
  auto run = [&](unsigned seed) {
    try {
      auto group = cohort::testing::group_of(2);
      cohort::p2p_clique peers(group, {.patience = patience});
      // Alternate a one-shot and a two-shot size, so that each thread loads kernels while the
      // other thread's kernels run.
      for (const std::size_t count : {std::size_t{1000}, (std::size_t{1} << 21) + 1000}) {
        const auto split = cohort::partition::replicated(count, 2);
        cohort::distributed_buffer<int> x(group, split), y(group, split);
        const auto x0 = initial(2, count, seed);
        load(x, x0);
        for (int k = 1; k <= 1000; ++k) {
          add_one(group, x);
          cohort::all_reduce(peers, std::as_const(x), y, cohort::sum);
          if (k == 1000 || (read_every > 0 && k % read_every == 0))
            for (std::size_t r = 0; r < 2; ++r) {
              const auto got = read(y, r);
              for (std::size_t i = 0; i < count; ++i)
                wrong += got[i] != x0[0][i] + x0[1][i] + 2 * k;
            }
        }
      }
    } catch (const std::exception& e) {
      std::printf("thread failed: %s\n", e.what());
      ++failures;
    }
  };
  std::thread a(run, 71u), b(run, 81u);
  a.join();
  b.join();
  CHECK(failures == 0);
  CHECK(wrong == 0);
}
} // namespace

TEST_CASE("two threads, each with its own group and clique on the same GPUs, 2000 calls each") {
  COHORT_SKIP_UNLESS_GPUS(1);
  two_threads_with_own_cliques(250);
}

// With no read-back between calls, neither thread makes a call that waits for the GPU while the
// other launches. The compute-sanitizer runs leave both forms out: the tools serialize CUDA calls
// across threads, so one thread's wait would hold the other between its ranks' launches.
TEST_CASE("two threads, each with its own group and clique on the same GPUs, 2000 calls each, "
          "read back only after each size's last call") {
  COHORT_SKIP_UNLESS_GPUS(1);
  two_threads_with_own_cliques(0);
}

TEST_CASE("a clique destroyed right after a one-shot call frees its memory only after every rank") {
  COHORT_SKIP_UNLESS_GPUS(1);
  // Unequal SM shares make rank 1 read rank 0's scratch slowly, long after rank 0 is done.
  auto group =
      cohort::device_count() >= 2 || !cohort::sm_partitioning_available(cohort::device_ref{0})
          ? cohort::testing::group_of(2)
          : cohort::device_group::emulated(cohort::device_ref{0}, {8.0, 1.0});
  const std::size_t count = std::size_t{2} << 20; // 8 MiB, one-shot
  const auto split = cohort::partition::replicated(count, 2);
  const auto x0 = initial(2, count, 91);
  std::size_t wrong = 0;
  for (int round = 0; round < 10; ++round) {
    cohort::distributed_buffer<int> x(group, split), y(group, split);
    load(x, x0);
    y.fill_bytes(cohort::testing::poison_byte);
    {
      cohort::p2p_clique peers(group, {.patience = patience});
      delay(group, 1, 100'000);
      cohort::all_reduce(peers, std::as_const(x), y, cohort::sum,
                         {.algorithm = p2p_algorithm::one_shot});
    } // destroyed at once; the new allocations below may take its memory
    std::vector<cohort::device_buffer<unsigned char>> reuse;
    for (std::size_t r = 0; r < 2; ++r) {
      reuse.emplace_back(2 * cohort::p2p_clique::default_one_shot_limit + 4096, group.stream(r));
      reuse.back().fill_bytes(0xFF);
    }
    for (std::size_t r = 0; r < 2; ++r) {
      const auto got = read(y, r);
      for (std::size_t i = 0; i < count; ++i)
        wrong += got[i] != x0[0][i] + x0[1][i];
    }
  }
  CHECK(wrong == 0);
}

// Alone on the GPU (docs/design.md): beside other processes that time-share it, the release
// kernel was seen not to reach an emulated member's waiting kernel.
TEST_CASE("a launch that fails part-way releases the ranks that launched and breaks the clique "
          "[serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const std::size_t members : {2, 3}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    const std::size_t count = 4096;
    const auto split = cohort::partition::replicated(count, members);
    cohort::distributed_buffer<int> x(group, split), y(group, split);
    const auto x0 = initial(members, count, 101);
    load(x, x0);
    // Elements of `out`'s shards that are not the sum over ranks of x0.
    const auto wrong_sums = [&](const cohort::distributed_buffer<int>& out) {
      std::size_t wrong = 0;
      for (std::size_t r = 0; r < members; ++r) {
        const auto got = read(out, r);
        for (std::size_t i = 0; i < count; ++i) {
          long long want = 0;
          for (std::size_t q = 0; q < members; ++q)
            want += x0[q][i];
          wrong += got[i] != want;
        }
      }
      return wrong;
    };
    cohort::p2p_clique peers(group, {.patience = patience});
    cohort::all_reduce(peers, std::as_const(x), y, cohort::sum); // loads the kernel
    // A call still queued behind a long kernel on the member whose next launch fails: the release
    // comes after it. (Before, it raised the slots at once: that call's barrier passed without
    // the member and read its scratch unwritten, and its values then overwrote the release, so
    // the failed call's ranks waited out their patience.)
    cohort::distributed_buffer<int> earlier(group, split);
    earlier.fill_bytes(cohort::testing::poison_byte);
    delay(group, members - 1, 300'000'000);
    cohort::all_reduce(peers, std::as_const(x), earlier, cohort::sum);
    cohort::testing::p2p::fail_launch_on_member(static_cast<int>(members) - 1);
    CHECK_THROWS_AS(cohort::all_reduce(peers, std::as_const(x), y, cohort::sum),
                    cohort::cuda_error);
    group.synchronize(); // the ranks that launched were released: this returns
    CHECK(peers.broken());
    CHECK(wrong_sums(earlier) == 0);
    CHECK_THROWS_WITH_AS(cohort::all_reduce(peers, std::as_const(x), y, cohort::sum),
                         doctest::Contains("make a new p2p_clique"), std::invalid_argument);
    // A retry on a new clique is right.
    cohort::p2p_clique again(group, {.patience = patience});
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::all_reduce(again, std::as_const(x), y, cohort::sum);
    CHECK(wrong_sums(y) == 0);
  }
}

TEST_CASE("for_each over indices, on_each_member, peer copies, fork and join in a graph, mixed "
          "with direct calls") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  // A graph captures only direct copies between two GPUs (the peer copy below).
  REQUIRE(group.enable_peer_access());
  const std::size_t n = 100'003;
  cohort::distributed_buffer<int> x(group, n);
  cohort::distributed_buffer<int> copy(group,
                                       cohort::partition::replicated(x.shard(0).data.size(), 2));
  x.fill_bytes(0);
  int* first = x.shard(0).data.data();
  int* second = x.shard(1).data.data();
  const std::size_t offset = x.shard(1).offset;
  auto step = [&] {
    // x[i] += i + 1 through the index form, then +1 through each member's own launch.
    cohort::multi_device_for_each(group, cohort::indices(n), [=] __device__(std::size_t i) {
      int* p = i < offset ? first + i : second + (i - offset);
      *p += static_cast<int>(i % 1000) + 1;
    });
    cohort::on_each_member(group, [&](const cohort::member& m) {
      const auto mine = x.shard(m.rank).data;
      cohort::launch(m.stream, {.grid = 64, .block = 256}, add_to_each, mine.data(), mine.size(),
                     1);
    });
    x.local(0).copy_to(copy.local(1)); // member 0's shard into member 1's memory
  };
  // A const group captures as well: capture changes nothing in the group object.
  cohort::group_graph graph = cohort::group_graph::capture(std::as_const(group), step);
  std::size_t wrong = 0;
  for (int k = 1; k <= 200; ++k) {
    copy.fill_bytes(cohort::testing::poison_byte);
    if (k % 3 == 0)
      step();
    else
      graph.launch();
    const auto got = read(copy, 1);
    for (std::size_t i = 0; i < got.size(); ++i)
      wrong += got[i] != k * (static_cast<int>(i % 1000) + 2);
  }
  CHECK(wrong == 0);
}

TEST_CASE("group_graph refuses a nested capture and can be moved and destroyed while it runs") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  CHECK_THROWS_WITH_AS(cohort::group_graph::capture(
                           group, [&] { (void)cohort::group_graph::capture(group, [] {}); }),
                       doctest::Contains("member 0 (device 0)'s stream is already being "
                                         "captured; captures do not nest"),
                       std::invalid_argument);
  // The failed capture left no stream capturing: a direct call works.
  cohort::distributed_buffer<int> x(group, 1000);
  x.fill_bytes(0);
  auto graph = cohort::group_graph::capture(
      group, [&] { cohort::multi_device_for_each(group, x, [] __device__(int& v) { v += 2; }); });
  cohort::group_graph moved = std::move(graph);
  for (int k = 0; k < 10; ++k)
    moved.launch();
  { cohort::group_graph gone = std::move(moved); } // destroyed with replays in flight
  std::vector<int> host(1000);
  x.copy_to_host(host);
  group.synchronize();
  CHECK(std::all_of(host.begin(), host.end(), [](int v) { return v == 20; }));
  CHECK_THROWS_AS(graph.launch(), std::invalid_argument);
}

TEST_CASE("what cannot be captured is refused by name inside group_graph::capture") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::distributed_buffer<int> x(group, 1000);
  x.fill_bytes(0);
  CHECK_THROWS_WITH_AS(cohort::group_graph::capture(group, [&] { group.synchronize(); }),
                       doctest::Contains("device_group::synchronize: member 0"), std::logic_error);
  CHECK_THROWS_WITH_AS(
      cohort::group_graph::capture(
          group, [&] { (void)cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{}); }),
      doctest::Contains("multi_device_reduce"), std::logic_error);
  // Each refusal ended the capture: nothing is left capturing, and direct work runs.
  for (std::size_t i = 0; i < group.size(); ++i)
    CHECK_FALSE(group.stream(i).is_capturing());
  CHECK(cohort::multi_device_reduce(group, x, 5, cuda::std::plus<>{}).wait() == 5);
}

namespace {

// A pair (emulated on one GPU) with x loaded with random values, y poisoned, and a clique whose
// all_reduce kernel is loaded; `wrong_sums` counts the elements of y that are not x's sum.
struct loaded_pair {
  static constexpr std::size_t count = 1000;
  cohort::device_group group = cohort::testing::group_of(2);
  cohort::distributed_buffer<int> x{group, cohort::partition::replicated(count, 2)};
  cohort::distributed_buffer<int> y{group, cohort::partition::replicated(count, 2)};
  std::vector<std::vector<int>> x0;
  cohort::p2p_clique peers{group, {.patience = patience}};

  explicit loaded_pair(unsigned seed)
      : x0(initial(2, count, seed)) {
    load(x, x0);
    cohort::all_reduce(peers, std::as_const(x), y, cohort::sum); // loads the kernel
    y.fill_bytes(cohort::testing::poison_byte);
  }
  std::size_t wrong_sums() const {
    std::size_t wrong = 0;
    for (std::size_t r = 0; r < 2; ++r) {
      const auto got = read(y, r);
      for (std::size_t i = 0; i < count; ++i)
        wrong += got[i] != x0[0][i] + x0[1][i];
    }
    return wrong;
  }
};

} // namespace

TEST_CASE("a p2p call whose members' streams are not all in one capture is refused before it "
          "enqueues") {
  COHORT_SKIP_UNLESS_GPUS(1);
  loaded_pair pair(61);
  // Only member 0's stream captured (a user's own capture that forgot to fork the others): rank 1
  // would run now and wait for a rank 0 that exists only in the graph.
  cohort::testing::lone_capture capture(pair.group, 0);
  const std::string message = cohort::testing::logic_error_message(
      [&] { cohort::all_reduce(pair.peers, std::as_const(pair.x), pair.y, cohort::sum); });
  const std::size_t nodes = capture.end();
  CAPTURE(message);
  CHECK(message.find("member 1") != std::string::npos);
  CHECK(message.find("Nothing was enqueued") != std::string::npos);
  CHECK(nodes == 0);
  CHECK_FALSE(pair.peers.broken());
  cohort::all_reduce(pair.peers, std::as_const(pair.x), pair.y, cohort::sum); // still works
  CHECK(pair.wrong_sums() == 0);
}

TEST_CASE("an error an earlier CUDA call left behind does not stop a p2p call between its ranks") {
  COHORT_SKIP_UNLESS_GPUS(1);
  loaded_pair pair(63);
  // A failed call the user checked by its return value leaves its error recorded for the thread.
  // The launches used to report it after rank 0 had launched: rank 0 then waited for ever.
  REQUIRE(cudaSetDevice(1 << 20) == cudaErrorInvalidDevice);
  CHECK_NOTHROW(cohort::all_reduce(pair.peers, std::as_const(pair.x), pair.y, cohort::sum));
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice); // still the caller's to read
  CHECK_FALSE(pair.peers.broken());
  CHECK(pair.wrong_sums() == 0);
}

TEST_CASE("a p2p_clique made inside a capture is refused by name before it enqueues") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  // It used to enqueue its allocations into the capture, then fail in stream_ref::synchronize.
  CHECK_THROWS_WITH_AS(cohort::group_graph::capture(
                           group, [&] { cohort::p2p_clique peers(group, {.patience = patience}); }),
                       doctest::Contains("cohort::p2p_clique: member 0's stream"),
                       std::logic_error);
  // Nothing is left capturing, and a clique made afterwards works.
  for (std::size_t r = 0; r < 2; ++r)
    CHECK_FALSE(group.stream(r).is_capturing());
  loaded_pair pair(65);
  cohort::all_reduce(pair.peers, std::as_const(pair.x), pair.y, cohort::sum);
  CHECK(pair.wrong_sums() == 0);
}

TEST_CASE("device_group::synchronize refuses a capturing member before it waits for any") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  // Member 0 is held busy until the test lets it go; member 1's stream alone is being captured.
  cohort::testing::held_stream member_0(group.stream(0));
  cohort::testing::lone_capture capture(group, 1);
  const std::string message = cohort::testing::logic_error_message([&] { group.synchronize(); });
  (void)capture.end();
  CAPTURE(message);
  CHECK(message.find("device_group::synchronize: member 1") != std::string::npos);
  // It used to wait for member 0 first (here until the hold timed out), then fail in
  // stream_ref::synchronize: member 0 must still be held when the refusal comes.
  CHECK(member_0.busy());
  member_0.release();
  group.synchronize();
}

TEST_CASE("multi_device_for_each over indices split by a balancer is refused under capture") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::adaptive_balancer balancer(group);
  cohort::distributed_buffer<int> x(group, 1000);
  x.fill_bytes(0);
  int* first = x.shard(0).data.data();
  const auto set_one = [=] __device__(std::size_t i) { first[i % 1000] = 1; };
  CHECK_THROWS_WITH_AS(
      cohort::group_graph::capture(
          group,
          [&] { cohort::multi_device_for_each(group, cohort::indices(10, balancer), set_one); }),
      doctest::Contains("multi_device_for_each: member 0"), std::logic_error);
  for (std::size_t i = 0; i < group.size(); ++i)
    CHECK_FALSE(group.stream(i).is_capturing());
}
