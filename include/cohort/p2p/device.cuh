// cohort/p2p/device.cuh — users' own kernels reach their peers: each rank's pointer into a buffer
// of the same size on every member, barriers across the same block of every rank or across whole
// grids, and point-to-point signals, all inside one kernel per GPU. No NCCL, no registration; it
// works on emulated groups and inside CUDA graphs (docs/multi_gpu_kernels.md).
//
//   __global__ void shift(cohort::p2p_handle<float> h) {
//     auto s = h.session();                          // every thread of the block, first
//     const int next = (h.rank() + 1) % h.ranks();
//     for (std::size_t i = threadIdx.x; i < h.size(); i += blockDim.x) h.local()[i] = h.rank();
//     s.sync();                                      // block b of every rank has written
//     float v = __ldcg(h.peer(next) + threadIdx.x);  // the next rank's element
//     (void)v;
//     s.end();                                       // every thread of the block, last
//   }
//
//   cohort::p2p_launch(peers, {.grid = 1, .block = 256}, shift, [&](std::size_t rank) {
//     return std::make_tuple(cohort::p2p_handle_for(peers, x, rank));
//   });
//
// The handle is made on the host, for one rank, and passed by value; it holds pointers only, so a
// launch captured into a graph replays correctly (the state that moves is on the GPUs, as for the
// engine's own calls: the session reads its block's epoch when it opens and advances it at end()).
//
// Rules (breaking one hangs the kernel until the clique's patience runs out, then traps, or lets
// a later barrier pass before its peers arrive: wrong results, which the debug checks below catch
// where they can). Every rank launches the same kernel with the same grid, in the same order
// among the clique's calls (its collectives and other session kernels), on the clique's streams
// (peers.stream(i)) or streams ordered with them; at most 256 blocks (detail::p2p::max_blocks) per
// grid. Every thread of a block opens the session first and calls end() last, and a kernel opens
// at most one session per clique (sessions of different cliques may nest); the session calls in
// between are made by every thread of the block (each has a __syncthreads). Block b makes the
// same sequence of sync() and grid_sync() calls on every rank: the k-th of block b takes the
// value base + k on every rank. The blocks of one rank may make different numbers of sync()
// calls (a tile loop over more tiles than blocks); every block makes each grid_sync(). Signals
// count: the n-th wait(p) of block b of rank r returns once block b of rank p
// has sent its n-th signal(r), counting from the clique's creation, so each kernel sends as many
// signals to each peer as that peer's kernel waits for (else later kernels' waits are off). The
// ranks' kernels must run at the same time: all their grids resident beside each other (on an
// emulated group, on one GPU) and none of them kept from running by another kernel of yours that
// waits for them.
//
// Memory ordering (system scope, release/acquire, as cuda::atomic_ref): what the threads of a
// block wrote before sync() or signal(p) is visible to the threads of the same block of the peer
// (every rank for sync, p for signal) after that block's matching sync() or wait(). Writes of
// other blocks are ordered only by grid_sync(): what any block of any rank wrote before it is
// visible to every block of every rank after it. What a rank's stream did before its kernel (a
// copy into the buffer, an earlier kernel) counts as written before that kernel's first sync():
// the kernel starts only after it. Read data a peer wrote during the kernel through
// L2 (__ldcg, volatile or atomic loads): L1 is not coherent with other GPUs' stores; never __ldg
// or `const __restrict__` (the read-only path).
//
// A debug build (NDEBUG not defined, or COHORT_DEVICE_CHECKS=1; COHORT_DEVICE_CHECKS=0 turns the
// checks off) bounds-checks ranks and offsets, a session call after end() and a session left
// without end(): a failed check prints the call and traps, which loses the context. A grid above
// 256 blocks, and grid_sync() without a cooperative launch, are refused in every build.
#pragma once

#include "../detail/arguments.cuh"
#include "../detail/nvtx.cuh"
#include "../distributed/distributed_buffer.cuh"
#include "../errors/argument_error.cuh"
#include "../execution/launch.cuh"
#include "../memory/bitwise_copyable.cuh"
#include "detail/kernels.cuh"
#include "detail/launch.cuh"
#include "p2p_clique.cuh"

#include <cooperative_groups.h>
#include <cuda/std/span>

#include <cstddef>
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef COHORT_DEVICE_CHECKS
#ifdef NDEBUG
#define COHORT_DEVICE_CHECKS 0
#else
#define COHORT_DEVICE_CHECKS 1
#endif
#endif

namespace cohort {

template <class T>
class p2p_handle;

namespace detail::p2p {

// Stops the kernel, naming the call, when `value` is not below `limit`.
__device__ inline void check_below(unsigned long long value, unsigned long long limit,
                                   const char* call, const char* argument) {
  if (value >= limit) [[unlikely]] {
    printf("cohort p2p: %s: %s is %llu, not below %llu (block %u, thread %u). Stopping the "
           "kernel.\n",
           call, argument, value, limit, linear_block(), linear_thread());
    __trap();
  }
}

template <class T>
inline constexpr bool is_p2p_handle = false;
template <class T>
inline constexpr bool is_p2p_handle<p2p_handle<T>> = true;

template <class Tuple>
inline constexpr bool holds_handle = false;
template <class... A>
inline constexpr bool holds_handle<std::tuple<A...>> = (is_p2p_handle<std::remove_cvref_t<A>> ||
                                                        ...);

} // namespace detail::p2p

// One block's place in the clique's sequence of calls; see the rules at the top of this header.
class p2p_session {
 public:
  p2p_session(const p2p_session&) = delete;
  p2p_session& operator=(const p2p_session&) = delete;

  // Block b of every rank meets block b of every other rank.
  __device__ void sync() {
    check_open("p2p_session::sync");
    s_.sync("p2p_session::sync");
  }

  // Counts one more signal from this block to the same block of rank `peer`; does not wait.
  __device__ void signal(int peer) {
    check_open("p2p_session::signal");
    check_peer(peer, "p2p_session::signal");
    s_.signal(peer);
  }

  // Waits for the signal of the same block of rank `peer` that matches this wait (the n-th wait on
  // `peer` matches its n-th signal to this rank).
  __device__ void wait(int peer) {
    check_open("p2p_session::wait");
    check_peer(peer, "p2p_session::wait");
    s_.wait(peer, "p2p_session::wait");
  }

  // Every block of every rank meets: a grid barrier, block 0 meets block 0 of every other rank,
  // another grid barrier. Needs a cooperative launch (launch_config::cooperative).
  __device__ void grid_sync() {
    check_open("p2p_session::grid_sync");
    const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    if (!grid.is_valid()) [[unlikely]] {
      if (detail::p2p::linear_thread() == 0)
        printf("cohort p2p: p2p_session::grid_sync needs a cooperative launch "
               "(launch_config{.cooperative = true}) (block %u, thread %u). Stopping the kernel.\n",
               detail::p2p::linear_block(), detail::p2p::linear_thread());
      __trap();
    }
    const std::uint64_t value = s_.next();
    grid.sync();
    if (s_.block() == 0) detail::p2p::barrier(s_.clique(), 0, value, "p2p_session::grid_sync");
    grid.sync();
  }

  // The block's last access to the clique's state: the epoch moves past every value used (by a
  // multiple of 8, so that the engine's calls keep alternating their scratch halves).
  __device__ void end() {
    check_open("p2p_session::end");
    s_.end(s_.user_step());
    ended_ = true;
  }

#if COHORT_DEVICE_CHECKS
  __device__ ~p2p_session() {
    if (!ended_) [[unlikely]] {
      printf("cohort p2p: a p2p_session ended without end() (block %u, thread %u): the next call "
             "on the clique would reuse its values. Stopping the kernel.\n",
             detail::p2p::linear_block(), detail::p2p::linear_thread());
      __trap();
    }
  }
#endif

 private:
  template <class T>
  friend class p2p_handle;

  __device__ explicit p2p_session(const detail::p2p::engine& e)
      : s_(opened(e)) {}

  // A loading launch (ranks == 0, see p2p_launch) ends here, before touching anything.
  __device__ static const detail::p2p::engine& opened(const detail::p2p::engine& e) {
    if (e.ranks == 0) asm volatile("exit;");
    detail::p2p::check_below(detail::p2p::grid_blocks(), detail::p2p::max_blocks + 1,
                             "p2p_handle::session", "the grid's block count");
    return e;
  }

  // A call after end() would take values the next call on the clique takes too.
  __device__ void check_open(const char* call) const {
#if COHORT_DEVICE_CHECKS
    if (ended_) [[unlikely]] {
      printf("cohort p2p: %s after p2p_session::end() (block %u, thread %u): the next call on the "
             "clique would take the same values. Stopping the kernel.\n",
             call, detail::p2p::linear_block(), detail::p2p::linear_thread());
      __trap();
    }
#else
    (void)call;
#endif
  }

  __device__ void check_peer(int peer, const char* call) const {
#if COHORT_DEVICE_CHECKS
    detail::p2p::check_below(static_cast<unsigned>(peer), s_.clique().ranks, call, "peer");
#else
    (void)peer, (void)call;
#endif
  }

  detail::p2p::block_session s_;
  bool ended_ = false; // in every build, so that the layout does not depend on the checks
};

// Rank rank()'s view of a buffer of size() elements on every member of a p2p_clique.
template <class T>
class p2p_handle {
 public:
  using element_type = T;

  p2p_handle() = default;
  // A handle of const elements from one of the same elements, as span<T> converts to
  // span<const T>: a kernel that only reads takes p2p_handle<const T> whichever buffer it is given.
  template <class U>
  requires(std::is_same_v<const U, T> && !std::is_const_v<U>) __host__ __device__
      p2p_handle(const p2p_handle<U>& other)
      : e_(other.e_)
      , size_(other.size_) {
    for (int r = 0; r < detail::p2p::max_ranks; ++r)
      data_[r] = other.data_[r];
  }

  __host__ __device__ int rank() const { return e_.rank; }
  __host__ __device__ int ranks() const { return e_.ranks; }
  __host__ __device__ std::size_t size() const { return size_; }
  // Whether `peers` made this handle (p2p_launch launches on a clique whose own handles it gets).
  bool made_by(const p2p_clique& peers) const {
    return e_.rank >= 0 && static_cast<std::size_t>(e_.rank) < peers.size() &&
           e_.epochs == peers.engine_for(static_cast<std::size_t>(e_.rank)).epochs;
  }

  // This rank's elements, and element i of them.
  __device__ T* local() const { return data_[e_.rank]; }
  __device__ T* local(std::size_t i) const { return peer(e_.rank, i, "p2p_handle::local"); }
  // Rank r's elements (r in [0, ranks())), and element i of them.
  __device__ T* peer(int r) const {
    check_rank(r, "p2p_handle::peer");
    return data_[r];
  }
  __device__ T* peer(int r, std::size_t i) const { return peer(r, i, "p2p_handle::peer"); }

  // Opened by every thread of the block, before any other session call.
  __device__ p2p_session session() const { return p2p_session(e_); }

  // For p2p_launch's loading launch: a kernel given this handle ends where it opens its session.
  p2p_handle for_loading() const {
    p2p_handle h = *this;
    h.e_.ranks = 0;
    return h;
  }

 private:
  template <class U>
  friend class p2p_handle;
  template <class U>
  friend p2p_handle<U> p2p_handle_for(const p2p_clique&, const std::vector<cuda::std::span<U>>&,
                                      std::size_t);

  __device__ T* peer(int r, std::size_t i, const char* call) const {
    check_rank(r, call);
#if COHORT_DEVICE_CHECKS
    detail::p2p::check_below(i, size_, call, "offset");
#endif
    return data_[r] + i;
  }

  __device__ void check_rank(int r, const char* call) const {
#if COHORT_DEVICE_CHECKS
    detail::p2p::check_below(static_cast<unsigned>(r), e_.ranks, call, "rank");
#else
    (void)r, (void)call;
#endif
  }

  detail::p2p::engine e_{};
  T* data_[detail::p2p::max_ranks] = {};
  std::size_t size_ = 0;
};

// Rank `rank`'s handle to `spans`, one per member of `peers`, each on its member's device and all
// of the same size (cohort's buffers or cudaMalloc memory: the peers read and write it).
template <class T>
p2p_handle<T> p2p_handle_for(const p2p_clique& peers, const std::vector<cuda::std::span<T>>& spans,
                             std::size_t rank) {
  static_assert(bitwise_copyable_v<std::remove_cv_t<T>>,
                "peers read the buffer's bytes: the element type must be trivially copyable.");
  constexpr std::string_view function = "p2p_handle_for";
  if (rank >= peers.size())
    detail::throw_invalid_argument(function, "rank",
                                   std::to_string(rank) +
                                       " is not a member of the clique (it has " +
                                       std::to_string(peers.size()) + ").");
  detail::require_count(spans.size(), peers.size(), function, "buffer",
                        "one shard per member of the clique");
  for (std::size_t i = 0; i < spans.size(); ++i) {
    detail::require_count(spans[i].size(), spans[0].size(), function, "buffer",
                          "every member's shard must be as large as member 0's (shard " +
                              std::to_string(i) + ")");
    detail::require_memory_of(peers.device(i), spans[i].data(), spans[i].size_bytes(), function,
                              "buffer's shard " + std::to_string(i));
  }
  p2p_handle<T> h;
  h.e_ = peers.engine_for(rank);
  for (std::size_t i = 0; i < spans.size(); ++i)
    h.data_[i] = spans[i].data();
  h.size_ = spans.empty() ? 0 : spans[0].size();
  return h;
}

namespace detail {

// The spans of a distributed buffer (`T` const for a const one) over the clique's group.
template <class T, class Buffer>
std::vector<cuda::std::span<T>> shards_over_clique(const p2p_clique& peers, Buffer& buffer) {
  std::vector<cuda::std::span<T>> spans;
  for (std::size_t i = 0; i < buffer.shards(); ++i) {
    const cohort::shard<T> s = buffer.shard(i);
    if (i < peers.size() && s.device != peers.device(i))
      throw_invalid_argument(
          "p2p_handle_for", "buffer",
          "shard " + std::to_string(i) + " is on device " + std::to_string(s.device.get()) +
              ", member " + std::to_string(i) + " of the clique on device " +
              std::to_string(peers.device(i).get()) + ": make the buffer over the clique's group.");
    spans.push_back(s.data);
  }
  return spans;
}

} // namespace detail

// Rank `rank`'s handle to a distributed buffer over the clique's group, with equal shards (e.g.
// partition::replicated); a const buffer gives a handle of const elements.
template <class T>
p2p_handle<T> p2p_handle_for(const p2p_clique& peers, distributed_buffer<T>& buffer,
                             std::size_t rank) {
  return p2p_handle_for(peers, detail::shards_over_clique<T>(peers, buffer), rank);
}
template <class T>
p2p_handle<const T> p2p_handle_for(const p2p_clique& peers, const distributed_buffer<T>& buffer,
                                   std::size_t rank) {
  return p2p_handle_for(peers, detail::shards_over_clique<const T>(peers, buffer), rank);
}
// A handle outlives the expression that makes it: of a temporary buffer, it would point into
// memory freed before the kernel runs.
template <class T>
void p2p_handle_for(const p2p_clique&, const distributed_buffer<T>&&, std::size_t) = delete;

// Launches `kernel` on every member of `peers`, on the clique's streams, with the arguments
// `args_of(rank)` returns (a tuple, its p2p_handles made by `peers` for that rank). Before a
// kernel's first launch on the clique it is loaded everywhere by a launch whose handles are
// `for_loading()` (the kernel ends at session()): loading a kernel lazily while a peer's kernel
// waits for it could wait for that kernel; so on that first launch args_of(rank) is called twice
// per rank (keep it free of side effects). args_of may return references (std::tie of handles
// kept by the caller): the launch works on copies. A launch that fails part-way releases the
// members already launched, once the work queued ahead on the missing members' streams is done
// (what the failed call writes is unspecified), and breaks the clique, as for its collectives.
template <class... Params, class ArgsOf>
void p2p_launch(p2p_clique& peers, const launch_config& config, void (*kernel)(Params...),
                ArgsOf&& args_of) {
  if (detail::has_zero_dimension(config.grid) || detail::has_zero_dimension(config.block))
    detail::throw_invalid_argument("p2p_launch", "config",
                                   "grid and block need at least 1 in every dimension; skip the "
                                   "launch when there is no work.");
  const unsigned long long blocks = 1ull * config.grid.x * config.grid.y * config.grid.z;
  if (blocks > static_cast<unsigned long long>(detail::p2p::max_blocks))
    detail::throw_invalid_argument("p2p_launch", "config",
                                   "the grid has " + std::to_string(blocks) +
                                       " blocks; a kernel with p2p sessions takes at most " +
                                       std::to_string(detail::p2p::max_blocks) +
                                       " (one signal slot per block).");
  const detail::nvtx_range range("p2p_launch", "%s, %llu blocks, %zu ranks",
                                 config.name != nullptr ? config.name : "a kernel", blocks,
                                 peers.size());
  auto args = [&](std::size_t i, bool no_op) {
    // Copies: args_of may return references (std::tie of handles the caller keeps), and the
    // loading launch below changes its handles.
    auto values = std::apply(
        [](auto&&... a) {
          return std::tuple<std::remove_cvref_t<decltype(a)>...>(std::forward<decltype(a)>(a)...);
        },
        args_of(i));
    static_assert(detail::p2p::holds_handle<decltype(values)>,
                  "p2p_launch: args_of(rank) must return a tuple holding a p2p_handle (the kernel "
                  "is loaded by a launch that ends where it opens the handle's session).");
    // A handle made for another rank, or over a clique of another size, would meet the wrong
    // peers; a handle of another clique would wait in that clique's sessions, which a launch that
    // fails part-way neither releases nor marks broken (it releases `peers`). Refused before
    // anything is launched (every rank's arguments are made first).
    std::apply(
        [&](const auto&... a) {
          (([&] {
             if constexpr (detail::p2p::is_p2p_handle<std::remove_cvref_t<decltype(a)>>) {
               detail::require_argument(
                   a.rank() == static_cast<int>(i) && a.ranks() == static_cast<int>(peers.size()),
                   "p2p_launch", "args_of",
                   "returned for rank " + std::to_string(i) + " a p2p_handle of rank " +
                       std::to_string(a.rank()) + " of " + std::to_string(a.ranks()) +
                       "; make rank r's handles with p2p_handle_for(peers, buffer, r).");
               detail::require_argument(a.made_by(peers), "p2p_launch", "args_of",
                                        "returned for rank " + std::to_string(i) +
                                            " a p2p_handle of another clique; make every handle "
                                            "with p2p_handle_for(peers, buffer, r) of the clique "
                                            "launched on.");
             }
           }()),
           ...);
        },
        values);
    if (no_op)
      std::apply(
          [](auto&... a) {
            (([&] {
               if constexpr (detail::p2p::is_p2p_handle<std::remove_cvref_t<decltype(a)>>)
                 a = a.for_loading();
             }()),
             ...);
          },
          values);
    return values;
  };
  detail::p2p::launch_kernel_on_every_member(peers, config, kernel, args);
}

} // namespace cohort
