// The device-side API (p2p/device.cuh): each session call (sync, signal and wait, grid_sync) in a
// user's kernel, with a different rank delayed before every call, on emulated groups of 2, 3 and 5
// and on real GPUs where that many are visible, directly and replayed from graphs, each call
// followed by one of the engine's all_reduces (their epochs interleave); the host-side checks of
// p2p_handle_for and p2p_launch; a cooperative launch too large for the GPU refused by name.
// The debug checks are compiled in (COHORT_DEVICE_CHECKS) but never fail here: a failed check
// traps, which ends the context for the rest of the program.
#define COHORT_DEVICE_CHECKS 1
#include "kernels.cuh"
#include "p2p_hooks.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cooperative_groups.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using cohort::p2p_handle;

constexpr unsigned grid = 2, block = 128;
const std::size_t count = 1000; // not a multiple of the grid's threads: some threads idle
const std::chrono::milliseconds patience = cohort::testing::patience();

__device__ inline std::size_t first_index() {
  return blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t stride() {
  return std::size_t{gridDim.x} * blockDim.x;
}

// Each rank publishes `in` in x; after sync() every rank sums every rank's x into y.
__global__ void sum_through_sync(p2p_handle<int> x, p2p_handle<int> y, const int* in) {
  auto s = x.session();
  for (std::size_t i = first_index(); i < x.size(); i += stride())
    *x.local(i) = in[i];
  s.sync();
  for (std::size_t i = first_index(); i < x.size(); i += stride()) {
    int sum = 0;
    for (int q = 0; q < x.ranks(); ++q)
      sum += __ldcg(x.peer(q, i));
    *y.local(i) = sum;
  }
  s.sync(); // no rank rewrites its x (next call) while another still reads it
  s.end();
}

// Each rank publishes `in` in x, tells the next rank, waits for the previous one and copies its x
// into y; then tells the previous rank it is done and waits until the next one is.
__global__ void ring_through_signals(p2p_handle<int> x, p2p_handle<int> y, const int* in) {
  auto s = x.session();
  const int next = (x.rank() + 1) % x.ranks();
  const int previous = (x.rank() + x.ranks() - 1) % x.ranks();
  for (std::size_t i = first_index(); i < x.size(); i += stride())
    *x.local(i) = in[i];
  s.signal(next);
  s.wait(previous);
  for (std::size_t i = first_index(); i < x.size(); i += stride())
    *y.local(i) = __ldcg(x.peer(previous, i));
  s.signal(previous);
  s.wait(next);
  s.end();
}

// Each rank publishes `in` in x; after grid_sync() element i of y sums element i + shift of
// every rank's x, which another block wrote (shift = one block's threads).
__global__ void shifted_sum_through_grid_sync(p2p_handle<int> x, p2p_handle<int> y, const int* in) {
  auto s = x.session();
  for (std::size_t i = first_index(); i < x.size(); i += stride())
    *x.local(i) = in[i];
  s.grid_sync();
  for (std::size_t i = first_index(); i < x.size(); i += stride()) {
    const std::size_t from = (i + blockDim.x) % x.size();
    int sum = 0;
    for (int q = 0; q < x.ranks(); ++q)
      sum += __ldcg(x.peer(q, from));
    *y.local(i) = sum;
  }
  s.grid_sync();
  s.end();
}

using kernel_type = void (*)(p2p_handle<int>, p2p_handle<int>, const int*);

// y's reference from every rank's input after k additions.
using reference_type = std::function<std::vector<int>(const std::vector<std::vector<int>>& in0,
                                                      std::size_t rank, int k)>;

std::vector<cohort::device_group> groups_of(std::size_t n) {
  std::vector<cohort::device_group> groups;
  groups.push_back(cohort::device_group::emulated(cohort::device_ref{0}, n));
  if (cohort::device_count() >= static_cast<int>(n)) groups.push_back(cohort::testing::group_of(n));
  return groups;
}

// Fills each rank's shard of `in` with its own random values (seed + rank) and returns them.
std::vector<std::vector<int>> random_inputs(cohort::distributed_buffer<int>& in, unsigned seed) {
  std::vector<std::vector<int>> values;
  for (std::size_t r = 0; r < in.shards(); ++r) {
    values.push_back(
        cohort::testing::random_values<int>(in.local(r).size(), seed + static_cast<unsigned>(r)));
    in.local(r).copy_from_host(values[r]);
  }
  return values;
}

std::vector<int> read(const cohort::distributed_buffer<int>& b, std::size_t r) {
  std::vector<int> out(b.local(r).size());
  b.local(r).copy_to_host(out);
  b.local(r).stream().synchronize();
  return out;
}

// Runs `kernel` (then an all_reduce of its output) 24 times directly, then captures one call into
// a graph and replays it 24 times between direct calls; a different rank is delayed before every
// call, inputs change and outputs are poisoned each time, and every output is checked.
void check_kernel(kernel_type kernel, bool cooperative, const reference_type& reference) {
  for (const std::size_t n : {2, 3, 5})
    for (auto& group : groups_of(n)) {
      CAPTURE(n);
      CAPTURE(group.is_emulated());
      cohort::p2p_clique peers(group, {.patience = patience});
      const auto split = cohort::partition::replicated(count, n);
      cohort::distributed_buffer<int> in(group, split), x(group, split), y(group, split),
          z(group, split), idle(group, cohort::partition::replicated(1, n));
      const auto in0 = random_inputs(in, 7);
      x.fill_bytes(cohort::testing::poison_byte);
      auto step = [&](std::size_t delayed) {
        cohort::multi_device_for_each(group, in, [] __device__(int& v) { v += 1; });
        cohort::testing::launch_write_after_delay(
            group.stream(delayed % n), idle.shard(delayed % n).data.data(), 1, 0, 20'000ull);
        cohort::p2p_launch(peers, {.grid = grid, .block = block, .cooperative = cooperative},
                           kernel, [&](std::size_t r) {
                             return std::make_tuple(
                                 cohort::p2p_handle_for(peers, x, r),
                                 cohort::p2p_handle_for(peers, y, r),
                                 static_cast<const int*>(in.shard(r).data.data()));
                           });
        cohort::all_reduce(peers, std::as_const(y), z, cohort::sum);
      };
      std::size_t wrong = 0;
      auto check = [&](int k) {
        std::vector<int> total(count, 0);
        for (std::size_t r = 0; r < n; ++r) {
          const auto want = reference(in0, r, k);
          const auto got = read(y, r);
          for (std::size_t i = 0; i < count; ++i) {
            wrong += got[i] != want[i];
            total[i] += want[i];
          }
        }
        for (std::size_t r = 0; r < n; ++r) {
          const auto got = read(z, r);
          for (std::size_t i = 0; i < count; ++i)
            wrong += got[i] != total[i];
        }
      };
      auto poison = [&] {
        y.fill_bytes(cohort::testing::poison_byte);
        z.fill_bytes(cohort::testing::poison_byte);
      };
      int k = 0;
      for (; k < 24;) {
        poison();
        step(static_cast<std::size_t>(k));
        check(++k);
      }
      cohort::group_graph graph = cohort::group_graph::capture(group, [&] { step(n - 1); });
      for (int replays = 0; replays < 24; ++replays) {
        poison();
        if (replays % 2 == 0)
          graph.launch();
        else
          step(static_cast<std::size_t>(replays));
        check(++k);
      }
      CHECK(wrong == 0);
    }
}

} // namespace

TEST_CASE("p2p_session::sync meets the same block of every rank, under skew and from graphs") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_kernel(sum_through_sync, false, [](const auto& in0, std::size_t, int k) {
    std::vector<int> want(count, 0);
    for (const auto& v : in0)
      for (std::size_t i = 0; i < count; ++i)
        want[i] += v[i] + k;
    return want;
  });
}

TEST_CASE("p2p_session::signal and wait pass a ring's data, under skew and from graphs") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_kernel(ring_through_signals, false, [](const auto& in0, std::size_t r, int k) {
    const auto& from = in0[(r + in0.size() - 1) % in0.size()];
    std::vector<int> want(count);
    for (std::size_t i = 0; i < count; ++i)
      want[i] = from[i] + k;
    return want;
  });
}

TEST_CASE("p2p_session::grid_sync orders every block of every rank, under skew and from graphs") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_kernel(shifted_sum_through_grid_sync, true, [](const auto& in0, std::size_t, int k) {
    std::vector<int> want(count, 0);
    for (const auto& v : in0)
      for (std::size_t i = 0; i < count; ++i)
        want[i] += v[(i + block) % count] + k;
    return want;
  });
}

TEST_CASE("p2p_handle_for and p2p_launch refuse bad arguments by name, before enqueueing") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  auto other = cohort::device_group::emulated(cohort::device_ref{0}, 3);
  cohort::p2p_clique peers(group, {.patience = patience});
  cohort::distributed_buffer<int> equal(group, cohort::partition::replicated(10, 2));
  cohort::distributed_buffer<int> uneven(group, cohort::partition::even(11, 2));
  cohort::distributed_buffer<int> elsewhere(other, cohort::partition::replicated(10, 3));
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const std::string bad_rank = message([&] { (void)cohort::p2p_handle_for(peers, equal, 2); });
  CHECK(bad_rank.find("p2p_handle_for") != std::string::npos);
  CHECK(bad_rank.find("rank") != std::string::npos);
  const std::string bad_sizes = message([&] { (void)cohort::p2p_handle_for(peers, uneven, 0); });
  CHECK(bad_sizes.find("buffer") != std::string::npos);
  CHECK(bad_sizes.find("shard 1") != std::string::npos);
  const std::string bad_group = message([&] { (void)cohort::p2p_handle_for(peers, elsewhere, 0); });
  CHECK(bad_group.find("buffer") != std::string::npos);
  // The refused launches below would publish `source` (rank-distinct values) in `equal` and sum
  // it into `sums`, both poisoned first: after the refusals, with the streams done, both must
  // still hold the poison (a launch on some ranks before the refusal writes them).
  cohort::distributed_buffer<int> sums(group, cohort::partition::replicated(10, 2));
  cohort::distributed_buffer<int> source(group, cohort::partition::replicated(10, 2));
  for (std::size_t r = 0; r < 2; ++r)
    source.local(r).copy_from_host(cohort::testing::random_values<int>(10, 300 + unsigned(r)));
  equal.fill_bytes(cohort::testing::poison_byte);
  sums.fill_bytes(cohort::testing::poison_byte);
  const auto refused_launch = [&](unsigned grid) {
    cohort::p2p_launch(peers, {.grid = grid, .block = 32}, sum_through_sync, [&](std::size_t r) {
      return std::make_tuple(cohort::p2p_handle_for(peers, equal, r),
                             cohort::p2p_handle_for(peers, sums, r),
                             static_cast<const int*>(source.shard(r).data.data()));
    });
  };
  const std::string too_many = message([&] { refused_launch(257); });
  CHECK(too_many.find("p2p_launch") != std::string::npos);
  CHECK(too_many.find("257") != std::string::npos);
  // An empty grid, on the kernel's first launch here: refused as p2p_launch's (it was refused by
  // the loading launch, as cohort::launch's).
  const std::string empty_grid = message([&] { refused_launch(0); });
  CHECK_MESSAGE(empty_grid.find("cohort::p2p_launch: argument 'config'") != std::string::npos,
                empty_grid);
  group.synchronize();
  std::size_t written = 0;
  for (std::size_t r = 0; r < 2; ++r)
    for (const auto* x : {&equal, &sums})
      for (const int v : cohort::testing::shard_to_host(*x, r))
        written += v != cohort::testing::poison_value<int>();
  CHECK(written == 0);
  CHECK_FALSE(peers.broken());
  const auto h = cohort::p2p_handle_for(peers, equal, 1);
  CHECK(h.rank() == 1);
  CHECK(h.ranks() == 2);
  CHECK(h.size() == 10);
}

namespace {
__global__ void grid_barrier_only() {
  cooperative_groups::this_grid().sync();
}
} // namespace

TEST_CASE("a cooperative launch larger than the GPU holds is refused, naming the kernel") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(cohort::device_ref{0});
  try {
    cohort::launch(
        s, {.grid = 1u << 20, .block = 1024, .name = "grid_barrier_only", .cooperative = true},
        grid_barrier_only);
    FAIL("the launch was not refused");
  } catch (const cohort::cuda_error& e) {
    CHECK(std::string(e.what()).find("grid_barrier_only") != std::string::npos);
    CHECK(std::string(e.what()).find("resident") != std::string::npos);
  }
  // The refusal is not sticky: a cooperative launch that fits runs.
  cohort::launch(s, {.grid = 2, .block = 64, .name = "grid_barrier_only", .cooperative = true},
                 grid_barrier_only);
  s.synchronize();
}

TEST_CASE("p2p_launch makes every rank's arguments before it launches: a bad one leaves the clique "
          "whole") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, {.patience = patience});
  const auto split = cohort::partition::replicated(count, 2);
  cohort::distributed_buffer<int> in(group, split), x(group, split), y(group, split);
  const auto in0 = random_inputs(in, 91);
  auto launch_with = [&](auto rank_of_handle, bool throw_for_rank_1) {
    cohort::p2p_launch(peers, {.grid = grid, .block = block}, sum_through_sync, [&](std::size_t r) {
      if (throw_for_rank_1 && r == 1) throw std::out_of_range("no arguments for rank 1");
      return std::make_tuple(cohort::p2p_handle_for(peers, x, rank_of_handle(r)),
                             cohort::p2p_handle_for(peers, y, rank_of_handle(r)),
                             static_cast<const int*>(in.shard(r).data.data()));
    });
  };
  const auto own = [](std::size_t r) { return r; };
  launch_with(own, false); // loads the kernel
  // Every rank given rank 0's handles: refused by name, before any launch.
  CHECK_THROWS_WITH_AS(launch_with([](std::size_t) { return std::size_t{0}; }, false),
                       doctest::Contains("p2p_launch"), std::invalid_argument);
  CHECK_FALSE(peers.broken());
  // args_of throws for rank 1: it used to throw after rank 0 had launched, breaking the clique.
  CHECK_THROWS_AS(launch_with(own, true), std::out_of_range);
  CHECK_FALSE(peers.broken());
  y.fill_bytes(cohort::testing::poison_byte);
  launch_with(own, false);
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < 2; ++r) {
    const auto got = cohort::testing::shard_to_host(y, r);
    for (std::size_t i = 0; i < count; ++i)
      wrong += got[i] != in0[0][i] + in0[1][i];
  }
  CHECK(wrong == 0);
}

// Handles another clique of the same size made pass the rank checks; a launch on `peers` given
// them would, after a failed launch, release `peers` while its kernels wait in the other
// clique's sessions. Before, it was accepted.
TEST_CASE("p2p_launch refuses a handle of another clique") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, {.patience = patience}), others(group, {.patience = patience});
  const auto split = cohort::partition::replicated(count, 2);
  cohort::distributed_buffer<int> in(group, split), x(group, split), y(group, split);
  CHECK(cohort::testing::p2p::made_by(cohort::p2p_handle_for(peers, x, 1), peers));
  CHECK_FALSE(cohort::testing::p2p::made_by(cohort::p2p_handle_for(others, x, 1), peers));
  // x's handles of clique `x_of`, y's of `y_of`, on `peers`.
  auto launch_with = [&](cohort::p2p_clique& x_of, cohort::p2p_clique& y_of) {
    cohort::p2p_launch(peers, {.grid = grid, .block = block}, sum_through_sync, [&](std::size_t r) {
      return std::make_tuple(cohort::p2p_handle_for(x_of, x, r), cohort::p2p_handle_for(y_of, y, r),
                             static_cast<const int*>(in.shard(r).data.data()));
    });
  };
  CHECK_THROWS_WITH_AS(launch_with(others, others), doctest::Contains("another clique"),
                       std::invalid_argument);
  // One handle of each clique: refused as well.
  CHECK_THROWS_WITH_AS(launch_with(peers, others), doctest::Contains("another clique"),
                       std::invalid_argument);
  CHECK_FALSE(peers.broken());
  CHECK_FALSE(others.broken());
}

// args_of may hand out handles the caller keeps, by reference (std::tie): the launch copies them.
// Before, the first launch's loading pass turned the caller's handles into no-op ones (of rank 0
// of 0), so that its real launch, and every later one, refused them.
TEST_CASE("p2p_launch with handles the caller keeps, returned by reference, leaves them whole") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, {.patience = patience});
  const auto split = cohort::partition::replicated(count, 2);
  cohort::distributed_buffer<int> in(group, split), x(group, split), y(group, split);
  const auto in0 = random_inputs(in, 93);
  std::vector<p2p_handle<int>> xs, ys;
  std::vector<const int*> ins;
  for (std::size_t r = 0; r < 2; ++r) {
    xs.push_back(cohort::p2p_handle_for(peers, x, r));
    ys.push_back(cohort::p2p_handle_for(peers, y, r));
    ins.push_back(in.shard(r).data.data());
  }
  for (int call = 0; call < 2; ++call) { // the first loads the kernel
    CAPTURE(call);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::p2p_launch(peers, {.grid = grid, .block = block}, sum_through_sync,
                       [&](std::size_t r) { return std::tie(xs[r], ys[r], ins[r]); });
    std::size_t wrong = 0;
    for (std::size_t r = 0; r < 2; ++r) {
      CHECK(xs[r].rank() == static_cast<int>(r));
      CHECK(xs[r].ranks() == 2);
      const auto got = cohort::testing::shard_to_host(y, r);
      for (std::size_t i = 0; i < count; ++i)
        wrong += got[i] != in0[0][i] + in0[1][i];
    }
    CHECK(wrong == 0);
  }
}

namespace {

// A tile loop over uneven tiles: block 0 of every rank syncs once, block 1 seventeen times (past a
// multiple of 8, so that the blocks' epochs end apart).
__global__ void uneven_syncs(p2p_handle<int> x) {
  auto s = x.session();
  const int calls = blockIdx.x == 0 ? 1 : 17;
  for (int k = 0; k < calls; ++k)
    s.sync();
  s.end();
}

// One block, which stands for every epoch slot.
__global__ void one_block_sync(p2p_handle<int> x) {
  auto s = x.session();
  s.sync();
  s.end();
}

// Each block publishes its half of `in` in x (block 1 of rank 0 20 ms late), syncs, and copies the
// next rank's half into y: a barrier passed early reads what the late block has not yet written.
__global__ void halves_after_sync(p2p_handle<int> x, p2p_handle<int> y, const int* in) {
  auto s = x.session();
  const std::size_t half = (x.size() + 1) / 2;
  const std::size_t first = blockIdx.x * half;
  const std::size_t last = first + half < x.size() ? first + half : x.size();
  if (x.rank() == 0 && blockIdx.x == 1) {
    const unsigned long long start = cohort::testing::global_nanoseconds();
    while (cohort::testing::global_nanoseconds() - start < 20'000'000ull)
      __nanosleep(1000);
  }
  for (std::size_t i = first + threadIdx.x; i < last; i += blockDim.x)
    *x.local(i) = in[i];
  s.sync();
  const int next = (x.rank() + 1) % x.ranks();
  for (std::size_t i = first + threadIdx.x; i < last; i += blockDim.x)
    *y.local(i) = __ldcg(x.peer(next, i));
  s.sync();
  s.end();
}

} // namespace

TEST_CASE("blocks of a user's kernel may make different numbers of sync calls: later calls with "
          "other grids still wait for their peers") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (auto& group : groups_of(2)) {
    CAPTURE(group.is_emulated());
    cohort::p2p_clique peers(group, {.patience = patience});
    const auto split = cohort::partition::replicated(count, 2);
    cohort::distributed_buffer<int> in(group, split), x(group, split), y(group, split);
    const auto in0 = random_inputs(in, 31);
    auto x_of = [&](std::size_t r) { return std::make_tuple(cohort::p2p_handle_for(peers, x, r)); };
    std::size_t wrong = 0;
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      x.fill_bytes(cohort::testing::poison_byte);
      y.fill_bytes(cohort::testing::poison_byte);
      group.synchronize();
      // Block 1's epoch ends 16 past block 0's; the one-block call then stood for both slots
      // from block 0's lower epoch, and the two-block call after it had block 1 take values its
      // slot's signals already held, passing its barrier at once.
      cohort::p2p_launch(peers, {.grid = 2, .block = 64}, uneven_syncs, x_of);
      cohort::p2p_launch(peers, {.grid = 1, .block = 64}, one_block_sync, x_of);
      cohort::p2p_launch(peers, {.grid = 2, .block = 128}, halves_after_sync, [&](std::size_t r) {
        return std::make_tuple(cohort::p2p_handle_for(peers, x, r),
                               cohort::p2p_handle_for(peers, y, r),
                               static_cast<const int*>(in.shard(r).data.data()));
      });
      for (std::size_t r = 0; r < 2; ++r) {
        const auto got = read(y, r);
        for (std::size_t i = 0; i < count; ++i)
          wrong += got[i] != in0[(r + 1) % 2][i];
      }
    }
    CHECK(wrong == 0);
  }
}

namespace {

// Every rank sums every rank's element i of a const buffer, which each rank's stream copied in
// before its kernel: a kernel starts after its stream's copy ends, so after the first sync()
// every rank's copy is done and visible (device.cuh's memory ordering).
__global__ void sum_of_const(p2p_handle<const int> x, p2p_handle<int> y) {
  auto s = x.session();
  s.sync();
  for (std::size_t i = first_index(); i < x.size(); i += stride()) {
    int sum = 0;
    for (int q = 0; q < x.ranks(); ++q)
      sum += __ldcg(x.peer(q, i));
    *y.local(i) = sum;
  }
  s.end();
}

// How many of y's elements, on every rank, are not the sum over ranks of the inputs' element.
std::size_t wrong_sums(const cohort::distributed_buffer<int>& y,
                       const std::vector<std::vector<int>>& in0) {
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < in0.size(); ++r) {
    const auto got = read(y, r);
    for (std::size_t i = 0; i < got.size(); ++i) {
      long long want = 0;
      for (const auto& rank : in0)
        want += rank[i];
      wrong += got[i] != static_cast<int>(want);
    }
  }
  return wrong;
}

} // namespace

TEST_CASE("p2p_handle_for of a const buffer reads every rank's elements") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const std::size_t n : {2, 3})
    for (auto& group : groups_of(n)) {
      CAPTURE(n);
      CAPTURE(group.is_emulated());
      cohort::p2p_clique peers(group, {.patience = patience});
      const auto split = cohort::partition::replicated(count, n);
      cohort::distributed_buffer<int> in(group, split), y(group, split);
      const auto in0 = random_inputs(in, 41);
      y.fill_bytes(cohort::testing::poison_byte);
      const cohort::distributed_buffer<int>& read_only = in;
      static_assert(std::is_same_v<decltype(cohort::p2p_handle_for(peers, read_only, 0)),
                                   p2p_handle<const int>>);
      cohort::p2p_launch(peers, {.grid = grid, .block = block}, sum_of_const, [&](std::size_t r) {
        return std::make_tuple(cohort::p2p_handle_for(peers, read_only, r),
                               cohort::p2p_handle_for(peers, y, r));
      });
      CHECK(wrong_sums(y, in0) == 0);
      // A handle of the buffer itself (p2p_handle<int>) converts to the kernel's
      // p2p_handle<const int>, as a span does.
      y.fill_bytes(cohort::testing::poison_byte);
      cohort::p2p_launch(peers, {.grid = grid, .block = block}, sum_of_const, [&](std::size_t r) {
        return std::make_tuple(cohort::p2p_handle_for(peers, in, r),
                               cohort::p2p_handle_for(peers, y, r));
      });
      CHECK(wrong_sums(y, in0) == 0);
    }
}
