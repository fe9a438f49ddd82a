// cohort/p2p/detail/engine.cuh — the peer-to-peer engine's state and its barriers; how a block of
// a call takes its place in the sequence of calls is in block_session.cuh, what a block that
// waits past its patience leaves behind in fault.cuh, the kernels in kernels.cuh.
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

#include "fault.cuh"

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>

namespace cohort::detail::p2p {

inline constexpr int max_ranks = 8;
inline constexpr int max_blocks = 256; // more than half the SMs of any GPU so far
inline constexpr int block_threads = 512;
// Barrier values a call may use: its epoch's base + 1 ... base + epoch_step - 1.
inline constexpr std::uint64_t epoch_step = 4;
static_assert(max_ranks == fault_max_ranks);
// Small one-shot calls move their data in lines (lines.cuh): 8 bytes of data a 16-byte line, up to
// line_bytes a rank.
inline constexpr std::size_t line_bytes = 8192;
inline constexpr std::size_t max_lines = line_bytes / 8;
// Threads a block of lines_all_reduce, one line each: its lines spread over more SMs than
// block_threads would, whose traffic to the L2 cache one SM would carry alone (on an H100, an
// emulated pair's 8 KiB call replayed from a graph: 3.5 us in blocks of 128, 4.05 in blocks of
// 512).
inline constexpr int line_block_threads = 128;
// The lines a one-shot call of `bytes` a rank moves: 8 bytes of data each.
__host__ __device__ constexpr std::size_t lines_for(std::size_t bytes) {
  return (bytes + 7) / 8;
}

// One rank's state, in 64-bit words of its own memory (p2p_clique allocates it zeroed): signal
// slots, point-to-point flags, sent and waited counts, epochs, the lines small one-shot calls
// receive (two halves of max_lines a sender), the stop word (fault.cuh), the word that hands block
// 0's verdict of a grid_sync to the other blocks, and the progress.
namespace state_layout {
inline constexpr std::size_t signal_words = std::size_t{max_blocks} * max_ranks;
inline constexpr std::size_t line_words = 2 * max_ranks * max_lines * 2;
inline constexpr std::size_t flags = signal_words, counts = 2 * signal_words,
                             epochs = 4 * signal_words, lines = epochs + max_blocks,
                             stop = lines + line_words, grid_verdict = stop + 1,
                             progress = grid_verdict + 1,
                             words = progress + sizeof(progress_words) / sizeof(std::uint64_t);
} // namespace state_layout

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
  // This rank's fault record, in pinned host memory (fault.cuh).
  fault_record* fault;
  unsigned long long patience_ns; // 0: wait for a peer as long as it takes
  // Every rank on one GPU (an emulated group): the ranks' signals and flags are ordered at the
  // device scope. On an H100 a graph-replayed barrier took 3.5 us at the system scope, 2.0 at
  // the device's.
  bool one_device;
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

// The slot on rank `on` that block `block` of rank `from` signals into.
__device__ inline std::uint64_t& signal_slot(const engine& e, int on, unsigned block, int from) {
  return e.signals[on][block * max_ranks + from];
}

// Rank `rank`'s stop word, and this rank's progress (state_layout).
__device__ inline std::uint64_t* stop_word(const engine& e, int rank) {
  return e.signals[rank] + state_layout::stop;
}
__device__ inline progress_words& progress_of(const engine& e) {
  return *reinterpret_cast<progress_words*>(e.signals[e.rank] + state_layout::progress);
}

// Where a block gave up.
struct give_up_at {
  unsigned block;
  int peer;
  std::uint64_t value, seen;
  call_kind call;
  bool point_to_point;
  unsigned long long waited_ns;
};

// The first block of this rank to give up claims the rank's fault record (its stop word from
// running to gave_up) and fills it; every block that gives up tells every other rank to stop.
__device__ inline void give_up(const engine& e, const give_up_at& at) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> mine(*stop_word(e, e.rank));
  std::uint64_t expected = running;
  if (mine.compare_exchange_strong(expected, gave_up, cuda::std::memory_order_acq_rel) &&
      e.fault != nullptr) {
    fault_record& f = *e.fault;
    f.rank = e.rank;
    f.peer = at.peer;
    f.block = at.block;
    f.call = static_cast<std::uint32_t>(at.call);
    f.point_to_point = at.point_to_point ? 1u : 0u;
    f.value = at.value;
    f.seen = at.seen;
    f.waited_ns = at.waited_ns;
    f.at_ns = nanoseconds();
    for (int q = 0; q < max_ranks; ++q)
      f.reached[q] = q < e.ranks ? cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(
                                       signal_slot(e, e.rank, at.block, q))
                                       .load(cuda::std::memory_order_relaxed)
                                 : 0;
    cuda::atomic_ref<unsigned, cuda::thread_scope_system>(f.written).store(
        1u, cuda::std::memory_order_release);
  }
  for (int q = 0; q < e.ranks; ++q)
    if (q != e.rank)
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*stop_word(e, q))
          .store(told_to_stop, cuda::std::memory_order_release);
}

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

// A release store and an acquire load of a signal or flag, at the scope the clique needs.
__device__ inline void store_release(const engine& e, std::uint64_t& word, std::uint64_t value) {
  if (e.one_device)
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(word).store(
        value, cuda::std::memory_order_release);
  else
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(word).store(
        value, cuda::std::memory_order_release);
}
__device__ inline std::uint64_t load_acquire(const engine& e, std::uint64_t& word) {
  if (e.one_device)
    return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>(word).load(
        cuda::std::memory_order_acquire);
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(word).load(
      cuda::std::memory_order_acquire);
}

// Waits until `arrived(seen)` (which polls, and leaves in `seen` what it found) is true. False,
// at once, where the clique has stopped (the rank's stop word is set), or once the engine's
// patience has run out: then this block gives up (fault.cuh), naming `peer` and `value`, and every
// rank is told to stop. A wait longer than a millisecond is written into the rank's progress, for
// p2p_clique::progress. The stop word and the clock are read once every 16 polls: every waiting
// thread of a rank reads the same stop word.
template <class Arrived>
__device__ bool wait_until(const engine& e, Arrived&& arrived, std::uint64_t value, unsigned block,
                           int peer, call_kind call, bool point_to_point = false) {
  std::uint64_t seen = 0;
  if (arrived(seen)) return true;
  std::uint64_t* const stop = stop_word(e, e.rank);
  progress_words& progress = progress_of(e);
  const unsigned long long since = nanoseconds();
  bool reported = false;
  for (;;) {
    if (stop_is_set(stop)) return false;
    const unsigned long long waited = nanoseconds() - since;
    if (!reported && waited > 1'000'000ull) {
      progress.waiting_block = block;
      progress.waiting_peer = static_cast<std::uint64_t>(peer);
      progress.waiting_value = value;
      progress.waiting_call = static_cast<std::uint64_t>(call);
      reported = true;
    }
    if (e.patience_ns != 0 && waited > e.patience_ns) [[unlikely]] {
      give_up(e, {.block = block,
                  .peer = peer,
                  .value = value,
                  .seen = seen,
                  .call = call,
                  .point_to_point = point_to_point,
                  .waited_ns = waited});
      return false;
    }
    bool done = false;
    for (int poll = 0; poll < 16 && !done; ++poll)
      done = arrived(seen);
    if (done) break;
  }
  if (reported) progress.waiting_call = static_cast<std::uint64_t>(call_kind::none);
  return true;
}

// Waits until `slot` holds at least `value` (acquire), as wait_until.
__device__ inline bool wait_for(const engine& e, std::uint64_t& slot, std::uint64_t value,
                                unsigned block, int peer, call_kind call,
                                bool point_to_point = false) {
  return wait_until(
      e,
      [&](std::uint64_t& seen) {
        seen = load_acquire(e, slot);
        return seen >= value;
      },
      value, block, peer, call, point_to_point);
}

// Stores `value` into block `block`'s slot from this rank on rank `peer` (release).
__device__ inline void store_signal(const engine& e, int peer, unsigned block,
                                    std::uint64_t value) {
  store_release(e, signal_slot(e, peer, block, e.rank), value);
}

// Stores `value` into block `block`'s slot from this rank on rank `peer`, relaxed: what a fault
// record reports this block reached, where no barrier needs it.
__device__ inline void record_reached(const engine& e, int peer, unsigned block,
                                      std::uint64_t value) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(signal_slot(e, peer, block, e.rank))
      .store(value, cuda::std::memory_order_relaxed);
}

// Block `block` of every rank meets block `block` of every other rank: it stores `value` into its
// slot of every rank's signals (release: the block's writes so far come first, as release is
// cumulative over the __syncthreads before it) and waits until every rank's block has stored at
// least `value` into its own (acquire, then __syncthreads hands it to the whole block). False, for
// every thread of the block, where a peer did not arrive (wait_for).
__device__ inline bool barrier(const engine& e, unsigned block, std::uint64_t value,
                               call_kind call) {
  __syncthreads();
  bool arrived = true;
  for (int peer = static_cast<int>(linear_thread()); peer < e.ranks;
       peer += static_cast<int>(block_size())) {
    store_signal(e, peer, block, value);
    if (arrived)
      arrived = wait_for(e, signal_slot(e, e.rank, block, peer), value, block, peer, call);
  }
  return __syncthreads_or(!arrived) == 0;
}

} // namespace cohort::detail::p2p
