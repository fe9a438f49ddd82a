// cohort/p2p/detail/block_session.cuh — how a block of a call (an engine kernel, or a user's
// kernel through p2p_session) takes its place in the clique's sequence of calls.
#pragma once

#include "engine.cuh"

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>

namespace cohort::detail::p2p {

// Sessions: what a block of a call (an engine kernel, or a user's kernel through p2p_handle) knows
// of its place in the clique's sequence of calls.
//
// Block b stands for the slots b, b + grid, b + 2 grid, ... of the call's grid. It opens its
// session at the highest of them and, when it ends, moves every one of them past the values it
// used. Each rank runs the same calls with the same grids, and each block the same sequence of
// calls on every rank, so block b's base is the same on every rank, and the barrier values and
// scratch half derived from it agree without the host handing any out. Each session call (sync,
// grid_sync) takes the next value base + 1, base + 2, ...
// The slots need not be equal: the blocks of a user's kernel may make different numbers of calls
// (a tile loop), leaving slot 1 ahead of slot 0; a later call whose block 0 stands for both then
// starts past the higher, and a block never takes a value at or below one its slot's signals
// already hold (which would pass a barrier before the peers arrive). They keep one parity: the
// engine's calls move every slot by epoch_step, a user's session by a multiple of 2 * epoch_step,
// so every block of a call takes the same scratch half. Values only grow: 2^64 is never reached.
//
// A slot [block * max_ranks + from] of rank r is written only by block `block` of rank `from`, in
// increasing values, so "at least v" means "that block has made its v-th call or a later one".
//
// Point-to-point signals count instead, and need no epoch: the n-th signal block b of rank r ever
// sends to rank p stores n into p's flag [b][r], and the n-th wait block b of p ever makes on r
// waits for that flag to reach n. The counts live in each rank's own memory, touched only by
// thread 0 of block b of the kernels in stream order, so they too replay from graphs.

class block_session {
 public:
  // Every thread of the block, before anything else touches the clique's state. `call` names the
  // kernel in the rank's progress.
  __device__ block_session(const engine& e, call_kind call)
      : e_(&e)
      , block_(linear_block())
      , call_(call) {
    __shared__ unsigned long long base;
    // A clique that has stopped: the call does nothing (a graph replayed after a fault, a peer
    // whose kernel starts only after the others gave up on it). Read with the epochs, not after
    // them: one wait for memory instead of two.
    const bool stop = linear_thread() == 0 && stop_is_set(stop_word(e, e.rank));
    if (linear_thread() == 0) base = 0;
    __syncthreads();
    unsigned long long highest = 0;
    for_each_slot([&](unsigned slot) {
      if (e.epochs[slot] > highest) highest = e.epochs[slot];
    });
    if (highest != 0) atomicMax(&base, highest);
    stopped_ = __syncthreads_or(stop) != 0;
    base_ = base;
    // `base` is one variable for every session a kernel opens: a second session's thread 0 must
    // not overwrite it before every thread of this block has read it.
    __syncthreads();
    if (block_ == 0 && linear_thread() == 0 && !stopped_) {
      progress_words& p = progress_of(e);
      p.started_epoch = base_;
      p.started_call = static_cast<std::uint64_t>(call);
    }
  }

  __device__ const engine& clique() const { return *e_; }
  __device__ unsigned block() const { return block_; }
  // Whether a peer did not arrive, here or at any rank: the kernel should leave.
  __device__ bool stopped() const { return stopped_; }
  // The values used so far, and the value the next call takes.
  __device__ std::uint64_t used() const { return used_; }
  __device__ std::uint64_t next() { return base_ + ++used_; }
  // The value the next sync would take, without taking it.
  __device__ std::uint64_t next_value() const { return base_ + used_ + 1; }
  // The block's call number: its base in epoch steps, the same for block b of every rank.
  __device__ std::uint64_t call_number() const { return base_ / epoch_step; }
  // This call's half of every rank's one-shot scratch: consecutive engine calls alternate, and a
  // rank reaches the call after next only once every rank has finished this one (the call between
  // has a barrier; a user's session advances by a multiple of 2 * epoch_step, see end_user).
  __device__ std::size_t scratch_offset() const { return (call_number() & 1u) * e_->half_bytes; }
  // False, for the whole block, where any of its threads found that a peer did not arrive.
  __device__ bool all_arrived(bool arrived) {
    stopped_ = __syncthreads_or(!arrived) != 0;
    return !stopped_;
  }

  // False, for the whole block, where the clique stopped.
  __device__ bool sync() { return sync(call_); }
  __device__ bool sync(call_kind call) {
    const std::uint64_t value = next();
    if (stopped_) return false;
    stopped_ = !barrier(*e_, block_, value, call);
    return !stopped_;
  }

  __device__ void signal(int peer) {
    __syncthreads(); // the block's writes so far come before the flag
    if (linear_thread() == 0) {
      std::uint64_t& sent = e_->counts[block_ * max_ranks + peer];
      store_release(*e_, e_->flags[peer][block_ * max_ranks + e_->rank], ++sent);
    }
  }

  __device__ bool wait(int peer, call_kind call) {
    bool arrived = !stopped_;
    if (linear_thread() == 0) {
      std::uint64_t& waited =
          e_->counts[std::size_t{max_blocks} * max_ranks + block_ * max_ranks + peer];
      ++waited; // counted also when the clique stopped: the count stays the signals' match
      if (arrived)
        arrived = wait_for(*e_, e_->flags[e_->rank][block_ * max_ranks + peer], waited, block_,
                           peer, call, /*point_to_point=*/true);
    }
    stopped_ = __syncthreads_or(!arrived) != 0;
    return !stopped_;
  }

  // Block 0 meets block 0 of every rank between two grid barriers; every block then reads block
  // 0's verdict, which it left in the rank's grid_verdict word before the second barrier, so that
  // the blocks of a rank agree (and leave together: a block that left would hang the next grid
  // barrier).
  template <class Grid>
  __device__ bool grid_sync(Grid& grid, call_kind call) {
    const std::uint64_t value = next();
    std::uint64_t* verdict = e_->signals[e_->rank] + state_layout::grid_verdict;
    grid.sync();
    if (block_ == 0) {
      const bool met = !stopped_ && barrier(*e_, 0, value, call);
      if (linear_thread() == 0) *verdict = met ? 1 : 0;
    }
    grid.sync();
    stopped_ = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(*verdict).load(
                   cuda::std::memory_order_relaxed) == 0;
    return !stopped_;
  }

  // After the block's last access to shared state: moves every slot the block stands for to
  // base + step (step a multiple of epoch_step above every value used).
  __device__ void end(std::uint64_t step) {
    __syncthreads();
    for_each_slot([&](unsigned slot) { e_->epochs[slot] = base_ + step; });
    if (block_ == 0 && linear_thread() == 0) {
      progress_words& p = progress_of(*e_);
      p.finished_epoch = base_ + step;
      p.finished_call = static_cast<std::uint64_t>(call_);
    }
  }
  // The step a user's session takes: the values it used rounded up to a multiple of
  // 2 * epoch_step, at least that, so that the engine's next call keeps alternating scratch halves
  // whatever the user's kernel synchronised.
  __device__ std::uint64_t user_step() const {
    constexpr std::uint64_t unit = 2 * epoch_step;
    const std::uint64_t step = (used_ + unit - 1) / unit * unit;
    return step == 0 ? unit : step;
  }

 private:
  // Calls f(slot) for every slot this block stands for, the block's threads sharing them (one
  // thread storing them all cost 25 us on a 1-block call). The grid is at most max_blocks.
  template <class F>
  __device__ void for_each_slot(F f) const {
    const auto grid = static_cast<unsigned>(grid_blocks());
    for (unsigned slot = block_ + linear_thread() * grid; slot < static_cast<unsigned>(max_blocks);
         slot += grid * block_size())
      f(slot);
  }

  const engine* e_;
  unsigned block_;
  call_kind call_;
  bool stopped_ = false;
  std::uint64_t used_ = 0; // 64 bits: a persistent kernel may pass 2^32 barriers (hours)
  std::uint64_t base_ = 0;
};

} // namespace cohort::detail::p2p
