// cohort/algorithms/detail/reduce_plan.cuh — how a reduction over a group runs: what each member
// reads (a shard of a range, or its part of an index range), how many blocks it launches, the
// scratch and events it needs (all made before anything is enqueued), and the enqueueing itself
// over several members, shared by the pending form (reduce_pending.cuh) and the device-result form
// (device_result.cuh). A group of one reduces as reduce_one.cuh says.
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
#include "../../memory/device_buffer.cuh"
#include "../../streams/event.cuh"
#include "reduce_kernels.cuh"
#include "scratch.cuh"

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

// The blocks that reduce `count` items (reduce_in_order, each block on a contiguous range of
// steps): one for every step (reduce_step_tiles tiles), as many as the slots allow, none for no
// items. A block of less than a step would leave warps idle.
template <class U>
unsigned plan_reduce(std::size_t count, unsigned max_blocks) {
  constexpr std::size_t tile = 32 * reduce_items_per_lane<U>;
  if (count == 0) return 0;
  const std::size_t tiles = (count + tile - 1) / tile;
  const std::size_t steps = (tiles + reduce_step_tiles - 1) / reduce_step_tiles;
  return static_cast<unsigned>(std::clamp<std::size_t>(steps, 1, std::max(1u, max_blocks)));
}

// The most blocks a member's kernel launches: the partial slots its scratch holds.
inline unsigned reduce_max_blocks(const device_group& group, std::size_t rank) {
  return std::max(1u, group.sm_count(rank)) * reduce_blocks_per_sm;
}

// Member k's slots: slot 0 its result, then one per block of its kernel.
template <class T>
std::size_t reduce_scratch_bytes(unsigned blocks) {
  return (1 + static_cast<std::size_t>(blocks)) * sizeof(maybe<T>);
}

// Where a reduction over several members works and what it records: member 0's gathered slots
// (one per member), member k's slots (its result, then capacity[k], one per block of its kernel)
// with the count its blocks share, the event that says the gathered slots are cleared, and each
// member's done.
template <class T>
struct reduce_memory {
  maybe<T>* gathered = nullptr;
  std::vector<partial_slots<T>> member;
  std::vector<unsigned> capacity;
  std::vector<event_ref> events; // [0] gathered slots cleared (member 0), [1 + k] member k done
};

// Device memory a device_result's reductions use, made with it: member 0's gathered results and
// each member's slots, then its count of blocks done (zeroed here). Everything is allocated here,
// before any reduction enqueues a copy, so that running out of memory on any member leaves nothing
// queued that writes to it. Its own count, not the group's: a graph that holds a reduction into
// the result may replay on another stream than the group's calls.
template <class T>
struct reduce_scratch {
  std::vector<device_buffer<unsigned char>> buffers; // [0] gathered on member 0, [1 + k] member k
  std::vector<unsigned> capacity;                    // partial slots of member k

  // From the device's pool, whose copies between devices a graph can hold (another resource's
  // memory may not be reachable from the other members).
  reduce_scratch(const device_group& group, const std::vector<unsigned>& blocks,
                 std::string_view function)
      : capacity(blocks) {
    buffers.reserve(group.size() + 1);
    buffers.push_back(allocate_scratch(group.size() * sizeof(maybe<T>), group.stream(0),
                                       default_memory_resource(), function));
    for (std::size_t k = 0; k < group.size(); ++k) {
      const std::size_t bytes =
          blocks[k] == 0 ? 0 : align_up(reduce_scratch_bytes<T>(blocks[k])) + sizeof(unsigned);
      buffers.push_back(
          allocate_scratch(bytes, group.stream(k), default_memory_resource(), function));
      buffers.back().fill_bytes(0);
    }
  }
  // Member k's slots (its result, then its blocks') and its count.
  partial_slots<T> member(std::size_t k) {
    unsigned char* const at = buffers[1 + k].data();
    unsigned* const count =
        capacity[k] == 0
            ? nullptr
            : reinterpret_cast<unsigned*>(at + align_up(reduce_scratch_bytes<T>(capacity[k])));
    return {reinterpret_cast<maybe<T>*>(at), count};
  }
};

// The events a device_result's reductions record (reduce_memory::events).
struct reduce_events {
  std::vector<event> all;

  explicit reduce_events(const device_group& group) {
    all.reserve(group.size() + 1);
    all.emplace_back(group.device(0));
    for (std::size_t k = 0; k < group.size(); ++k)
      all.emplace_back(group.device(k));
  }
  event_ref member_done(std::size_t k) const { return all[1 + k]; }
};

template <class T>
reduce_memory<T> memory_of(reduce_scratch<T>& scratch, const reduce_events& events) {
  reduce_memory<T> memory{
      reinterpret_cast<maybe<T>*>(scratch.buffers[0].data()), {}, scratch.capacity, {}};
  for (std::size_t k = 0; k + 1 < scratch.buffers.size(); ++k)
    memory.member.push_back(scratch.member(k));
  memory.events.assign(events.all.begin(), events.all.end());
  return memory;
}

#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
// For tests, per thread: the member at which enqueue_reduce throws, as a launch that fails there
// would, after the members before it enqueued their part (none: the largest size_t).
inline thread_local std::size_t reduce_fails_at_member_for_tests = ~std::size_t{0};
#endif

// Enqueues the reduction of what `source` reads on the group's streams, the result written to
// `result` on member 0's stream. Allocates nothing and creates nothing (`memory` is given), so
// that it can be captured into a graph. `capturing`: whether every member's stream is being
// captured (the caller checked that all are, or none, and that the copies to member 0 can be
// captured).
template <class T, class Op, class Transform, class Source>
void enqueue_reduce(const device_group& group, const Source& source, T init, Op op,
                    Transform transform, const reduce_memory<T>& memory, T* result,
                    bool capturing) {
  using slot = maybe<T>;
  const stream_ref root = group.stream(0);
  // Clearing the gathered slots also says "no items" for members that have none.
  {
    scoped_device on(root.device());
    check_cuda(
        cudaMemsetAsync(memory.gathered, 0, group.size() * sizeof(slot), root.native_handle()),
        "cudaMemsetAsync (reduction results)", root.device().get());
  }
  memory.events[0].record(root);

  on_each_member(group, [&](const member& m) {
    using Input = decltype(source.input_of(m.rank));
    using U = typename std::iterator_traits<Input>::value_type;
    const Input input = source.input_of(m.rank);
    const std::size_t count = source.counts[m.rank];
    const unsigned blocks = plan_reduce<U>(count, memory.capacity[m.rank]);
#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
    if (m.rank == reduce_fails_at_member_for_tests) [[unlikely]]
      throw cuda_error(cudaErrorLaunchFailure, "reduce_in_order (a failure tests inject)",
                       m.device.get());
#endif
    // A balancer times the member's reading of its part (not its copy to member 0, which waits
    // for member 0's stream): its stop also marks where a later call may move these indices.
    if (source.balancer != nullptr) source.balancer->start(m.rank, m.stream);
    slot* const mine = memory.member[m.rank].slots;
    if (blocks > 0) {
      // A T with padding (a user struct such as {float; long long}) has bytes the kernels never
      // write: zero the slots first, so that copying them reads only written bytes (what
      // compute-sanitizer's initcheck checks). Types without padding skip this.
      if constexpr (!std::is_arithmetic_v<T> && !std::has_unique_object_representations_v<T>)
        check_cuda(
            cudaMemsetAsync(mine, 0, reduce_scratch_bytes<T>(blocks), m.stream.native_handle()),
            "cudaMemsetAsync (reduction partials)", m.device.get());
      const launch_config config{
          .grid = blocks, .block = reduce_block_threads, .name = "cohort::detail::reduce_in_order"};
      // One block writes the member's result; several leave one partial each in the slots after
      // it, which the last of them folds, in order, into the result.
      if (blocks == 1)
        launch(m.stream, config, reduce_kernel<T, Input, Transform, Op, into_slot<T>>, input, count,
               transform, op, into_slot<T>{mine});
      else
        launch(m.stream, config, reduce_kernel<T, Input, Transform, Op, via_slots<T, into_slot<T>>>,
               input, count, transform, op,
               via_slots<T, into_slot<T>>{{mine + 1, memory.member[m.rank].arrivals},
                                          into_slot<T>{mine}});
    }
    if (source.balancer != nullptr) source.balancer->stop(m.rank, m.stream);
    if (blocks > 0) {
      // The slot in member 0's gathered array must be cleared before it is overwritten.
      m.stream.wait(memory.events[0]);
      copy_between_devices(memory.gathered + m.rank, root.device(), mine, m.device, sizeof(slot),
                           m.stream, capturing, "reduction partial to member 0");
    }
    memory.events[1 + m.rank].record(m.stream);
  });

  for (std::size_t k = 0; k < group.size(); ++k)
    root.wait(memory.events[1 + k]);
  launch(root, {.name = "cohort::detail::combine_members"}, combine_members<T, Op>,
         static_cast<const slot*>(memory.gathered), group.size(), init, op, result);
}

// The blocks member k's first step launches for `source`'s items.
template <class Source>
std::vector<unsigned> reduce_blocks(const device_group& group, const Source& source) {
  std::vector<unsigned> blocks(group.size());
  for (std::size_t k = 0; k < group.size(); ++k) {
    using U = typename std::iterator_traits<decltype(source.input_of(k))>::value_type;
    blocks[k] = plan_reduce<U>(source.counts[k], reduce_max_blocks(group, k));
  }
  return blocks;
}

} // namespace cohort::detail
