// cohort/p2p/detail/fault.cuh — what the engine's kernels leave behind when a peer does not arrive,
// and what each rank reports of its progress (p2p_clique::progress).
//
// A block that waits past the clique's patience gives up instead of trapping (a trap loses the
// process's CUDA context): it claims its rank's fault record by turning the rank's stop word from
// 0 to 1 (a local atomic: peer atomics need not exist), writes the record into host-mapped memory,
// and stores 2 into every other rank's stop word. Every block of every rank checks its own stop
// word when its session opens and while it waits, and leaves: the kernels end, the context stays
// usable, and the host reads the records (p2p_clique::broken(), the next call, the group's
// synchronize) without a CUDA call.
//
// Progress lives in each rank's own device memory (a store or two per call, on the GPU only): the
// last call block 0 started and finished, and what a block has waited for longer than a
// millisecond. p2p_clique::progress copies it on a stream of its own, so it answers while a call
// waits for ever.
#pragma once

#include <cuda/atomic>

#include <cstdint>

namespace cohort::detail::p2p {

inline constexpr int fault_max_ranks = 8; // engine.cuh's max_ranks, which includes this header

// The calls, as the kernels name them to the host (call_name gives their names).
enum class call_kind : std::uint32_t {
  none,
  one_shot_all_reduce,
  two_shot_all_reduce,
  reduce_or_reduce_scatter,
  all_gather,
  broadcast,
  user_kernel,  // a user's kernel that opened a p2p_session
  session_sync, // p2p_session::sync
  session_wait, // p2p_session::wait
  session_grid_sync,
};

inline const char* call_name(call_kind c) noexcept {
  switch (c) {
  case call_kind::none:
    return "nothing";
  case call_kind::one_shot_all_reduce:
    return "all_reduce (one-shot)";
  case call_kind::two_shot_all_reduce:
    return "all_reduce (two-shot)";
  case call_kind::reduce_or_reduce_scatter:
    return "reduce or reduce_scatter";
  case call_kind::all_gather:
    return "all_gather";
  case call_kind::broadcast:
    return "broadcast";
  case call_kind::user_kernel:
    return "a user's kernel (p2p_session)";
  case call_kind::session_sync:
    return "p2p_session::sync";
  case call_kind::session_wait:
    return "p2p_session::wait";
  case call_kind::session_grid_sync:
    return "p2p_session::grid_sync";
  }
  return "an unknown call";
}

// One rank's progress, in 64-bit words of its own memory.
struct progress_words {
  std::uint64_t started_epoch, started_call;   // block 0's last session: its base and its call
  std::uint64_t finished_epoch, finished_call; // the last block 0 ended (epoch it moved to)
  std::uint64_t waiting_call;                  // call_kind of a wait longer than 1 ms, or none
  std::uint64_t waiting_block, waiting_peer, waiting_value;
};

// Written by the first block of a rank that gives up, into host-mapped memory.
struct fault_record {
  unsigned int written; // 0, then 1 once the fields below hold (stored last, system release)
  int rank;
  int peer; // the rank that did not arrive
  unsigned int block;
  std::uint32_t call;           // call_kind
  std::uint32_t point_to_point; // 1: a wait for a signal (value counts signals), 0: a barrier
  std::uint64_t value;          // what the block waited for
  std::uint64_t seen;           // what it found
  std::uint64_t waited_ns;
  std::uint64_t at_ns; // the GPU's global timer when it gave up (orders the ranks' records)
  std::uint64_t reached[fault_max_ranks]; // the barrier value block `block` of each rank had sent
};

// Values of a rank's stop word.
inline constexpr std::uint64_t running = 0, gave_up = 1, told_to_stop = 2;

// Relaxed: a block that finds the word set leaves, reading nothing the stopping block wrote.
__device__ inline bool stop_is_set(std::uint64_t* stop) {
  return cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*stop).load(
             cuda::std::memory_order_relaxed) != running;
}

} // namespace cohort::detail::p2p
