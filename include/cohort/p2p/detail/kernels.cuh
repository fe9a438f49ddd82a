// cohort/p2p/detail/kernels.cuh — the peer-to-peer engine's kernels: the release of a member
// left waiting, and one kernel per collective (engine.cuh says how ranks meet).
#pragma once

#include "block_session.cuh"
#include "elements.cuh"
#include "engine.cuh"
#include "lines.cuh"

#include <cuda/atomic>

#include <cstddef>

namespace cohort::detail::p2p {

// Releases a kernel that waits for members that never launched (their launch failed): it raises,
// in the waiting member's own signal slots and flags, every slot of the missing members
// [first_missing, ranks) past any value. It runs on a stream of the member's own beside the
// waiting kernel. (A template, as every kernel in a header must be, so that translation units may
// share it.)
template <class Word>
__global__ void release_waiting(Word* signals, Word* flags, int first_missing, int ranks) {
  const int peer = first_missing + static_cast<int>(threadIdx.x);
  if (peer >= ranks) return;
  const auto raise_past_all = [&](Word* slots) {
    cuda::atomic_ref<Word, cuda::thread_scope_system> slot(slots[blockIdx.x * max_ranks + peer]);
    slot.store(~Word{0}, cuda::std::memory_order_release);
  };
  raise_past_all(signals);
  raise_past_all(flags);
}

// Every kernel returns at once when launched with ranks == 0 (ensure_loaded's no-op launch), and
// leaves where its session finds the clique stopped (a peer that did not arrive: fault.cuh).

// One-shot all-reduce, for small messages: each rank copies its input into its half of the
// scratch, meets the others once, then reduces every rank's scratch into its output.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    one_shot_all_reduce(const T* in, T* out, std::size_t count, engine e, R r) {
  if (e.ranks == 0) return;
  block_session session(e, call_kind::one_shot_all_reduce);
  if (session.stopped()) return;
  const std::size_t half = session.scratch_offset();
  copy_range<T, V>(in, reinterpret_cast<T*>(e.scratch[e.rank] + half), count);
  if (!session.sync()) return;
  per_rank<const T> from;
  for (int q = 0; q < max_ranks; ++q)
    from.of[q] = reinterpret_cast<const T*>(e.scratch[q] + half);
  reduce_range<T, Acc, V>(from, 0, out, count, r);
  session.end(epoch_step);
}

// One-shot all-reduce of at most line_bytes a rank, for elements of 1, 2, 4 or 8 bytes: each rank
// stores its input in lines (lines.cuh) into its slot of every rank's lines of this call's half,
// then reads its own, every rank's in rank order, as they arrive. No copy into scratch, no barrier,
// no second read: on an H100 an emulated pair's graph-replayed call takes 3.4-3.5 us from 8 bytes
// to 8 KiB, where one_shot_all_reduce took 4.0 and 4.3. The halves alternate as one-shot's do.
// Line i is always the same block's, c % grid for c = i / line_block_threads: every call that
// reaches line i has a grid past c or the clique's whole budget, so a line's flags come from one
// block's call numbers, which only grow.
template <class T, class Acc, class R>
__global__ void __launch_bounds__(line_block_threads)
    lines_all_reduce(const T* in, T* out, std::size_t count, engine e, R r) {
  static_assert(8 % sizeof(T) == 0, "a line holds whole elements");
  if (e.ranks == 0) return;
  block_session session(e, call_kind::one_shot_all_reduce);
  if (session.stopped()) return;
  const std::size_t lines = lines_for(count * sizeof(T));
  const line_call call = line_call_of(session.call_number());
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (std::size_t i = first; i < lines; i += stride) {
    const uint2 data = input_line(in, count, i);
    for (int p = 0; p < e.ranks; ++p)
      store_line(line_at(e, p, call.half, e.rank, i), data, call.flag);
  }
  // Block b's barrier slots on every rank get this call's first value (relaxed: a record for a
  // fault's report of what each rank reached, which no barrier of a later call mistakes: those wait
  // for higher values); block 0 clears one line past the data (line_to_clear).
  if (threadIdx.x < static_cast<unsigned>(e.ranks))
    record_reached(e, static_cast<int>(threadIdx.x), session.block(), session.next_value());
  const std::size_t cleared = line_to_clear(call.number);
  if (blockIdx.x == 0 && threadIdx.x == 0 && cleared >= lines)
    for (int p = 0; p < e.ranks; ++p)
      store_line(line_at(e, p, call.half, e.rank, cleared), make_uint2(0, 0), 0);
  bool arrived = true;
  for (std::size_t i = first; i < lines && arrived; i += stride) {
    uint2 data[max_ranks];
    arrived = read_lines(e, session.block(), call, i, data);
    if (arrived) reduce_line<T, Acc>(data, r, out, count, i);
  }
  if (!session.all_arrived(arrived)) return;
  session.end(epoch_step);
}

// Two-shot all-reduce, for large messages: rank q reduces chunk q of every rank's input into its
// output (reduce-scatter), then every rank copies the other chunks from their owners' outputs
// (all-gather). Three barriers: inputs ready; chunks reduced; everyone done reading (after which
// the caller may change its buffers). In place works: chunk q of a rank's buffer is read in the
// first phase only by rank q and rewritten in the second only after the middle barrier.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    two_shot_all_reduce(per_rank<const T> in, per_rank<T> out, std::size_t count, std::size_t chunk,
                        engine e, R r) {
  if (e.ranks == 0) return;
  block_session session(e, call_kind::two_shot_all_reduce);
  if (session.stopped()) return;
  auto range = [&](int q, std::size_t& first, std::size_t& n) {
    const std::size_t start = chunk * static_cast<std::size_t>(q);
    first = start < count ? start : count;
    n = (count - first < chunk ? count - first : chunk);
  };
  if (!session.sync()) return;
  std::size_t first = 0, n = 0;
  range(e.rank, first, n);
  reduce_range<T, Acc, V>(in, first, out.of[e.rank] + first, n, r);
  if (!session.sync()) return;
  for (int step = 1; step < e.ranks; ++step) {
    const int q = (e.rank + step) % e.ranks; // each rank starts with a different peer
    range(q, first, n);
    copy_range<T, V>(out.of[q] + first, out.of[e.rank] + first, n);
  }
  if (!session.sync()) return;
  session.end(epoch_step);
}

// Reduce-scatter (root < 0): rank q reduces block q (`count` elements at count * q) of every
// rank's input into its output. Reduce (root >= 0): the root reduces every rank's input into its
// output, the others only keep their inputs alive until it has. The second barrier keeps every
// input alive until all ranks have read it.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    reduce_to(per_rank<const T> in, T* out, std::size_t count, int root, engine e, R r) {
  if (e.ranks == 0) return;
  block_session session(e, call_kind::reduce_or_reduce_scatter);
  if (session.stopped()) return;
  if (!session.sync()) return;
  if (root < 0)
    reduce_range<T, Acc, V>(in, count * static_cast<std::size_t>(e.rank), out, count, r);
  else if (e.rank == root)
    reduce_range<T, Acc, V>(in, 0, out, count, r);
  if (!session.sync()) return;
  session.end(epoch_step);
}

// All-gather: every rank copies every rank's `count` elements into its slot of its output.
template <class T, int V>
__global__ void __launch_bounds__(block_threads)
    all_gather(per_rank<const T> in, T* out, std::size_t count, engine e) {
  if (e.ranks == 0) return;
  block_session session(e, call_kind::all_gather);
  if (session.stopped()) return;
  if (!session.sync()) return;
  for (int step = 0; step < e.ranks; ++step) {
    const int q = (e.rank + step) % e.ranks;
    if (in.of[q] != out + count * q) copy_range<T, V>(in.of[q], out + count * q, count);
  }
  if (!session.sync()) return;
  session.end(epoch_step);
}

// Broadcast: every rank but the root copies the root's elements.
template <class T, int V>
__global__ void __launch_bounds__(block_threads)
    broadcast(const T* root_data, T* data, std::size_t count, engine e) {
  if (e.ranks == 0) return;
  block_session session(e, call_kind::broadcast);
  if (session.stopped()) return;
  if (!session.sync()) return;
  if (root_data != data) copy_range<T, V>(root_data, data, count);
  if (!session.sync()) return;
  session.end(epoch_step);
}

} // namespace cohort::detail::p2p
