// cohort/p2p/p2p_session.cuh — one block's place in a clique's sequence of calls, opened inside a
// user's kernel from a p2p_handle: barriers across the same block of every rank or across whole
// grids, and point-to-point signals. The rules a kernel with sessions keeps, and what the session
// calls order in memory, are in p2p/device.cuh.
//
//   __global__ void exchange(cohort::p2p_handle<float> h) {
//     auto s = h.session();                  // every thread of the block, first
//     h.local()[threadIdx.x] = h.rank();
//     s.sync();                              // block b of every rank has written
//     if (h.rank() == 0) s.signal(1);        // rank 1 may go on
//     if (h.rank() == 1) s.wait(0);
//     s.end();                               // every thread of the block, last
//   }
//
// A peer that does not arrive within the clique's patience makes sync, wait and grid_sync return
// false; the kernel leaves, and the host is told (p2p_error) with the context intact:
//
//   __global__ void careful(cohort::p2p_handle<float> h) {
//     auto s = h.session();
//     if (!s.sync()) return;                 // a peer did not arrive: leave, touch nothing more
//     h.local()[threadIdx.x] += __ldcg(h.peer((h.rank() + 1) % h.ranks()) + threadIdx.x);
//     s.end();
//   }
//
// A debug build (NDEBUG not defined, or COHORT_DEVICE_CHECKS=1; COHORT_DEVICE_CHECKS=0 turns the
// checks off) bounds-checks ranks and offsets, a session call after end() and a session left
// without end() (unless it stopped): a failed check prints the call and traps, which loses the
// context. A grid above
// 256 blocks, and grid_sync() without a cooperative launch, are refused in every build.
#pragma once

#include "detail/block_session.cuh"

#include <cooperative_groups.h>

#include <cstdint>
#include <cstdio>

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

} // namespace detail::p2p

// One block's place in the clique's sequence of calls; see the rules at the top of this header.
class p2p_session {
 public:
  p2p_session(const p2p_session&) = delete;
  p2p_session& operator=(const p2p_session&) = delete;

  // Block b of every rank meets block b of every other rank. False, for every thread of the
  // block, where a peer did not arrive within the clique's patience (or another rank gave up on
  // one): the clique has stopped, the host will be told (p2p_error), and the kernel should leave
  // without touching its peers' memory again (docs/multi_gpu_kernels.md). Every session call
  // after a false one is false at once.
  __device__ bool sync() {
    check_open("p2p_session::sync");
    return s_.sync(detail::p2p::call_kind::session_sync);
  }

  // Counts one more signal from this block to the same block of rank `peer`; does not wait.
  __device__ void signal(int peer) {
    check_open("p2p_session::signal");
    check_peer(peer, "p2p_session::signal");
    s_.signal(peer);
  }

  // Waits for the signal of the same block of rank `peer` that matches this wait (the n-th wait on
  // `peer` matches its n-th signal to this rank). False as sync() is.
  __device__ bool wait(int peer) {
    check_open("p2p_session::wait");
    check_peer(peer, "p2p_session::wait");
    return s_.wait(peer, detail::p2p::call_kind::session_wait);
  }

  // Every block of every rank meets: a grid barrier, block 0 meets block 0 of every other rank,
  // another grid barrier. Needs a cooperative launch (launch_config::cooperative). False as sync()
  // is, for every block of the rank alike, so that they leave together (a block that left before
  // a grid barrier would hold the others there for ever: in a kernel with grid_sync, a block whose
  // sync() or wait() failed goes on to the next grid_sync() and leaves on its answer).
  __device__ bool grid_sync() {
    check_open("p2p_session::grid_sync");
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    if (!grid.is_valid()) [[unlikely]] {
      if (detail::p2p::linear_thread() == 0)
        printf("cohort p2p: p2p_session::grid_sync needs a cooperative launch "
               "(launch_config{.cooperative = true}) (block %u, thread %u). Stopping the kernel.\n",
               detail::p2p::linear_block(), detail::p2p::linear_thread());
      __trap();
    }
    return s_.grid_sync(grid, detail::p2p::call_kind::session_grid_sync);
  }

  // Whether the clique has stopped (an earlier call of this session returned false, or the clique
  // had stopped when the session opened).
  __device__ bool stopped() const { return s_.stopped(); }

  // The block's last access to the clique's state: the epoch moves past every value used (by a
  // multiple of 8, so that the engine's calls keep alternating their scratch halves).
  __device__ void end() {
    check_open("p2p_session::end");
    s_.end(s_.user_step());
    ended_ = true;
  }

#if COHORT_DEVICE_CHECKS
  __device__ ~p2p_session() {
    if (!ended_ && !s_.stopped()) [[unlikely]] {
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
      : s_(opened(e), detail::p2p::call_kind::user_kernel) {}

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

} // namespace cohort
