// cohort/algorithms/detail/sort_kernels.cuh — the multi-device sort's device code: CUB's radix
// order as a comparator, the total order that makes merges stable, and the kernel that finds, for
// every piece of the sorted result, which part of every sorted run falls in it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail {

// Types CUB's radix sort orders without a decomposer: its traits cover bool, char, the signed and
// unsigned integers, float, double, __half and __nv_bfloat16, not the other character types.
template <class K>
inline constexpr bool is_wide_character_v =
    std::is_same_v<K, wchar_t> || std::is_same_v<K, char8_t> || std::is_same_v<K, char16_t> ||
    std::is_same_v<K, char32_t>;
template <class K>
inline constexpr bool radix_sortable_v =
    (std::is_arithmetic_v<K> && sizeof(K) <= 8 && !is_wide_character_v<std::remove_cv_t<K>>) ||
    std::is_same_v<K, __half> || std::is_same_v<K, __nv_bfloat16>;

template <class K>
using ordered_bits_t = std::conditional_t<
    sizeof(K) == 1, std::uint8_t,
    std::conditional_t<sizeof(K) == 2, std::uint16_t,
                       std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint64_t>>>;

// The unsigned value CUB's radix sort orders a key by: unsigned keys as they are, signed ones with
// the sign bit flipped, floating-point ones with the sign bit flipped (positive) or every bit
// flipped (negative), -0.0 first turned into +0.0 since CUB sorts the two as equal. NaNs land
// where their bits put them: positive NaNs after +inf, negative ones before -inf.
template <class K>
__host__ __device__ ordered_bits_t<K> radix_ordered(const K& key) {
  using bits_t = ordered_bits_t<K>;
  bits_t bits;
  memcpy(&bits, &key, sizeof(K));
  constexpr bits_t sign = bits_t(bits_t(1) << (8 * sizeof(K) - 1));
  if constexpr (std::is_integral_v<K> && std::is_unsigned_v<K>) {
    return bits;
  } else if constexpr (std::is_integral_v<K>) {
    return bits_t(bits ^ sign);
  } else {
    if (bits == sign) bits = 0;
    return (bits & sign) ? bits_t(~bits) : bits_t(bits ^ sign);
  }
}

// CUB's radix order (descending: its reverse) as a comparator, for the merges and the splits.
template <class K, bool Descending>
struct radix_less {
  __host__ __device__ bool operator()(const K& a, const K& b) const {
    return Descending ? radix_ordered(b) < radix_ordered(a) : radix_ordered(a) < radix_ordered(b);
  }
};

template <class Less>
inline constexpr bool is_radix_less_v = false;
template <class K, bool Descending>
inline constexpr bool is_radix_less_v<radix_less<K, Descending>> = true;

// A key with its position in the buffer being merged: cub::DeviceMerge is unstable, but with
// the position breaking ties between equal keys no two elements are equal, so the merge of two
// adjacent runs keeps every equal key of the left run before those of the right one.
template <class K>
struct positioned {
  K key;
  std::int64_t at;
};

template <class K>
struct position_keys {
  const K* keys;
  std::int64_t base;
  __host__ __device__ positioned<K> operator()(std::int64_t i) const { return {keys[i], base + i}; }
};

template <class K>
struct drop_position {
  __host__ __device__ K operator()(const positioned<K>& p) const { return p.key; }
};

template <class Less>
struct by_key_then_position {
  Less less;
  template <class K>
  __host__ __device__ bool operator()(const positioned<K>& a, const positioned<K>& b) const {
    if (less(a.key, b.key)) return true;
    if (less(b.key, a.key)) return false;
    return a.at < b.at;
  }
};

// A run's keys, each with its position `first + i` in the member's output.
template <class K>
auto positioned_run(const K* keys, std::int64_t first) {
  return thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0),
                                         position_keys<K>{keys, first});
}

template <class K>
auto unpositioned_output(K* keys) {
  return thrust::make_transform_output_iterator(keys, drop_position<K>{});
}

inline constexpr std::size_t max_sort_members = 64;
// Sorted runs the merges combine: one per member when they stay on the GPUs, a member's chunks
// when they are staged through host memory. Each member's output is cut into at most
// max_sort_runs / members pieces, so at most max_sort_runs - 1 ranks cut the output.
inline constexpr std::size_t max_sort_runs = 64;

// The sorted runs, in input order, and the global ranks where the output is cut: passed by value
// to the split kernel.
template <class K>
struct sorted_runs {
  const K* keys[max_sort_runs];
  std::size_t count[max_sort_runs];
  std::size_t runs;
  std::size_t rank[max_sort_runs]; // the cuts strictly inside the output, ascending
  std::size_t ranks;
};

// How many keys of the sorted `keys[0, n)` come before `e` (with `or_equal`: are not after it).
template <class K, class Less>
__device__ std::size_t count_before(const K* keys, std::size_t n, const K& e, bool or_equal,
                                    Less less) {
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const bool before = or_equal ? !less(e, keys[mid]) : less(keys[mid], e);
    if (before)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The global order is (key, run, position in the run): the runs are in input order, so equal keys
// keep the order of the input, which is what makes the sort stable. For cut i and run k,
// table[i * runs + k] = how many of run k's keys have a global rank below rank[i], found by a
// binary search over run k's keys, each probe ranked against every other run's keys by binary
// search: ranks * runs threads, O(runs * log^2 n) reads each (over peer access or from host
// memory, where the runs are).
template <class K, class Less>
__global__ void find_splits(sorted_runs<K> runs, Less less, std::size_t* table) {
  const std::size_t p = runs.runs;
  const std::size_t t = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (t >= runs.ranks * p) return;
  const std::size_t i = t / p, k = t % p;
  const std::size_t rank = runs.rank[i];
  const K* mine = runs.keys[k];
  std::size_t lo = 0, hi = runs.count[k];
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const K e = mine[mid];
    std::size_t r = mid;
    for (std::size_t other = 0; other < p; ++other)
      if (other != k) r += count_before(runs.keys[other], runs.count[other], e, other < k, less);
    if (r >= rank)
      hi = mid;
    else
      lo = mid + 1;
  }
  table[t] = lo;
}

} // namespace cohort::detail
