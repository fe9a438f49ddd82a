// A peer that does not arrive costs the clique, not the process: a member whose kernel cannot start
// (its stream held, the call enqueued behind), a member that skips a call, and a peer that never
// signals, in the engine's calls and in users' kernels (sync, wait, grid_sync). In each, the
// waiting rank gives up after the clique's patience, the error names the right rank, peer and call
// within patience + 1 s, the context stays usable (an allocation and a kernel on every device),
// and 1,000 calls on a new clique are exact. A graph replayed on a stopped clique does nothing and
// the error is reported the same way; progress() answers from another thread while a call waits
// for ever; twenty faults in one process leave no device or host memory behind.
//
// Its own program: were a fault to trap (as it did), the context would be lost for what follows.
#include "held_stream.cuh"
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using cohort::p2p_handle;

constexpr unsigned grid = 2, block = 128;
const std::size_t count = 1000; // elements per member

// A buffer of `n` elements on each member (a buffer's size is its members' total).
template <class T>
cohort::distributed_buffer<T> each_holding(const cohort::device_group& group, std::size_t n) {
  return cohort::distributed_buffer<T>(group, n * group.size());
}

// Short natively; under the sanitizers (which set COHORT_TEST_ROUNDS_DIVISOR) a barrier that
// passes may spin this long, so the faulty clique waits longer there.
std::chrono::milliseconds fault_patience() {
  const char* divisor = std::getenv("COHORT_TEST_ROUNDS_DIVISOR");
  return divisor != nullptr && *divisor != '\0' ? std::chrono::seconds(10)
                                                : std::chrono::milliseconds(500);
}
bool timing_checked() {
  const char* divisor = std::getenv("COHORT_TEST_ROUNDS_DIVISOR");
  return divisor == nullptr || *divisor == '\0';
}

// Waits, polling without a CUDA call, until `peers` has stopped; returns how long that took from
// `since`, or a time past the bound where it never did.
clock_type::duration until_broken(const cohort::p2p_clique& peers, clock_type::time_point since) {
  const auto bound = peers.options().patience + std::chrono::seconds(5);
  while (!peers.broken()) {
    if (clock_type::now() - since > bound) return bound + std::chrono::seconds(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return clock_type::now() - since;
}

void check_reported_in_time(const cohort::p2p_clique& peers, clock_type::duration took) {
  INFO("reported after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms");
  CHECK(took >= peers.options().patience);
  if (timing_checked()) CHECK(took <= peers.options().patience + std::chrono::seconds(1));
}

// The p2p_error `call` throws (checked to be one), with the rank that gave up first (any rank but
// `peer` where `rank` is -1: with three members, two wait for the third), the peer it waited for,
// and the engine's call it waited in.
template <class Call>
void check_p2p_error(Call&& call, int rank, int peer, const std::string& in_call) {
  try {
    call();
    FAIL("no p2p_error");
  } catch (const cohort::p2p_error& e) {
    INFO(e.what());
    REQUIRE(!e.waits().empty());
    if (rank >= 0) CHECK(e.rank() == rank);
    CHECK(e.rank() != peer);
    CHECK(e.peer() == peer);
    CHECK(e.waits().front().call == in_call);
    CHECK(e.waits().front().waited >= std::chrono::milliseconds(1));
    CHECK(e.waits().front().seen < e.waits().front().value);
    // A one-shot call waits at its first barrier value, epoch + 1 (epochs move by 4 a call); its
    // lines path (at most 8 KiB a rank) reports its wait in the same terms.
    if (in_call == "all_reduce (one-shot)") CHECK(e.waits().front().value % 4 == 1);
    const std::string text = e.what();
    CHECK(text.find("Rank " + std::to_string(e.rank())) != std::string::npos);
    CHECK(text.find("for rank " + std::to_string(peer)) != std::string::npos);
    CHECK(text.find("make a new p2p_clique") != std::string::npos);
  }
}

__global__ void fill_with(int* out, std::size_t n, int value) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = value;
}

// After a fault: a new allocation and a kernel on every member, read back.
void check_every_device_works(const cohort::device_group& group) {
  for (std::size_t i = 0; i < group.size(); ++i) {
    cohort::device_buffer<int> b(4096, group.stream(i));
    cohort::launch(group.stream(i), {.grid = 8, .block = 256}, fill_with, b.data(), b.size(),
                   static_cast<int>(i) + 7);
    std::vector<int> host(b.size());
    b.copy_to_host(host);
    group.stream(i).synchronize();
    for (int v : host)
      REQUIRE(v == static_cast<int>(i) + 7);
  }
}

// `calls` all_reduces of random integers on a new clique, each output poisoned first and checked
// against the host's sums.
void check_new_clique_is_exact(const cohort::device_group& group, int calls) {
  cohort::p2p_clique peers(group, {.patience = cohort::testing::patience()});
  auto x = each_holding<int>(group, count), y = each_holding<int>(group, count);
  std::vector<long long> want(count, 0);
  for (std::size_t r = 0; r < group.size(); ++r) {
    const auto values = cohort::testing::random_values<int>(count, 17 + static_cast<unsigned>(r));
    x.local(r).copy_from_host(values);
    for (std::size_t i = 0; i < count; ++i)
      want[i] += values[i];
  }
  for (int c = 0; c < calls; ++c) {
    const bool checked = c % 100 == 99 || c == calls - 1;
    if (checked) y.fill_bytes(cohort::testing::poison_byte);
    cohort::all_reduce(peers, std::as_const(x), y, cohort::sum);
    if (!checked) continue;
    for (std::size_t r = 0; r < group.size(); ++r) {
      const auto got = cohort::testing::shard_to_host(y, r);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i)
        wrong += got[i] != want[i];
      REQUIRE(wrong == 0);
    }
  }
}

// What a fault must leave working: every device, and a new clique's calls.
void check_survived(const cohort::device_group& group) {
  check_every_device_works(group);
  check_new_clique_is_exact(group, 1000);
}

// The clique's first call, which loads its kernel (a kernel loaded while a stream is held may
// wait for that stream).
void load_all_reduce(cohort::p2p_clique& peers, cohort::distributed_buffer<int>& x) {
  cohort::all_reduce(peers, x, cohort::sum);
  for (std::size_t i = 0; i < peers.size(); ++i)
    peers.stream(i).synchronize();
}

// Member `missing`'s stream held while the others all_reduce: they give up on it.
void member_cannot_start(const cohort::device_group& group, std::size_t missing) {
  cohort::p2p_clique peers(group, {.patience = fault_patience()});
  auto x = each_holding<int>(group, count);
  x.fill_bytes(0);
  load_all_reduce(peers, x);
  {
    cohort::testing::held_stream hold(group.stream(missing));
    const auto since = clock_type::now();
    cohort::all_reduce(peers, x, cohort::sum);
    check_reported_in_time(peers, until_broken(peers, since));
    CHECK(hold.busy()); // the missing member's kernel never started
    const int waiter = peers.size() == 2 ? (missing == 0 ? 1 : 0) : -1;
    check_p2p_error([&] { peers.check(); }, waiter, static_cast<int>(missing),
                    "all_reduce (one-shot)");
    // Refused before anything is enqueued, with the same error.
    check_p2p_error([&] { cohort::all_reduce(peers, x, cohort::sum); }, waiter,
                    static_cast<int>(missing), "all_reduce (one-shot)");
  } // released: its kernel starts, finds the clique stopped, and leaves
  const int waiter = peers.size() == 2 ? (missing == 0 ? 1 : 0) : -1;
  check_p2p_error([&] { group.synchronize(); }, waiter, static_cast<int>(missing),
                  "all_reduce (one-shot)");
}

// Every rank but `skipper` meets at a sync; `skipper` returns before opening its session. Each
// block writes whether its sync met into verdicts[rank][block].
__global__ void sync_without(p2p_handle<int> h, int skipper, int* verdicts) {
  if (h.rank() == skipper) return;
  auto s = h.session();
  const bool met = s.sync();
  if (threadIdx.x == 0) verdicts[blockIdx.x] = met ? 1 : 0;
  if (!met) return;
  s.end();
}

// Every rank but `silent` waits for a signal from `silent`, which never sends one.
__global__ void wait_for_silent(p2p_handle<int> h, int silent, int* verdicts) {
  auto s = h.session();
  const bool met = h.rank() == silent || s.wait(silent);
  if (threadIdx.x == 0) verdicts[blockIdx.x] = met ? 1 : 0;
  if (!met) return;
  s.end();
}

// Every rank but `skipper` makes a grid_sync; every block of a waiting rank must get false.
__global__ void grid_sync_without(p2p_handle<int> h, int skipper, int* verdicts) {
  if (h.rank() == skipper) return;
  auto s = h.session();
  const bool met = s.grid_sync();
  if (threadIdx.x == 0) verdicts[blockIdx.x] = met ? 1 : 0;
  if (!met) return;
  s.end();
}

using user_kernel = void (*)(p2p_handle<int>, int, int*);

// One launch of `kernel` with `odd` (the skipper or the silent rank); every rank but `odd` must see
// every block's session call fail, and the error name rank `waiter` and `in_call`.
void user_kernel_fault(const cohort::device_group& group, user_kernel kernel, bool cooperative,
                       int odd, const std::string& in_call) {
  cohort::p2p_clique peers(group, {.patience = fault_patience()});
  auto x = each_holding<int>(group, count), verdicts = each_holding<int>(group, grid);
  x.fill_bytes(0);
  verdicts.fill_bytes(cohort::testing::poison_byte);
  const auto since = clock_type::now();
  cohort::p2p_launch(peers, {.grid = grid, .block = block, .cooperative = cooperative}, kernel,
                     [&](std::size_t rank) {
                       return std::make_tuple(cohort::p2p_handle_for(peers, x, rank), odd,
                                              verdicts.local(rank).data());
                     });
  check_reported_in_time(peers, until_broken(peers, since));
  const int waiter = odd == 0 ? 1 : 0;
  check_p2p_error([&] { group.synchronize(); }, waiter, odd, in_call);
  for (std::size_t r = 0; r < group.size(); ++r) {
    if (static_cast<int>(r) == odd) continue;
    const auto got = cohort::testing::shard_to_host(verdicts, r);
    for (unsigned b = 0; b < grid; ++b) {
      INFO("rank " << r << ", block " << b);
      CHECK(got[b] == 0);
    }
  }
  // Refused before anything is enqueued.
  check_p2p_error(
      [&] {
        cohort::p2p_launch(peers, {.grid = grid, .block = block}, kernel, [&](std::size_t rank) {
          return std::make_tuple(cohort::p2p_handle_for(peers, x, rank), odd,
                                 verdicts.local(rank).data());
        });
      },
      waiter, odd, in_call);
}

long resident_kilobytes() {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word)
    if (word == "VmRSS:") {
      long kb = 0;
      status >> kb;
      return kb;
    }
  return 0;
}

std::size_t device_bytes_used(const cohort::device_group& group) {
  std::size_t used = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    cohort::scoped_device on(group.device(i));
    cohort::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaMemPool_t pool = nullptr;
    cohort::check_cuda(cudaDeviceGetDefaultMemPool(&pool, group.device(i).get()),
                       "cudaDeviceGetDefaultMemPool");
    cohort::check_cuda(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
    std::size_t free = 0, total = 0;
    cohort::check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    used += total - free;
    if (group.is_emulated()) break; // one device
  }
  return used;
}

} // namespace

TEST_CASE("a member whose kernel cannot start: the clique stops, names it, and a new one works") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {2u, 3u}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    member_cannot_start(group, members - 1);
    check_survived(group);
  }
}

TEST_CASE("a member that skips a user's kernel: every block's sync returns false together") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  user_kernel_fault(group, sync_without, false, 1, "p2p_session::sync");
  check_survived(group);
}

TEST_CASE("a peer that never signals: wait returns false, and the error names the wait") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  user_kernel_fault(group, wait_for_silent, false, 0, "p2p_session::wait");
  check_survived(group);
}

TEST_CASE("a member that skips a grid_sync: every block of its peers gets false") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  user_kernel_fault(group, grid_sync_without, true, 1, "p2p_session::grid_sync");
  check_survived(group);
}

TEST_CASE("a graph replayed on a stopped clique does nothing, and the error is reported the same") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, {.patience = fault_patience()});
  auto x = each_holding<int>(group, count), y = each_holding<int>(group, count);
  x.fill_bytes(0);
  load_all_reduce(peers, x);
  cohort::group_graph graph = cohort::group_graph::capture(
      group, [&] { cohort::all_reduce(peers, std::as_const(x), y, cohort::sum); });
  {
    cohort::testing::held_stream hold(group.stream(1));
    cohort::all_reduce(peers, x, cohort::sum);
    (void)until_broken(peers, clock_type::now());
  }
  check_p2p_error([&] { group.synchronize(); }, 0, 1, "all_reduce (one-shot)");
  y.fill_bytes(cohort::testing::poison_byte);
  graph.launch();
  check_p2p_error([&] { group.synchronize(); }, 0, 1, "all_reduce (one-shot)");
  for (std::size_t r = 0; r < group.size(); ++r) {
    const auto got = cohort::testing::shard_to_host(y, r);
    std::size_t written = 0;
    for (int v : got)
      written += v != cohort::testing::poison_value<int>();
    CHECK(written == 0); // the replay left its output as it was
  }
}

TEST_CASE("progress() answers from another thread while a call waits for ever") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, {.patience = cohort::p2p_clique_options::wait_forever});
  auto x = each_holding<int>(group, count);
  x.fill_bytes(0);
  load_all_reduce(peers, x);
  std::vector<cohort::p2p_rank_progress> seen;
  {
    cohort::testing::held_stream hold(group.stream(1));
    cohort::all_reduce(peers, x, cohort::sum);
    std::atomic<bool> answered{false};
    std::thread watcher([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200)); // past the 1 ms mark
      seen = peers.progress();
      answered = true;
    });
    watcher.join();
    CHECK(answered);
    CHECK(hold.busy()); // the call still waits
  }
  group.synchronize(); // released: the call completes, and nothing is reported
  INFO(cohort::to_string(seen));
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].in_call());
  CHECK(seen[0].started_call == "all_reduce (one-shot)");
  CHECK(seen[0].waiting);
  CHECK(seen[0].waiting_peer == 1);
  CHECK(!seen[1].in_call());
  CHECK(seen[1].finished_call == "all_reduce (one-shot)");
  CHECK(seen[0].started_epoch == seen[1].finished_epoch); // rank 1 finished the call before
  CHECK(!seen[0].stopped);
  const auto after = peers.progress();
  CHECK(!after[0].in_call());
  CHECK(!after[0].waiting);
  CHECK(after[0].finished_epoch == after[1].finished_epoch);
  CHECK(!peers.broken());
}

TEST_CASE("twenty faults in one process leave no device or host memory behind") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const int rounds = cohort::testing::rounds(20);
  std::size_t device_after_first = 0;
  long host_after_first = 0;
  for (int round = 0; round < rounds; ++round) {
    member_cannot_start(group, 1);
    user_kernel_fault(group, wait_for_silent, false, 1, "p2p_session::wait");
    check_new_clique_is_exact(group, 50);
    if (round == 0) {
      device_after_first = device_bytes_used(group);
      host_after_first = resident_kilobytes();
    }
  }
  const std::size_t device_after_last = device_bytes_used(group);
  const long host_after_last = resident_kilobytes();
  INFO("device bytes " << device_after_first << " -> " << device_after_last << ", host kB "
                       << host_after_first << " -> " << host_after_last);
  CHECK(device_after_last <= device_after_first + (std::size_t{2} << 20));
  CHECK(host_after_last <= host_after_first + 8 * 1024);
}
