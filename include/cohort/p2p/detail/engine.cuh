// cohort/p2p/detail/engine.cuh — the peer-to-peer engine's state and how a block of a call
// takes its place in it (block_session); the kernels are in kernels.cuh.
//
// Every rank of a call runs the same kernel, with the same grid, on its own stream. Ranks meet at
// per-block barriers: block b of each rank writes a value into block b's slot of every rank's
// signals (system-scope release) and waits for block b of every rank (system-scope acquire).
// Because every phase maps element i to the same block on every rank, a per-block barrier orders
// exactly the work that depends on it, and no grid-wide sync is needed.
//
// The engine's state lives on the GPUs: each rank keeps one 64-bit epoch per block slot, which its
// kernels read when they start and advance before they end (block_session). Barrier values and the
// one-shot scratch half come from the epoch, so the host passes only pointers and sizes, and a
// launch captured into a CUDA graph replays correctly any number of times, mixed with direct
// calls (NCCL's LSA barrier sessions and vLLM's custom all-reduce keep their state the same way).
//
// Data from other ranks is read with ld.global.cg (L2, not L1): L1 is not coherent with writes
// made by other GPUs during the kernel.
#pragma once

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace cohort::detail::p2p {

inline constexpr int max_ranks = 8;
inline constexpr int max_blocks = 256; // more than half the SMs of any GPU so far
inline constexpr int block_threads = 512;
// Barrier values a call may use: its epoch's base + 1 ... base + epoch_step - 1.
inline constexpr std::uint64_t epoch_step = 4;

// What one rank's kernels know of the clique. Nothing in it changes from call to call, so a call
// captured into a CUDA graph is the same call at every replay: the state that moves lives in
// device memory, in `epochs` and the signal slots.
struct engine {
  // Every rank's signal slots: slot [block * max_ranks + from] of rank r holds the last barrier
  // value block `block` of rank `from` sent to r.
  std::uint64_t* signals[max_ranks];
  // Every rank's point-to-point flags: flag [block * max_ranks + from] of rank r counts the
  // signals block `block` of rank `from` has sent to r, ever.
  std::uint64_t* flags[max_ranks];
  // This rank's own counts: [block * max_ranks + peer] the signals its block `block` has sent to
  // `peer`, then (max_blocks * max_ranks further on) the waits it has made on `peer`.
  std::uint64_t* counts;
  // This rank's epochs, one per block slot, each only growing (see block_session).
  std::uint64_t* epochs;
  // Every rank's one-shot scratch: two halves of `half_bytes` each.
  unsigned char* scratch[max_ranks];
  std::size_t half_bytes;
  unsigned long long patience_ns; // 0: wait for a peer as long as it takes
  int rank;
  int ranks; // 0 only for the no-op launch that loads a kernel (ensure_loaded)
};

template <class T>
struct per_rank {
  T* of[max_ranks];
};

__device__ inline unsigned long long nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

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

// The block's index in its grid and its thread's index in the block, whatever their dimensions.
__device__ inline unsigned linear_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// In 64 bits: a grid of 2^17 x 2^15 blocks made 0 in 32, which passed the check of at most
// max_blocks (device.cuh).
__device__ inline unsigned long long grid_blocks() {
  return 1ull * gridDim.x * gridDim.y * gridDim.z;
}
__device__ inline unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ inline unsigned block_size() {
  return blockDim.x * blockDim.y * blockDim.z;
}

// Waits until `slot` holds at least `value` (system-scope acquire), within the engine's patience.
__device__ inline void wait_for(const engine& e, std::uint64_t& slot, std::uint64_t value,
                                unsigned block, int peer, const char* call) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> in(slot);
  const unsigned long long since = e.patience_ns != 0 ? nanoseconds() : 0;
  while (in.load(cuda::std::memory_order_acquire) < value) {
    if (e.patience_ns != 0 && nanoseconds() - since > e.patience_ns) {
      printf("cohort p2p: rank %d, block %u has waited %llu ms in %s for rank %d, which has not "
             "arrived: its kernel could not run beside this one (kernels serialised by a tool, "
             "a blocked stream, another clique's kernels filling its SMs, a grid larger than "
             "fits beside its peers) or is only late (a long kernel before the call, a debugger; "
             "then make the p2p_clique with a longer patience, or "
             "p2p_clique_options::wait_forever). Stopping the kernel.\n",
             e.rank, block, e.patience_ns / 1000000ull, call, peer);
      __trap();
    }
  }
}

// Stores `value` into block `block`'s slot from this rank on rank `peer` (system-scope release).
__device__ inline void store_signal(const engine& e, int peer, unsigned block,
                                    std::uint64_t value) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> out(
      e.signals[peer][block * max_ranks + e.rank]);
  out.store(value, cuda::std::memory_order_release);
}

// Block `block` of every rank meets block `block` of every other rank: it stores `value` into its
// slot of every rank's signals (release: the block's writes so far come first, as release is
// cumulative over the __syncthreads before it) and waits until every rank's block has stored at
// least `value` into its own (acquire, then __syncthreads hands it to the whole block).
__device__ inline void barrier(const engine& e, unsigned block, std::uint64_t value,
                               const char* call) {
  __syncthreads();
  for (int peer = static_cast<int>(linear_thread()); peer < e.ranks;
       peer += static_cast<int>(block_size())) {
    store_signal(e, peer, block, value);
    wait_for(e, e.signals[e.rank][block * max_ranks + peer], value, block, peer, call);
  }
  __syncthreads();
}

class block_session {
 public:
  // Every thread of the block, before anything else touches the clique's state.
  __device__ explicit block_session(const engine& e)
      : e_(&e)
      , block_(linear_block()) {
    __shared__ unsigned long long base;
    if (linear_thread() == 0) base = 0;
    __syncthreads();
    unsigned long long highest = 0;
    for_each_slot([&](unsigned slot) {
      if (e.epochs[slot] > highest) highest = e.epochs[slot];
    });
    if (highest != 0) atomicMax(&base, highest);
    __syncthreads();
    base_ = base;
    // `base` is one variable for every session a kernel opens: a second session's thread 0 must
    // not overwrite it before every thread of this block has read it.
    __syncthreads();
  }

  __device__ const engine& clique() const { return *e_; }
  __device__ unsigned block() const { return block_; }
  // The values used so far, and the value the next call takes.
  __device__ std::uint64_t used() const { return used_; }
  __device__ std::uint64_t next() { return base_ + ++used_; }
  // This call's half of every rank's one-shot scratch: consecutive engine calls alternate, and a
  // rank reaches the call after next only once every rank has finished this one (the call between
  // has a barrier; a user's session advances by a multiple of 2 * epoch_step, see end_user).
  __device__ std::size_t scratch_offset() const {
    return ((base_ / epoch_step) & 1u) * e_->half_bytes;
  }

  __device__ void sync(const char* call = "sync") { barrier(*e_, block_, next(), call); }

  __device__ void signal(int peer) {
    __syncthreads(); // the block's writes so far come before the flag
    if (linear_thread() == 0) {
      std::uint64_t& sent = e_->counts[block_ * max_ranks + peer];
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> flag(
          e_->flags[peer][block_ * max_ranks + e_->rank]);
      flag.store(++sent, cuda::std::memory_order_release);
    }
  }

  __device__ void wait(int peer, const char* call = "wait") {
    if (linear_thread() == 0) {
      std::uint64_t& waited =
          e_->counts[std::size_t{max_blocks} * max_ranks + block_ * max_ranks + peer];
      wait_for(*e_, e_->flags[e_->rank][block_ * max_ranks + peer], ++waited, block_, peer, call);
    }
    __syncthreads();
  }

  // After the block's last access to shared state: moves every slot the block stands for to
  // base + step (step a multiple of epoch_step above every value used).
  __device__ void end(std::uint64_t step) {
    __syncthreads();
    for_each_slot([&](unsigned slot) { e_->epochs[slot] = base_ + step; });
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
  std::uint64_t used_ = 0; // 64 bits: a persistent kernel may pass 2^32 barriers (hours)
  std::uint64_t base_ = 0;
};

} // namespace cohort::detail::p2p
