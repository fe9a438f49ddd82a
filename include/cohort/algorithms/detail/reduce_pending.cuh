// cohort/algorithms/detail/reduce_pending.cuh — the reductions' pending form: the value lands in a
// pinned host slot, and the pending value holds an event of member 0's pool that says when. The
// scratch and the events between members are the group's, kept from call to call
// (execution/detail/member_cache.cuh), so that a loop of reductions allocates and creates nothing
// once the first call has run. A group of one reduces straight into the slot (reduce_one.cuh).
#pragma once

#include "../../detail/nvtx.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "../../memory/detail/pinned_slots.cuh"
#include "../pending.cuh"
#include "reduce_one.cuh"
#include "reduce_plan.cuh"
#include "scratch.cuh"

#include <cstddef>
#include <string_view>
#include <vector>

namespace cohort::detail {

// The events of a reduction over several members, among each member's own (member_cache::event):
// member 0's gathered slots cleared, and each member's part done.
inline constexpr std::size_t reduce_gathered_event = 0;
inline constexpr std::size_t reduce_member_event = 1;

// Each member's scratch for the reduction over several members, from the group's (member 0's
// gathered slots, then its own; member k's own), every member's taken before anything is
// enqueued, so that running out of memory on any leaves nothing queued.
template <class T, class Source>
reduce_memory<T> kept_reduce_memory(const device_group& group, const Source& source,
                                    std::string_view function) {
  reduce_memory<T> memory{
      nullptr, std::vector<partial_slots<T>>(group.size()), reduce_blocks(group, source), {}};
  const std::size_t gathered = align_up(group.size() * sizeof(maybe<T>));
  for (std::size_t k = 0; k < group.size(); ++k) {
    const unsigned blocks = memory.capacity[k];
    const std::size_t bytes =
        (k == 0 ? gathered : 0) + (blocks == 0 ? 0 : reduce_scratch_bytes<T>(blocks));
    if (bytes == 0) continue;
    unsigned char* at = group_memory_access::cache(group, k).scratch(
        scratch_source::group_resource, bytes, group.stream(k),
        group_memory_access::scratch_resource(group, k), function);
    if (k == 0) memory.gathered = reinterpret_cast<maybe<T>*>(at), at += gathered;
    memory.member[k].slots = reinterpret_cast<maybe<T>*>(at);
    if (blocks > 1)
      memory.member[k].arrivals =
          group_memory_access::cache(group, k).arrivals(group.stream(k), function);
  }
  memory.events.push_back(group_memory_access::cache(group, 0).event(reduce_gathered_event));
  for (std::size_t k = 0; k < group.size(); ++k)
    memory.events.push_back(group_memory_access::cache(group, k).event(reduce_member_event));
  return memory;
}

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
  member_cache& root = group_memory_access::cache(group, 0);
  reduce_memory<T> memory;
  if (group.size() > 1) memory = kept_reduce_memory<T>(group, source, function);
  pooled_event done = root.take_event();
  T* host = nullptr;
  {
    // cudaMallocHost (when the slots grow) needs a context: member 0's, never a GPU the group
    // does not use.
    scoped_device on(group.device(0));
    host = static_cast<T*>(pinned_slots::instance().take());
  }
  try {
    if (group.size() == 1) {
      // The one member's scratch (CUB's storage, or the in-order kernel's partials), kept.
      auto kept = [&](std::size_t bytes) {
        return root.scratch(scratch_source::group_resource, bytes, group.stream(0),
                            group_memory_access::scratch_resource(group, 0), function);
      };
      enqueue_reduce_one(
          group, source, init, op, transform, host, kept,
          [&](std::size_t slots) {
            return partial_slots<T>{reinterpret_cast<maybe<T>*>(kept(slots * sizeof(maybe<T>))),
                                    root.arrivals(group.stream(0), function)};
          },
          function);
    } else {
      enqueue_reduce(group, source, init, op, transform, memory, host, /*capturing=*/false);
    }
  } catch (...) {
    // Whatever was enqueued must finish before the slot and the scratch are reused. A wait on
    // the host, bounded by the work already queued; its own failure leaves the slot unreturned.
    bool drained = true;
    for (std::size_t k = 0; k < group.size(); ++k)
      drained = cudaStreamSynchronize(group.stream(k).native_handle()) == cudaSuccess && drained;
    if (drained) pinned_slots::instance().give_back(host);
    throw;
  }
  done.get().record(group.stream(0));
  return pending_access::make(host, std::move(done));
}

} // namespace cohort::detail
