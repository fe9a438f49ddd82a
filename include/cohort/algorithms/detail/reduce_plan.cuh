// cohort/algorithms/detail/reduce_plan.cuh — how a reduction over a group runs: what each member
// reads (a shard of a range, or its part of an index range), how many blocks it launches, the
// scratch and events it needs (all made before anything is enqueued), and the enqueueing itself,
// shared by the pending form (here) and the device-result form (device_result.cuh).
#pragma once

#include "../../communication/operators.cuh"
#include "../../detail/nvtx.cuh"
#include "../../detail/peer_copy.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../distributed/distributed_view.cuh"
#include "../../distributed/indices.cuh"
#include "../../distributed/on_each_shard.cuh"
#include "../../execution/adaptive_balancer.cuh"
#include "../../execution/launch.cuh"
#include "../../execution/on_each.cuh"
#include "../../memory/detail/pinned_slots.cuh"
#include "../../memory/device_buffer.cuh"
#include "../../streams/event.cuh"
#include "../pending.cuh"
#include "reduce_kernels.cuh"

#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort::detail {

// What a reduction reads, member by member: `counts[k]` items from `input_of(k)` (a pointer into
// member k's shard, or a counting iterator at its first global index), and the balancer that
// times each member's part, where one splits the range.
template <class Range>
struct range_source {
  const Range& range;
  std::vector<std::size_t> counts;
  adaptive_balancer* balancer = nullptr;

  // Const elements whatever the range: one kernel for a buffer and a view of the same type.
  auto input_of(std::size_t k) const {
    using element = std::remove_const_t<range_element_t<const Range>>;
    return static_cast<const element*>(range.shard(k).data.data());
  }
};

struct index_source {
  partition split;
  std::vector<std::size_t> counts;
  adaptive_balancer* balancer = nullptr;

  thrust::counting_iterator<std::size_t> input_of(std::size_t k) const {
    return thrust::counting_iterator<std::size_t>(split.offset(k));
  }
};

// The checks of the input that have no effect: the group has members, and a range is over it.
// (An index range's split is checked, and a balancer's taken, by source_of.)
template <class Input>
void require_reduce_input(const device_group& group, const Input& input,
                          std::string_view function) {
  members_of(group, function);
  if constexpr (distributed_range<Input>) require_buffer_of_group(input, group, function, "input");
}

// Called after the capture checks: a balancer's next split orders moved ranges on the streams.
template <class Range>
range_source<Range> source_of(const device_group&, const Range& range, std::string_view) {
  std::vector<std::size_t> counts(range.shards());
  for (std::size_t k = 0; k < range.shards(); ++k)
    counts[k] = range.shard(k).data.size();
  return {range, std::move(counts)};
}
inline index_source source_of(const device_group& group, const index_range& range,
                              std::string_view function) {
  partition split = range.split_for(group, function);
  std::vector<std::size_t> counts = split.counts();
  return {std::move(split), std::move(counts), range.balancer()};
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

// `bytes` of scratch on `stream` from `resource` (the group's); running out of memory is reported
// as the user's call's.
inline device_buffer<unsigned char> reduce_scratch_on(stream_ref stream,
                                                      memory_resource_ref resource,
                                                      std::size_t bytes,
                                                      std::string_view function) {
  try {
    return device_buffer<unsigned char>(bytes, stream, resource);
  } catch (const cuda_error& e) {
    if (e.status() != cudaErrorMemoryAllocation) throw;
    std::size_t free = 0, total = 0;
    {
      scoped_device on(stream.device());
      ignore_cuda_error(cudaMemGetInfo(&free, &total));
    }
    throw cuda_error(e.status(),
                     "cudaMallocAsync (scratch of cohort::" + std::string(function) + ")",
                     e.device(), e.where(),
                     "Asked for " + std::to_string(bytes) + " bytes; " + std::to_string(free) +
                         " of " + std::to_string(total) + " bytes are free on the device.");
  }
}

// Device memory a reduction over a group uses: member 0's gathered results (one slot per member)
// and each member's scratch. Everything is allocated here, before the reduction enqueues any
// copy, so that running out of memory on any member leaves nothing queued that writes to it.
template <class T>
struct reduce_scratch {
  std::vector<device_buffer<unsigned char>> buffers; // [0] gathered on member 0, [1 + k] member k
  std::vector<unsigned> capacity;                    // partial slots of member k

  // `for_graphs`: from the device's pool, whose copies between devices a graph can hold (another
  // resource's memory may not be reachable from the other members); else the group's resource.
  reduce_scratch(const device_group& group, const std::vector<unsigned>& blocks,
                 std::string_view function, bool for_graphs = false)
      : capacity(blocks) {
    auto resource = [&](std::size_t k) {
      return for_graphs ? default_memory_resource() : group.memory_resource(k);
    };
    buffers.reserve(group.size() + 1);
    buffers.push_back(
        reduce_scratch_on(group.stream(0), resource(0), group.size() * sizeof(maybe<T>), function));
    for (std::size_t k = 0; k < group.size(); ++k)
      buffers.push_back(reduce_scratch_on(group.stream(k), resource(k),
                                          blocks[k] == 0 ? 0 : reduce_scratch_bytes<T>(blocks[k]),
                                          function));
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

#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
// For tests, per thread: the member at which enqueue_reduce throws, as a launch that fails there
// would, after the members before it enqueued their part (none: the largest size_t).
inline thread_local std::size_t reduce_fails_at_member_for_tests = ~std::size_t{0};
#endif

// Enqueues the reduction of what `source` reads on the group's streams, the result written to
// `result` on member 0's stream. Allocates nothing and creates nothing (scratch and events are
// given), so that it can be captured into a graph. `capturing`: whether every member's stream is
// being captured (the caller checked that all are, or none, and that the copies to member 0 can
// be captured).
template <class T, class Op, class Transform, class Source>
void enqueue_reduce(const device_group& group, const Source& source, T init, Op op,
                    Transform transform, reduce_scratch<T>& scratch, reduce_events& events,
                    T* result, bool capturing) {
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
    using Input = decltype(source.input_of(m.rank));
    using U = typename std::iterator_traits<Input>::value_type;
    const Input input = source.input_of(m.rank);
    const std::size_t count = source.counts[m.rank];
    const reduce_launch first = plan_reduce<U>(count, scratch.capacity[m.rank]);
#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
    if (m.rank == reduce_fails_at_member_for_tests) [[unlikely]]
      throw cuda_error(cudaErrorLaunchFailure, "reduce_in_order (a failure tests inject)",
                       m.device.get());
#endif
    // A balancer times the member's reading of its part (not its copy to member 0, which waits
    // for member 0's stream): its stop also marks where a later call may move these indices.
    if (source.balancer != nullptr) source.balancer->start(m.rank, m.stream);
    slot* mine = scratch.member(m.rank);
    if (first.blocks > 0) {
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
      launch(m.stream, config, reduce_in_order<T, T, Input, Transform, Op>, input, count,
             first.per_warp, transform, op, first.blocks == 1 ? mine : mine + 1);
      if (first.blocks > 1) {
        const reduce_launch second = plan_reduce<slot>(first.blocks, 1);
        launch(m.stream, {.grid = 1, .block = reduce_block_threads, .name = config.name},
               reduce_in_order<T, slot, const slot*, identity, combine_maybe<T, Op>>,
               static_cast<const slot*>(mine + 1), std::size_t{first.blocks}, second.per_warp,
               identity{}, combine_maybe<T, Op>{op}, mine);
      }
    }
    if (source.balancer != nullptr) source.balancer->stop(m.rank, m.stream);
    if (first.blocks > 0) {
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

// The blocks member k's first step launches for `source`'s items.
template <class Source>
std::vector<unsigned> reduce_blocks(const device_group& group, const Source& source) {
  std::vector<unsigned> blocks(group.size());
  for (std::size_t k = 0; k < group.size(); ++k) {
    using U = typename std::iterator_traits<decltype(source.input_of(k))>::value_type;
    blocks[k] = plan_reduce<U>(source.counts[k], reduce_max_blocks(group, k)).blocks;
  }
  return blocks;
}

// The pending form: fresh scratch and events for each call, kept alive by the pending value.
template <class T, class Input, class Op, class Transform>
pending<T> reduce_pending(const device_group& group, const Input& input, T init, Op op,
                          Transform transform, std::string_view function) {
  const nvtx_range range(function, "%zu items, %zu members", input.size(), group.size());
  require_value_type<T>();
  refuse_average<Op>();
  require_reduce_input(group, input, function);
  // A pending value cannot outlive a graph replay: its host slot would be read once.
  refuse_capture(
      group, function,
      "a pending<T> result cannot be captured (its host slot would be read once, not at "
      "each replay)",
      "Pass a cohort::device_result<T>& as the last argument: that form leaves the value "
      "in device memory and can be captured.");
  const auto source = source_of(group, input, function);
  reduce_scratch<T> scratch(group, reduce_blocks(group, source), function);
  reduce_events events(group);
  T* host = nullptr;
  {
    // cudaMallocHost (when the slots grow) needs a context: member 0's, never a GPU the group
    // does not use.
    scoped_device on(group.device(0));
    host = static_cast<T*>(pinned_slots::instance().take());
  }
  try {
    enqueue_reduce(group, source, init, op, transform, scratch, events, host,
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
  return pending_access::make(host, std::move(done), std::move(scratch.buffers));
}

} // namespace cohort::detail
