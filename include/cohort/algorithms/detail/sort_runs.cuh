// cohort/algorithms/detail/sort_runs.cuh — where a multi-device sort's sorted runs wait for the
// merges: two strategies with the same member functions, chosen once by the plan.
// `runs_on_devices`: each member's shard is one run, sorted into its scratch, where the other
// members' merges read it over peer access. `runs_through_host`: each member's chunks are runs,
// sorted through one block of scratch and copied out to page-locked host memory, from which each
// member copies the parts it merges back in. And the events that keep each member's scratch until
// the other members stopped reading it.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "../../streams/event.cuh"
#include "../../streams/stream_ref.cuh"
#include "host_staging.cuh"
#include "scratch.cuh"
#include "sort_cub.cuh"
#include "sort_plan.cuh"

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort::detail {

// One member's scratch, carved as its plan sized it: `local` holds a block of keys (and values),
// `between` the merges' rounds between the first and the last (`local` itself unless a second
// block was planned), `table` member 0's split table, `temp` CUB's storage.
template <class K, class V>
struct sort_scratch {
  sort_arrays<K, V> local, between;
  std::size_t* table = nullptr;
  void* temp = nullptr;
};

template <class K, class V>
std::vector<sort_scratch<K, V>>
carve_sort_scratch(const sort_plan& plan, std::vector<scratch_slices>& memory, bool second_block) {
  std::vector<sort_scratch<K, V>> carved(memory.size());
  for (std::size_t k = 0; k < memory.size(); ++k) {
    sort_scratch<K, V>& s = carved[k];
    const std::size_t c = plan.block[k];
    s.local.keys = memory[k].take<K>(c);
    if constexpr (!std::is_same_v<V, no_values>) s.local.values = memory[k].take<V>(c);
    s.between = s.local;
    if (second_block) {
      s.between.keys = memory[k].take<K>(c);
      if constexpr (!std::is_same_v<V, no_values>) s.between.values = memory[k].take<V>(c);
    }
    if (k == 0) s.table = memory[k].take<std::size_t>(sort_table_bytes / sizeof(std::size_t));
    s.temp = memory[k].rest();
  }
  return carved;
}

// Copies `part` to its place in `to` (at its start in the member's output) and points it there.
template <class K, class V>
void move_part(sorted_run<K, V>& part, sort_arrays<K, V> to, stream_ref stream,
               std::string_view function) {
  const sort_arrays<K, V> place = to.at(std::size_t(part.start));
  copy_arrays(place, part.keys, part.values, std::size_t(part.length), stream, function);
  part.keys = place.keys;
  part.values = place.values;
}

// Each member's sorted shard stays in its scratch; the merges' first round reads it there (peer
// reads), so every element crosses between GPUs at most once. Enables peer access between the
// members, as device_group::enable_peer_access would (the plan found a path for every pair).
template <class K, class V, bool Radix>
class runs_on_devices {
 public:
  runs_on_devices(const device_group& group, const sort_plan& plan,
                  std::vector<scratch_slices>& memory, std::string_view function)
      : plan_(plan)
      , function_(function) {
    // Once per group: peer access, once enabled, stays so.
    member_cache& root = group_memory_access::cache(group, 0);
    if (group.size() > 1 && !root.peer_access_enabled()) {
      (void)group.enable_peer_access(); // true: every pair has a path
      root.set_peer_access_enabled();
    }
    scratch_ = carve_sort_scratch<K, V>(plan, memory, group.size() > 2);
  }

  const sort_scratch<K, V>& member(std::size_t k) const { return scratch_[k]; }

  // Where run r's sorted keys (and values) wait for the merges.
  sort_arrays<K, V> run(std::size_t r) const { return scratch_[plan_.runs[r].member].local; }

  // Where member k sorts `in` (its shard): the radix sort passes the keys between the shard and
  // the scratch; the comparator's merge sort works in the scratch, filled from the shard first
  // (the merges write the shards while reading every member's sorted keys).
  sort_arrays<K, V> sort_into(std::size_t k, sort_arrays<K, V> in, std::size_t count,
                              stream_ref stream) const {
    const sort_arrays<K, V> out = scratch_[k].local;
    if constexpr (!Radix) copy_arrays(out, in.keys, in.values, count, stream, function_);
    return out;
  }

  // Run r sorted into `result`, which is the shard where `in_shard` (the radix sort's passes ended
  // there): into the scratch with it.
  void keep(std::size_t r, sort_arrays<K, V> result, bool in_shard, std::size_t count,
            stream_ref stream) const {
    if (in_shard)
      copy_arrays(scratch_[plan_.runs[r].member].local, result.keys, result.values, count, stream,
                  function_);
  }

  // The merges' first round reads the parts where they are.
  void gather(std::vector<sorted_run<K, V>>&, sort_arrays<K, V>, stream_ref) const {}

 private:
  const sort_plan& plan_;
  std::string_view function_;
  std::vector<sort_scratch<K, V>> scratch_;
};

// Every run waits at its global index in page-locked host memory mapped into every device
// (size() keys, then size() values), allocated for the call and freed, after every member's
// stream finished, when this goes.
template <class K, class V, bool Radix>
class runs_through_host {
 public:
  runs_through_host(const device_group& group, const sort_plan& plan,
                    std::vector<scratch_slices>& memory, std::size_t size,
                    std::string_view function)
      : plan_(plan)
      , function_(function)
      , staging_(plan.host_bytes, group, function) {
    host_.keys = reinterpret_cast<K*>(staging_.data());
    if constexpr (!std::is_same_v<V, no_values>)
      host_.values = reinterpret_cast<V*>(staging_.data() + align_up(size * sizeof(K)));
    scratch_ = carve_sort_scratch<K, V>(plan, memory, false);
  }

  const sort_scratch<K, V>& member(std::size_t k) const { return scratch_[k]; }

  sort_arrays<K, V> run(std::size_t r) const { return host_.at(plan_.runs[r].first); }

  // The radix sort passes the chunk's keys between the shard and the block of scratch; the
  // comparator's merge sort works in place in the shard.
  sort_arrays<K, V> sort_into(std::size_t k, sort_arrays<K, V> in, std::size_t, stream_ref) const {
    return Radix ? scratch_[k].local : in;
  }

  // Run r sorted into `result`: out to host memory.
  void keep(std::size_t r, sort_arrays<K, V> result, bool, std::size_t count,
            stream_ref stream) const {
    copy_arrays(run(r), result.keys, result.values, count, stream, function_);
  }

  // Two or more parts are copied in from host memory to where the first round reads them.
  void gather(std::vector<sorted_run<K, V>>& parts, sort_arrays<K, V> to, stream_ref stream) const {
    if (parts.size() > 1)
      for (sorted_run<K, V>& part : parts)
        move_part(part, to, stream, function_);
  }

 private:
  const sort_plan& plan_;
  std::string_view function_;
  host_staging staging_;
  sort_arrays<K, V> host_{};
  std::vector<sort_scratch<K, V>> scratch_;
};

// The events between the phases, among each member's own (member_cache::event). Whatever
// happens, no member's scratch is freed or taken by a later call (on its own stream, after these)
// before member 0's split kernel and every member's merges stopped reading it: the destructor
// makes every stream wait for them. (The host staging waits for every stream before it is freed.)
inline constexpr std::size_t sort_sorted_event = 0;
inline constexpr std::size_t sort_merged_event = 1;
inline constexpr std::size_t sort_split_event = 2;

class sort_events {
 public:
  explicit sort_events(const device_group& group)
      : group_(group)
      , root_done_(group_memory_access::cache(group, 0).event(sort_split_event)) {
    done_sorting.reserve(group.size());
    done_merging.reserve(group.size());
    for (std::size_t k = 0; k < group.size(); ++k) {
      member_cache& cache = group_memory_access::cache(group, k);
      done_sorting.push_back(cache.event(sort_sorted_event));
      done_merging.push_back(cache.event(sort_merged_event));
    }
  }
  sort_events(const sort_events&) = delete;
  sort_events& operator=(const sort_events&) = delete;

  // Each member's calls with its device current (a device that cannot be made current lost its
  // context, and its work with it).
  ~sort_events() {
    const cudaEvent_t root = root_done_.native_handle();
    on_device_quietly(group_.device(0), [&] {
      ignore_cuda_error(cudaEventRecord(root, group_.stream(0).native_handle()));
    });
    // A member whose merging threw may have enqueued some of its peer reads: its stream's end
    // stands for them.
    for (; merged < group_.size(); ++merged)
      on_device_quietly(group_.device(merged), [&] {
        ignore_cuda_error(cudaEventRecord(done_merging[merged].native_handle(),
                                          group_.stream(merged).native_handle()));
      });
    for (std::size_t k = 0; k < group_.size(); ++k)
      on_device_quietly(group_.device(k), [&] {
        const cudaStream_t stream = group_.stream(k).native_handle();
        ignore_cuda_error(cudaStreamWaitEvent(stream, root, 0));
        for (std::size_t j = 0; j < merged; ++j)
          ignore_cuda_error(cudaStreamWaitEvent(stream, done_merging[j].native_handle(), 0));
      });
  }

  std::vector<event_ref> done_sorting; // per member: its runs sorted and kept
  std::vector<event_ref> done_merging; // per member: its last read of another's scratch is before
  std::size_t merged = 0;              // members whose done_merging is recorded

 private:
  const device_group& group_;
  event_ref root_done_; // member 0's split kernel done
};

} // namespace cohort::detail
