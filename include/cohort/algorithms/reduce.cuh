// cohort/algorithms/reduce.cuh — reductions over every GPU of a group, in order.
//
// The result is op(init, x[0], x[1], ..., x[n-1]) for any associative operator: commutativity is
// not assumed, and `init` is used once. Member k reduces its contiguous part in order (each warp
// a contiguous range, cub::WarpReduce within a warp, warps and blocks combined in order), then
// member 0 combines the members' results in rank order with `init`. Any trivially copyable,
// default-constructible value type works.
//
// Two forms of each reduction. The first returns a `pending<T>`: the value lands in host memory,
// and nothing blocks until `wait()`. It cannot be captured into a CUDA graph (a pending value
// cannot outlive a replay): called on a stream that is being captured it throws
// std::logic_error before enqueuing anything. The second, `..._into(..., device_result<T>&
// result)`, leaves the value in device memory on member 0 (`result.data()`), written in member
// 0's stream order; nothing is allocated or created during the call, so it can be captured and
// replayed any number of times. Its T is the result's (`init` converts to it). Captured over
// members on several devices, each member's device must reach member 0's memory pool (a graph
// captures only direct copies): call group.enable_peer_access() before the capture; without it
// the call throws std::logic_error, naming the member, before enqueuing anything.
//
//   auto sum = cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{});
//   auto max = cohort::multi_device_transform_reduce(group, x, -INFINITY,
//                  cuda::maximum<>{}, [] __device__(float v) { return fabsf(v); });
//   auto dot = cohort::multi_device_transform_reduce_n(group, n, 0.0, cuda::std::plus<>{},
//                  [=] __device__(std::size_t i) { return double(a[i]) * b[i]; });
//   float s = sum.wait();
//
//   cohort::device_result<float> total(group);            // made once, outside any capture
//   cohort::multi_device_reduce_into(group, x, 0.0f, cuda::std::plus<>{}, total);
//   float* on_gpu0 = total.data();                         // for work on group.stream(0)
//   float t = total.get();                                 // or copy it yourself
//   cohort::device_result<double> wide(group);             // T is the result's: init converts
//   cohort::multi_device_reduce_into(group, x, 0, cuda::std::plus<>{}, wide);
#pragma once

#include "../detail/narrow_floats.cuh"
#include "../communication/operators.cuh"
#include "../detail/nvtx.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../detail/one_capture.cuh"
#include "../execution/launch.cuh"
#include "../execution/on_each.cuh"
#include "../detail/peer_copy.cuh"
#include "pending.cuh"

#include <cub/warp/warp_load.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort {

namespace detail {

// A value, or nothing: lets each member reduce without `init`, so `init` counts exactly once,
// and lets a partial tile reduce without an identity element. The flag fills the rest of the
// struct, so that a maybe has no padding: padding never written is what compute-sanitizer's
// initcheck reports when a maybe is copied.
template <class T>
struct maybe {
  T value;
  unsigned char flag[alignof(T)]; // all bytes 1 or all 0

  __host__ __device__ bool has() const { return flag[0] != 0; }
  __host__ __device__ static maybe of(T v) { return with(v, 1); }
  __host__ __device__ static maybe none() { return with(T{}, 0); }

 private:
  __host__ __device__ static maybe with(T v, unsigned char f) {
    maybe m;
    m.value = v;
    for (unsigned i = 0; i < alignof(T); ++i)
      m.flag[i] = f;
    return m;
  }
};

// `op` with "nothing" as the identity on both sides: associative whenever `op` is, and the
// left operand always comes first.
template <class T, class Op>
struct combine_maybe {
  Op op;
  __device__ maybe<T> operator()(const maybe<T>& a, const maybe<T>& b) const {
    if (!a.has()) return b;
    if (!b.has()) return a;
    return maybe<T>::of(convert<T>(op(a.value, b.value)));
  }
};

struct identity {
  template <class U>
  __device__ const U& operator()(const U& x) const {
    return x;
  }
};

inline constexpr int reduce_block_threads = 256;
inline constexpr int reduce_block_warps = reduce_block_threads / 32;
inline constexpr unsigned reduce_blocks_per_sm = 8;

// Items each lane loads per step: 16 bytes, one vector load of consecutive items (blocked, so the
// lane folds them in order, and a warp's step is 512 contiguous bytes). Measured on an H200 over
// 2^28 floats: 16 bytes a lane and 8 blocks of 256 threads per SM ran at 0.97x
// cub::DeviceReduce::Sum; 32 or 64 bytes a lane, or items transposed through shared memory
// (bank conflicts), ran at 0.45-0.84x.
template <class U>
inline constexpr int reduce_items_per_lane = sizeof(U) < 16 ? static_cast<int>(16 / sizeof(U)) : 1;

// A block's result as a partial slot: the kernel folds values of type V, which is the user's T on
// the first step and maybe<T> when it folds the partials of the first step.
template <class T, class V>
__device__ void store_partial(maybe<T>* out, const maybe<V>& result) {
  if constexpr (std::is_same_v<V, T>)
    *out = result;
  else
    *out = result.has() ? result.value : maybe<T>::none();
}

// Reduces items [0, count) of `input` in order, values transform(item) of type V folded with `op`.
// Warp w of block b (global warp g = b * warps + w) takes the contiguous range
// [g * per_warp, (g + 1) * per_warp) and steps through it a warp tile at a time: each lane folds
// its consecutive items, cub::WarpReduce (which keeps lane order) folds the lanes, and lane 0 folds
// the tiles in order. Whole tiles take the plain path (no "nothing" to test per item); only a
// warp's last, partial tile pays for maybe<V>. The warps' results are folded in order into
// out[b].
template <class T, class V, class Input, class Transform, class Op>
__global__ void __launch_bounds__(reduce_block_threads)
    reduce_in_order(Input input, std::size_t count, std::size_t per_warp, Transform transform,
                    Op op, maybe<T>* out) {
  using U = typename std::iterator_traits<Input>::value_type;
  constexpr int per_lane = reduce_items_per_lane<U>;
  constexpr int tile = 32 * per_lane;
  using load = cub::WarpLoad<U, per_lane, cub::WARP_LOAD_VECTORIZE>;
  using reduce_whole = cub::WarpReduce<V>;
  using reduce_partial = cub::WarpReduce<maybe<V>>;
  __shared__ typename load::TempStorage load_storage[reduce_block_warps];
  __shared__ typename reduce_whole::TempStorage whole_storage[reduce_block_warps];
  __shared__ typename reduce_partial::TempStorage partial_storage[reduce_block_warps];
  // Raw storage: a __shared__ variable may not have a constructor to run, and V's may.
  __shared__ alignas(maybe<V>) unsigned char warp_bytes[sizeof(maybe<V>) * reduce_block_warps];
  maybe<V>* warp_total = reinterpret_cast<maybe<V>*>(warp_bytes);

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const combine_maybe<V, Op> combine{op};
  const std::size_t first =
      (static_cast<std::size_t>(blockIdx.x) * reduce_block_warps + warp) * per_warp;
  const std::size_t end =
      first < count ? (count - first < per_warp ? count : first + per_warp) : first;
  const std::size_t whole_end = first + (end - first) / tile * tile;
  // Warp-uniform bounds: every lane of the warp runs every step, as WarpLoad and WarpReduce need.
  V total{}; // meaningful in lane 0 once a tile is folded
  for (std::size_t at = first; at < whole_end; at += tile) {
    U items[per_lane];
    load(load_storage[warp]).Load(input + at, items);
    V mine = convert<V>(transform(items[0]));
#pragma unroll
    for (int j = 1; j < per_lane; ++j)
      mine = convert<V>(op(mine, convert<V>(transform(items[j]))));
    const V step = reduce_whole(whole_storage[warp]).Reduce(mine, op);
    if (lane == 0) total = at == first ? step : convert<V>(op(total, step));
    __syncwarp(); // the warp's temporary storage is reused by the next step
  }
  maybe<V> result = whole_end > first ? maybe<V>::of(total) : maybe<V>::none();
  if (whole_end < end) {
    const int valid = static_cast<int>(end - whole_end);
    U items[per_lane];
    load(load_storage[warp]).Load(input + whole_end, items, valid, U{});
    maybe<V> mine = maybe<V>::none();
#pragma unroll
    for (int j = 0; j < per_lane; ++j)
      if (lane * per_lane + j < valid)
        mine = combine(mine, maybe<V>::of(convert<V>(transform(items[j]))));
    const maybe<V> step = reduce_partial(partial_storage[warp]).Reduce(mine, combine);
    if (lane == 0) result = combine(result, step);
  }
  if (lane == 0) warp_total[warp] = result;
  __syncthreads();
  if (threadIdx.x == 0) {
    maybe<V> block = maybe<V>::none();
    for (int w = 0; w < reduce_block_warps; ++w)
      block = combine(block, warp_total[w]);
    store_partial(out + blockIdx.x, block);
  }
}

// On member 0: op(init, partial of member 0, partial of member 1, ...), members without items
// skipped, into `result` (device memory, or pinned host memory for a pending value).
template <class T, class Op>
__global__ void combine_members(const maybe<T>* partials, std::size_t count, T init, Op op,
                                T* result) {
  T value = init;
  for (std::size_t k = 0; k < count; ++k)
    if (partials[k].has()) value = convert<T>(op(value, partials[k].value));
  *result = value;
}

// How member k's reduction is launched: `blocks` blocks whose warps take `per_warp` items each
// (a whole number of warp tiles). No blocks for no items.
struct reduce_launch {
  unsigned blocks = 0;
  std::size_t per_warp = 0;
};

template <class U>
reduce_launch plan_reduce(std::size_t count, unsigned max_blocks) {
  constexpr std::size_t tile = 32 * reduce_items_per_lane<U>;
  if (count == 0) return {};
  const std::size_t warps = static_cast<std::size_t>(max_blocks) * reduce_block_warps;
  const std::size_t tiles = (count + tile - 1) / tile;
  const std::size_t per_warp = (tiles + warps - 1) / warps * tile;
  const std::size_t per_block = per_warp * reduce_block_warps;
  return {static_cast<unsigned>((count + per_block - 1) / per_block), per_warp};
}

// The most blocks a member's first step launches: the partial slots its scratch holds.
inline unsigned reduce_max_blocks(const device_group& group, std::size_t rank) {
  return std::max(1u, group.sm_count(rank)) * reduce_blocks_per_sm;
}

// Member k's scratch: slot 0 its result, then one slot per block of its first step.
template <class T>
std::size_t reduce_scratch_bytes(unsigned blocks) {
  return (1 + static_cast<std::size_t>(blocks)) * sizeof(maybe<T>);
}

// Device memory a reduction over a group uses: member 0's gathered results (one slot per member)
// and each member's scratch. Everything is allocated here, before the reduction enqueues any
// copy, so that running out of memory on any member leaves nothing queued that writes to it.
template <class T>
struct reduce_scratch {
  std::vector<device_buffer<unsigned char>> buffers; // [0] gathered on member 0, [1 + k] member k
  std::vector<unsigned> capacity;                    // partial slots of member k

  reduce_scratch(const device_group& group, const std::vector<unsigned>& blocks)
      : capacity(blocks) {
    buffers.reserve(group.size() + 1);
    buffers.emplace_back(group.size() * sizeof(maybe<T>), group.stream(0));
    for (std::size_t k = 0; k < group.size(); ++k)
      buffers.emplace_back(blocks[k] == 0 ? 0 : reduce_scratch_bytes<T>(blocks[k]),
                           group.stream(k));
  }
  maybe<T>* gathered() { return reinterpret_cast<maybe<T>*>(buffers[0].data()); }
  maybe<T>* member(std::size_t k) { return reinterpret_cast<maybe<T>*>(buffers[1 + k].data()); }
};

// The events a reduction records: the gathered slots cleared, and each member's copy done.
struct reduce_events {
  event gathered_ready;
  std::vector<event> member_done;

  explicit reduce_events(const device_group& group)
      : gathered_ready(group.device(0)) {
    member_done.reserve(group.size());
    for (std::size_t k = 0; k < group.size(); ++k)
      member_done.emplace_back(group.device(k));
  }
};

template <class T>
void require_value_type() {
  static_assert(std::is_trivially_copyable_v<T>,
                "cohort reductions need a trivially copyable value type.");
  static_assert(std::is_default_constructible_v<T>,
                "cohort reductions need a default-constructible value type.");
  static_assert(sizeof(maybe<T>) == sizeof(T) + alignof(T), "a maybe<T> must have no padding");
  // Each block keeps one partial result per warp in static shared memory (48 KiB at most).
  static_assert(sizeof(T) <= 4096,
                "cohort's reductions take values of at most 4 KiB (a block keeps one per warp in "
                "shared memory): reduce a wider value in parts.");
}

// For tests, per thread: the member at which enqueue_reduce throws, as a launch that fails there
// would, after the members before it enqueued their part (none: the largest size_t).
inline thread_local std::size_t reduce_fails_at_member_for_tests = ~std::size_t{0};

// Enqueues the reduction of member k's `counts[k]` items of `input_of(k)` (an iterator) on the
// group's streams, the result written to `result` on member 0's stream. Allocates nothing and
// creates nothing (scratch and events are given), so that it can be captured into a graph.
// `capturing`: whether every member's stream is being captured (the caller checked that all are,
// or none, and that the copies to member 0 can be captured).
template <class T, class Op, class Transform, class InputOf>
void enqueue_reduce(const device_group& group, const std::vector<std::size_t>& counts,
                    InputOf input_of, T init, Op op, Transform transform,
                    reduce_scratch<T>& scratch, reduce_events& events, T* result, bool capturing) {
  using slot = maybe<T>;
  const stream_ref root = group.stream(0);
  // Clearing the gathered slots also says "no items" for members that have none.
  {
    scoped_device on(root.device());
    check_cuda(
        cudaMemsetAsync(scratch.gathered(), 0, group.size() * sizeof(slot), root.native_handle()),
        "cudaMemsetAsync (reduction results)", root.device().get());
  }
  events.gathered_ready.record(root);

  on_each_member(group, [&](const member& m) {
    using Input = decltype(input_of(m.rank));
    using U = typename std::iterator_traits<Input>::value_type;
    const Input input = input_of(m.rank);
    const reduce_launch first = plan_reduce<U>(counts[m.rank], scratch.capacity[m.rank]);
    if (m.rank == reduce_fails_at_member_for_tests) [[unlikely]]
      throw cuda_error(cudaErrorLaunchFailure, "reduce_in_order (a failure tests inject)",
                       m.device.get());
    if (first.blocks > 0) {
      slot* mine = scratch.member(m.rank);
      // A T with padding (a user struct such as {float; long long}) has bytes the kernels never
      // write: zero the slots first, so that copying them reads only written bytes (what
      // compute-sanitizer's initcheck checks). Types without padding skip this.
      if constexpr (!std::is_arithmetic_v<T> && !std::has_unique_object_representations_v<T>)
        check_cuda(cudaMemsetAsync(mine, 0, reduce_scratch_bytes<T>(first.blocks),
                                   m.stream.native_handle()),
                   "cudaMemsetAsync (reduction partials)", m.device.get());
      const launch_config config{.grid = first.blocks,
                                 .block = reduce_block_threads,
                                 .name = "cohort::detail::reduce_in_order"};
      // One block writes the member's result; several write one partial each, which one more
      // block then folds, in order, into the result.
      launch(m.stream, config, reduce_in_order<T, T, Input, Transform, Op>, input, counts[m.rank],
             first.per_warp, transform, op, first.blocks == 1 ? mine : mine + 1);
      if (first.blocks > 1) {
        const reduce_launch second = plan_reduce<slot>(first.blocks, 1);
        launch(m.stream, {.grid = 1, .block = reduce_block_threads, .name = config.name},
               reduce_in_order<T, slot, const slot*, identity, combine_maybe<T, Op>>,
               static_cast<const slot*>(mine + 1), std::size_t{first.blocks}, second.per_warp,
               identity{}, combine_maybe<T, Op>{op}, mine);
      }
      // The slot in member 0's gathered array must be cleared before it is overwritten.
      m.stream.wait(events.gathered_ready);
      copy_between_devices(scratch.gathered() + m.rank, root.device(), mine, m.device, sizeof(slot),
                           m.stream, capturing, "reduction partial to member 0");
    }
    events.member_done[m.rank].record(m.stream);
  });

  for (const event& e : events.member_done)
    root.wait(e);
  launch(root, {.name = "cohort::detail::combine_members"}, combine_members<T, Op>,
         static_cast<const slot*>(scratch.gathered()), group.size(), init, op, result);
}

inline std::size_t total_of(const std::vector<std::size_t>& counts) noexcept {
  std::size_t total = 0;
  for (std::size_t c : counts)
    total += c;
  return total;
}

// The pending form: fresh scratch and events for each call, kept alive by the pending value.
template <class T, class Op, class Transform, class InputOf>
pending<T> reduce_pending(const device_group& group, const std::vector<std::size_t>& counts,
                          InputOf input_of, T init, Op op, Transform transform,
                          std::string_view function) {
  const nvtx_range range(function, "%zu items, %zu members", total_of(counts), group.size());
  require_value_type<T>();
  refuse_average<Op>();
  // A pending value cannot outlive a graph replay: its host slot would be read once.
  refuse_capture(group, function,
                 "a pending<T> result cannot be captured (its host slot would be read once, not at "
                 "each replay)",
                 "Use " + std::string(function) + "_into with a cohort::device_result<T>.");
  std::vector<unsigned> blocks(group.size());
  for (std::size_t k = 0; k < group.size(); ++k) {
    using U = typename std::iterator_traits<decltype(input_of(k))>::value_type;
    blocks[k] = plan_reduce<U>(counts[k], reduce_max_blocks(group, k)).blocks;
  }
  reduce_scratch<T> scratch(group, blocks);
  reduce_events events(group);
  T* host = nullptr;
  {
    // cudaMallocHost (when the slots grow) needs a context: member 0's, never a GPU the group
    // does not use.
    scoped_device on(group.device(0));
    host = static_cast<T*>(pinned_slots::instance().take());
  }
  try {
    enqueue_reduce(group, counts, input_of, init, op, transform, scratch, events, host,
                   /*capturing=*/false); // refused above
  } catch (...) {
    // Whatever was enqueued must finish before the slot and the scratch are reused. A wait on
    // the host, bounded by the work already queued; its own failure leaves the slot unreturned.
    bool drained = true;
    for (std::size_t k = 0; k < group.size(); ++k)
      drained = cudaStreamSynchronize(group.stream(k).native_handle()) == cudaSuccess && drained;
    if (drained) pinned_slots::instance().give_back(host);
    throw;
  }
  event done(group.device(0));
  done.record(group.stream(0));
  return pending<T>(host, std::move(done), std::move(scratch.buffers));
}

template <class U>
std::vector<std::size_t> shard_counts(const distributed_buffer<U>& buffer) {
  std::vector<std::size_t> counts(buffer.shards());
  for (std::size_t k = 0; k < buffer.shards(); ++k)
    counts[k] = buffer.shard(k).data.size();
  return counts;
}

inline void require_split(const partition& split, const device_group& group, std::size_t n,
                          std::string_view function) {
  members_of(group, function);
  require_argument(
      split.parts() == group.size() && split.size() == n, function, "split",
      "must have one part per member and cover n items (it has " + std::to_string(split.parts()) +
          " parts covering " + std::to_string(split.size()) + " items; the group has " +
          std::to_string(group.size()) + " members and n is " + std::to_string(n) + ").");
}

} // namespace detail

// A reduction's result that stays in device memory: one T on member 0's device, with the scratch
// and events the reductions into it use, all made here so that the reductions allocate nothing
// and can be captured into a CUDA graph and replayed. Made for one group; the reductions into it
// are ordered on that group's streams (one after another, as each call's member 0 work follows
// the previous call's), and it must outlive every graph that holds such a reduction. A reduction
// into it that throws leaves its value unspecified, and nothing queued that would disturb the
// next one.
template <class T>
class device_result {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "cohort::device_result<T> needs a trivially copyable, default-constructible T.");

 public:
  explicit device_result(const device_group& group)
      : value_(1, (detail::members_of(group, "device_result"), group.stream(0)))
      , scratch_(group, max_blocks(group))
      , events_(group) {
    for (std::size_t k = 0; k < group.size(); ++k)
      streams_.push_back(group.stream(k));
  }

  // The value on member 0's device (group.device(0)), written in group.stream(0)'s order.
  T* data() noexcept { return value_.data(); }
  const T* data() const noexcept { return value_.data(); }
  device_ref device() const noexcept { return value_.stream().device(); }

  // Copies the value to the host after the work on member 0's stream, and waits for it.
  T get() const {
    T host{};
    value_.copy_to_host(std::span<T>(&host, 1));
    value_.stream().synchronize();
    return host;
  }

 private:
  static std::vector<unsigned> max_blocks(const device_group& group) {
    std::vector<unsigned> blocks(group.size());
    for (std::size_t k = 0; k < group.size(); ++k)
      blocks[k] = detail::reduce_max_blocks(group, k);
    return blocks;
  }

 public:
  // Used by the `_into` reductions (not meant to be called directly): refuses a result made for
  // another group, then enqueues.
  template <class Op, class Transform, class InputOf>
  void enqueue(const device_group& group, const std::vector<std::size_t>& counts, InputOf input_of,
               T init, Op op, Transform transform, std::string_view function) {
    const detail::nvtx_range range(function, "%zu items, %zu members", detail::total_of(counts),
                                   group.size());
    detail::require_value_type<T>();
    detail::refuse_average<Op>();
    bool same = group.size() == streams_.size();
    for (std::size_t k = 0; same && k < group.size(); ++k)
      same = group.stream(k) == streams_[k];
    if (!same)
      detail::throw_invalid_argument(function, "result",
                                     "was made for another group (its streams are not this "
                                     "group's); make a device_result over this group.");
    const bool capturing = detail::require_one_capture(streams_, function);
    if (capturing)
      for (std::size_t k = 1; k < group.size(); ++k)
        detail::require_capturable_copy(group.device(k), group.device(0), function,
                                        "member " + std::to_string(k) +
                                            "'s copy of its partial result to member 0");
    try {
      detail::enqueue_reduce(group, counts, input_of, init, op, transform, scratch_, events_,
                             value_.data(), capturing);
    } catch (...) {
      // The members before the failing one may still copy their part into member 0's gathered
      // slots: member 0's stream, where the next reduction clears them and where they are freed,
      // waits for every member's stream as it stands. No host wait.
      for (std::size_t k = 0; k < group.size(); ++k) {
        const cudaEvent_t done = events_.member_done[k].native_handle();
        bool recorded = false; // not where device k's context is gone (an older record: no wait)
        detail::on_device_quietly(group.device(k), [&] {
          recorded = cudaEventRecord(done, group.stream(k).native_handle()) == cudaSuccess;
        });
        if (recorded)
          detail::on_device_quietly(group.device(0), [&] {
            ignore_cuda_error(cudaStreamWaitEvent(group.stream(0).native_handle(), done, 0));
          });
      }
      throw;
    }
  }

 private:
  device_buffer<T> value_;
  detail::reduce_scratch<T> scratch_;
  detail::reduce_events events_;
  std::vector<stream_ref> streams_;
};

// op(init, transform(x) for every element x of `buffer`, in order).
template <class T, class U, class Op, class Transform>
pending<T> multi_device_transform_reduce(const device_group& group,
                                         const distributed_buffer<U>& buffer, T init, Op op,
                                         Transform transform) {
  detail::require_buffer_of_group(buffer, group, "multi_device_transform_reduce", "buffer");
  return detail::reduce_pending(
      group, detail::shard_counts(buffer),
      [&](std::size_t k) { return buffer.shard(k).data.data(); }, init, op, transform,
      "multi_device_transform_reduce");
}

// op(init, every element of `buffer`, in order).
template <class T, class U, class Op>
pending<T> multi_device_reduce(const device_group& group, const distributed_buffer<U>& buffer,
                               T init, Op op) {
  detail::require_buffer_of_group(buffer, group, "multi_device_reduce", "buffer");
  return detail::reduce_pending(
      group, detail::shard_counts(buffer),
      [&](std::size_t k) { return buffer.shard(k).data.data(); }, init, op, detail::identity{},
      "multi_device_reduce");
}

// op(init, transform(i) for every global index i in [0, n), in order), split evenly or by
// `split`.
template <class T, class Op, class Transform>
pending<T> multi_device_transform_reduce_n(const device_group& group, std::size_t n, T init, Op op,
                                           Transform transform, const partition& split) {
  detail::require_split(split, group, n, "multi_device_transform_reduce_n");
  return detail::reduce_pending(
      group, split.counts(),
      [&](std::size_t k) { return thrust::counting_iterator<std::size_t>(split.offset(k)); }, init,
      op, transform, "multi_device_transform_reduce_n");
}

template <class T, class Op, class Transform>
pending<T> multi_device_transform_reduce_n(const device_group& group, std::size_t n, T init, Op op,
                                           Transform transform) {
  return multi_device_transform_reduce_n(
      group, n, init, op, transform,
      partition::even(n, detail::members_of(group, "multi_device_transform_reduce_n")));
}

// The device-result forms: the same reductions, the value written to `result.data()` on member
// 0's stream. Capturable (see device_result).
template <class T, class U, class Op, class Transform>
void multi_device_transform_reduce_into(const device_group& group,
                                        const distributed_buffer<U>& buffer,
                                        std::type_identity_t<T> init, Op op, Transform transform,
                                        device_result<T>& result) {
  detail::require_buffer_of_group(buffer, group, "multi_device_transform_reduce_into", "buffer");
  result.enqueue(
      group, detail::shard_counts(buffer),
      [&](std::size_t k) { return buffer.shard(k).data.data(); }, init, op, transform,
      "multi_device_transform_reduce_into");
}

template <class T, class U, class Op>
void multi_device_reduce_into(const device_group& group, const distributed_buffer<U>& buffer,
                              std::type_identity_t<T> init, Op op, device_result<T>& result) {
  detail::require_buffer_of_group(buffer, group, "multi_device_reduce_into", "buffer");
  result.enqueue(
      group, detail::shard_counts(buffer),
      [&](std::size_t k) { return buffer.shard(k).data.data(); }, init, op, detail::identity{},
      "multi_device_reduce_into");
}

template <class T, class Op, class Transform>
void multi_device_transform_reduce_n_into(const device_group& group, std::size_t n,
                                          std::type_identity_t<T> init, Op op, Transform transform,
                                          device_result<T>& result, const partition& split) {
  detail::require_split(split, group, n, "multi_device_transform_reduce_n_into");
  result.enqueue(
      group, split.counts(),
      [&](std::size_t k) { return thrust::counting_iterator<std::size_t>(split.offset(k)); }, init,
      op, transform, "multi_device_transform_reduce_n_into");
}

template <class T, class Op, class Transform>
void multi_device_transform_reduce_n_into(const device_group& group, std::size_t n,
                                          std::type_identity_t<T> init, Op op, Transform transform,
                                          device_result<T>& result) {
  multi_device_transform_reduce_n_into(
      group, n, init, op, transform, result,
      partition::even(n, detail::members_of(group, "multi_device_transform_reduce_n_into")));
}

} // namespace cohort
