// cohort/algorithms/detail/sort_cub.cuh — CUB's sort and merge as the multi-device sort calls them:
// one member's chunk sorted (radix or stable merge sort), two adjacent sorted runs merged stably,
// and the copies between members' memory and host staging.
#pragma once

#include "../../errors/cuda_error.cuh"
#include "../../streams/stream_ref.cuh"
#include "sort_kernels.cuh"

#include <cub/device/device_merge.cuh>
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

struct no_values {};

// check_cuda for the sort's steps, whose text, "call (function, what)", is made only when one
// failed.
inline void check_sort_step(cudaError_t status, std::string_view call, std::string_view function,
                            int device, std::string_view what = {},
                            std::source_location where = std::source_location::current()) {
  if (status == cudaSuccess) [[likely]]
    return;
  std::string text(call);
  text += " (";
  text += function;
  if (!what.empty()) {
    text += ", ";
    text += what;
  }
  text += ')';
  check_cuda(status, text, device, where);
}

template <class K, class V>
struct sort_arrays {
  K* keys = nullptr;
  V* values = nullptr; // null without values

  // The arrays from element i on.
  sort_arrays at(std::size_t i) const {
    return {keys + i, values != nullptr ? values + i : nullptr};
  }
};

// Sorts count keys (and values) on `stream`; a size query when temp is null.
// Radix (CUB's DoubleBuffer form): `in` and `out` are the two buffers it passes between, `in`
// holding the input; both are overwritten, and `in_holds_result` says which holds the sorted
// keys. CUB's temporary storage is then small, where the form with a const input takes a second
// copy of the keys (and values) as temporary storage.
// Comparator (CUB's stable merge sort): in place in `out`, which the caller filled from `in`.
template <class K, class V, class Less>
cudaError_t sort_shard(void* temp, std::size_t& bytes, sort_arrays<K, V> in, sort_arrays<K, V> out,
                       std::size_t count, Less less, cudaStream_t stream, bool& in_holds_result) {
  constexpr bool with_values = !std::is_same_v<V, no_values>;
  in_holds_result = false;
  if constexpr (is_radix_less_v<Less>) {
    constexpr int bits = 8 * sizeof(K);
    constexpr bool down = std::is_same_v<Less, radix_less<K, true>>;
    cub::DoubleBuffer<K> keys(in.keys, out.keys);
    cudaError_t status = cudaSuccess;
    if constexpr (with_values) {
      cub::DoubleBuffer<V> values(in.values, out.values);
      if constexpr (down)
        status = cub::DeviceRadixSort::SortPairsDescending(temp, bytes, keys, values, count, 0,
                                                           bits, stream);
      else
        status = cub::DeviceRadixSort::SortPairs(temp, bytes, keys, values, count, 0, bits, stream);
    } else if constexpr (down) {
      status = cub::DeviceRadixSort::SortKeysDescending(temp, bytes, keys, count, 0, bits, stream);
    } else {
      status = cub::DeviceRadixSort::SortKeys(temp, bytes, keys, count, 0, bits, stream);
    }
    // CUB flips the selector on the host as it enqueues each pass (values follow keys).
    in_holds_result = keys.selector == 0;
    return status;
  } else {
    (void)in;
    const auto n = static_cast<std::int64_t>(count);
    if constexpr (with_values)
      return cub::DeviceMergeSort::StableSortPairs(temp, bytes, out.keys, out.values, n, less,
                                                   stream);
    else
      return cub::DeviceMergeSort::StableSortKeys(temp, bytes, out.keys, n, less, stream);
  }
}

// A sorted run: where its keys (and values) are, on this member or read from another, and where
// it starts in the member's output.
template <class K, class V>
struct sorted_run {
  const K* keys = nullptr;
  const V* values = nullptr;
  std::int64_t start = 0;
  std::int64_t length = 0;
};

// Merges run a and the run b that follows it in the output into out (at a.start).
template <class K, class V, class Less>
cudaError_t merge_runs(void* temp, std::size_t& bytes, sorted_run<K, V> a, sorted_run<K, V> b,
                       sort_arrays<K, V> out, Less less, cudaStream_t stream) {
  const by_key_then_position<Less> order{less};
  if constexpr (!std::is_same_v<V, no_values>)
    return cub::DeviceMerge::MergePairs(temp, bytes, positioned_run(a.keys, a.start), a.values,
                                        a.length, positioned_run(b.keys, b.start), b.values,
                                        b.length, unpositioned_output(out.keys), out.values, order,
                                        stream);
  else
    return cub::DeviceMerge::MergeKeys(temp, bytes, positioned_run(a.keys, a.start), a.length,
                                       positioned_run(b.keys, b.start), b.length,
                                       unpositioned_output(out.keys), order, stream);
}

// Copies between any two of: this member's memory, another member's (a peer copy), host staging.
template <class T>
void copy_elements(T* to, const T* from, std::size_t count, stream_ref stream,
                   std::string_view function, std::string_view what) {
  if (count == 0) return;
  check_sort_step(
      cudaMemcpyAsync(to, from, count * sizeof(T), cudaMemcpyDefault, stream.native_handle()),
      "cudaMemcpyAsync", function, stream.device().get(), what);
}

// `count` keys (and values) copied to `to`.
template <class K, class V>
void copy_arrays(sort_arrays<K, V> to, const K* keys, const V* values, std::size_t count,
                 stream_ref stream, std::string_view function) {
  copy_elements(to.keys, keys, count, stream, function, "keys");
  if constexpr (!std::is_same_v<V, no_values>)
    copy_elements(to.values, values, count, stream, function, "values");
}

} // namespace cohort::detail
