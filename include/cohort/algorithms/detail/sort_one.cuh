// cohort/algorithms/detail/sort_one.cuh — a sort over a group of one: CUB's sort of the shard and
// nothing else (no split table, no merge, no host wait), in the scratch the member keeps between
// calls; so it costs what CUB's sort costs. The radix sort is cub::DeviceRadixSort's DoubleBuffer
// form, passing the keys (and values) between the shard and one scratch copy; the shard must hold
// the result, so where CUB's passes end in the scratch (an odd number of them: one-byte keys, or
// a single tile), one copy brings it back. A comparator's sort is cub::DeviceMergeSort's stable
// sort in place in the shard.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "scratch.cuh"
#include "sort_cub.cuh"
#include "sort_kernels.cuh"
#include "sort_plan.cuh"

#include <cstddef>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

// One address per instantiation: the key under which a member remembers what CUB asked for.
template <class... Kinds>
const void* sort_size_key() {
  static const char key = 0;
  return &key;
}

// Sorts `shard` (`count` keys, and values where V is not no_values) on member 0's stream. Returns
// false, with nothing enqueued, where it does not sort: the scratch it would add does not fit on
// the device, or a test forces the planned form (sort_plan.cuh); the planned sort then runs,
// staged through host memory where the device has too little.
template <class K, class V, class Less>
bool sort_one_member(const device_group& group, sort_arrays<K, V> shard, std::size_t count,
                     Less less, std::string_view function) {
  const sort_request request = requested_sort();
  if (request.on_devices_only || request.through_host || request.max_block > 0 || request.watched)
    return false;
  if (count < 2) return true;
  constexpr bool radix = is_radix_less_v<Less>;
  const stream_ref stream = group.stream(0);
  const int device = stream.device().get();
  scoped_device on(stream.device()); // CUB sizes and launches for the current device
  member_cache& cache = group_memory_access::cache(group, 0);
  bool unused = false;
  std::size_t bytes = cache.remembered_bytes(sort_size_key<K, V, Less>(), count, [&] {
    std::size_t asked = 0;
    check_sort_step(
        sort_shard<K, V>(nullptr, asked, {}, {}, count, less, stream.native_handle(), unused),
        "cub sort", function, device, "size query");
    return asked;
  });
  const std::size_t need = (radix ? block_bytes<K, V>(count) : 0) + align_up(bytes);
  if (!cache.holds(scratch_source::group_resource, need)) {
    if (find_scratch_shortfall(group, {need})) return false;
    try {
      (void)cache.scratch(scratch_source::group_resource, need, stream,
                          group_memory_access::scratch_resource(group, 0), function);
    } catch (const cuda_error& e) {
      if (e.status() != cudaErrorMemoryAllocation) throw;
      return false;
    }
  }
  scratch_slices slices(cache.scratch(scratch_source::group_resource, need, stream,
                                      group_memory_access::scratch_resource(group, 0), function));
  sort_arrays<K, V> other = shard; // the merge sort's output: the shard itself
  if constexpr (radix) {
    other.keys = slices.take<K>(count);
    if constexpr (!std::is_same_v<V, no_values>) other.values = slices.take<V>(count);
  }
  bool in_shard = false;
  check_sort_step(sort_shard<K, V>(slices.rest(), bytes, shard, other, count, less,
                                   stream.native_handle(), in_shard),
                  "cub sort", function, device);
  if (radix && !in_shard) copy_arrays(shard, other.keys, other.values, count, stream, function);
  return true;
}

} // namespace cohort::detail
