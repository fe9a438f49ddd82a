// cohort/algorithms/sort.cuh — sorting one array spread over every GPU of a group.
//
//   cohort::distributed_buffer<std::uint32_t> keys(group, n);
//   cohort::multi_device_sort(group, keys);                                // ascending
//   cohort::multi_device_sort(group, keys, cohort::descending);
//   cohort::multi_device_sort_by_key(group, keys, values);                 // values follow keys
//   cohort::multi_device_sort(group, points, [] __device__(const point& a, const point& b) {
//     return a.x < b.x;                                                    // any type, comparator
//   });
//   cohort::distributed_view<float> mine(group, spans);  // the user's memory, one span a member
//   cohort::multi_device_sort(group, mine);
//
// Keys and values are distributed_buffers or distributed_views (the user's own memory) of
// non-const elements, over the group; values have the keys' partition. Afterwards shard i holds
// the i-th range of the sorted sequence, and the shards keep their sizes. The sort is stable:
// equal keys (and their values) keep their input order, by global index.
//
// Order: without a comparator, keys are any type CUB's radix sort takes (bool, char, the signed
// and unsigned integers, float, double, __half, __nv_bfloat16; not wchar_t or charN_t) in CUB's
// order: -0.0 and +0.0 are equal, NaNs go by their bits (positive NaNs after +inf, negative NaNs
// before -inf); descending is that order reversed. With a comparator, a strict weak order
// callable on the device. Keys and values are trivially copyable and default-constructible.
// Without a comparator, CUB's radix kernels hold values in shared memory, so large values do not
// compile (ptxas: "uses too much shared data"; 128-byte values on sm_90, in plain CUB as well):
// sort 32-bit indices by key and gather the values with them.
//
// How: each member sorts its shard into scratch (cub::DeviceRadixSort in its DoubleBuffer form,
// passing the keys between the shard and the scratch, or cub::DeviceMergeSort's stable sort for a
// comparator); one kernel on member 0, reading every member's sorted shard over peer access (which
// the sort enables between the members), finds by exact rank selection which part of every sorted
// shard belongs in each member's output range; the host reads that table (the one
// synchronization: so this sort cannot be captured into a graph, and refuses to be); each member
// then merges its parts with cub::DeviceMerge, pairwise in log2(members) rounds, into its shard,
// the first round reading the parts where they lie, so every element crosses between GPUs at most
// once.
//
// A group of one sorts its shard with CUB alone (no split table, no merge, no host wait), so it
// costs what CUB's sort costs: the radix sort in its DoubleBuffer form between the shard and one
// copy of scratch (where CUB's passes end in the scratch, an odd number of them, one copy brings
// the result back), a comparator's sort in place; where that scratch does not fit, it sorts as
// below, staged through host memory.
//
// Memory, on the devices: member k needs count(k) * (sizeof(key) + sizeof(value)) bytes (twice
// that in groups of more than 2 members, whose merges take several rounds) plus CUB's temporary
// storage (small for the radix sort; about count(k) * (sizeof(key) + sizeof(value)) for the
// comparator's merge sort), and member 0 32 KiB more for the split table. So a radix sort over 2
// members holds about twice its keys (and values) at the peak. The group keeps that scratch, and
// the events, for its next calls (device_group::release_scratch gives the scratch back).
//
// Staged through host memory: where two members have no peer path, or where that scratch does not
// fit on some member's device, the sorted runs wait in page-locked host memory mapped into every
// device (size() * (sizeof(key) + sizeof(value)) bytes, allocated for the call). Each member sorts
// its shard in chunks of a block that fits its share of its device's free memory (at least
// 1 / (64 / members) of the shard: a group has at most 64 runs), copies each sorted chunk out, and
// then fills its shard one block at a time: the block's part of every run copied in, then merged.
// Every element crosses PCIe twice; device scratch is one block plus CUB's storage. This form
// waits for the GPUs before it returns (it frees the host memory), and so does an exception after
// it started.
//
// Either way, at most 64 members; everything is checked before any work is enqueued. Scratch that
// cannot fit even staged, on a device or on the host, is out of memory: a cuda_error with
// cudaErrorMemoryAllocation naming the call, the device, and the bytes needed and free. Scratch
// the check found room for but that then cannot be allocated (free memory the pool cannot get in
// one piece, or memory taken meanwhile) is planned again, staged and in smaller blocks, until no
// smaller plan fits. Only the scratch's allocations, freed again, come before such an exception.
// If the sort throws after its work started, the shards' contents are unspecified.
#pragma once

#include "../distributed/distributed_view.cuh"
#include "../execution/device_group.cuh"
#include "detail/sort.cuh"
#include "detail/sort_kernels.cuh"

namespace cohort {

struct descending_t {};
inline constexpr descending_t descending{};

namespace detail {

// Whether `Keys` (or `Values`) can be sorted in place; a const buffer, or a view of const
// elements, is refused here, by name.
template <class Keys>
constexpr bool writable_keys() {
  static_assert(writable_distributed_range<Keys>,
                "cohort::multi_device_sort sorts the keys in place: pass a distributed_buffer or "
                "distributed_view of non-const elements (not a const buffer or a view of const "
                "elements).");
  return writable_distributed_range<Keys>;
}
template <class Values>
constexpr bool writable_values() {
  static_assert(writable_distributed_range<Values>,
                "cohort::multi_device_sort_by_key moves the values with their keys: pass a "
                "distributed_buffer or distributed_view of non-const elements (not a const buffer "
                "or a view of const elements).");
  return writable_distributed_range<Values>;
}

template <class K>
constexpr bool radix_key() {
  static_assert(radix_sortable_v<K>,
                "cohort::multi_device_sort without a comparator sorts the key types CUB's radix "
                "sort takes (integers, float, double, __half, __nv_bfloat16); pass a comparator "
                "for other types.");
  return radix_sortable_v<K>;
}

inline no_values* const without_values = nullptr;

} // namespace detail

// Sorts `keys` (a distributed_buffer or distributed_view) ascending in CUB's radix order, over
// the group; shard sizes are kept.
template <distributed_range Keys>
void multi_device_sort(const device_group& group, Keys&& keys) {
  if constexpr (detail::writable_keys<Keys>())
    if constexpr (detail::radix_key<range_element_t<Keys>>())
      detail::sort_ranges(group, keys, detail::without_values,
                          detail::radix_less<range_element_t<Keys>, false>{}, "multi_device_sort");
}

// Sorts `keys` descending (CUB's radix order reversed).
template <distributed_range Keys>
void multi_device_sort(const device_group& group, Keys&& keys, descending_t) {
  if constexpr (detail::writable_keys<Keys>())
    if constexpr (detail::radix_key<range_element_t<Keys>>())
      detail::sort_ranges(group, keys, detail::without_values,
                          detail::radix_less<range_element_t<Keys>, true>{}, "multi_device_sort");
}

// Sorts `keys` by `less`, a strict weak order callable on the device (stable).
template <distributed_range Keys, class Less>
void multi_device_sort(const device_group& group, Keys&& keys, Less less) {
  if constexpr (detail::writable_keys<Keys>())
    detail::sort_ranges(group, keys, detail::without_values, less, "multi_device_sort");
}

// Sorts `keys` ascending and moves `values` (same partition) with them; stable.
template <distributed_range Keys, distributed_range Values>
void multi_device_sort_by_key(const device_group& group, Keys&& keys, Values&& values) {
  if constexpr (detail::writable_keys<Keys>() && detail::writable_values<Values>())
    if constexpr (detail::radix_key<range_element_t<Keys>>())
      detail::sort_ranges(group, keys, &values, detail::radix_less<range_element_t<Keys>, false>{},
                          "multi_device_sort_by_key");
}

template <distributed_range Keys, distributed_range Values>
void multi_device_sort_by_key(const device_group& group, Keys&& keys, Values&& values,
                              descending_t) {
  if constexpr (detail::writable_keys<Keys>() && detail::writable_values<Values>())
    if constexpr (detail::radix_key<range_element_t<Keys>>())
      detail::sort_ranges(group, keys, &values, detail::radix_less<range_element_t<Keys>, true>{},
                          "multi_device_sort_by_key");
}

template <distributed_range Keys, distributed_range Values, class Less>
void multi_device_sort_by_key(const device_group& group, Keys&& keys, Values&& values, Less less) {
  if constexpr (detail::writable_keys<Keys>() && detail::writable_values<Values>())
    detail::sort_ranges(group, keys, &values, less, "multi_device_sort_by_key");
}

} // namespace cohort
