// cohort/algorithms/sort.cuh — sorting one array spread over every GPU of a group.
//
//   cohort::distributed_buffer<std::uint32_t> keys(group, n);
//   cohort::multi_device_sort(group, keys);                                // ascending
//   cohort::multi_device_sort(group, keys, cohort::descending);
//   cohort::multi_device_sort_by_key(group, keys, values);                 // values follow keys
//   cohort::multi_device_sort(group, points, [] __device__(const point& a, const point& b) {
//     return a.x < b.x;                                                    // any type, comparator
//   });
//
// Afterwards shard i holds the i-th range of the sorted sequence, and the shards keep their sizes:
// the output has the input's partition (rebalance by making the buffer with another partition).
// The sort is stable: equal keys (and their values) keep their input order, by global index.
//
// Order: without a comparator, keys are any type CUB's radix sort takes (integers, float, double,
// __half, __nv_bfloat16) in CUB's order: -0.0 and +0.0 are equal (so they keep their input
// order), NaNs go by their bits (positive NaNs after +inf, negative NaNs before -inf); descending
// is that order reversed. With a comparator, a strict weak order callable on the device.
//
// How: each member sorts its shard into scratch (cub::DeviceRadixSort in its DoubleBuffer form,
// passing the keys between the shard and the scratch, or cub::DeviceMergeSort's stable sort for a
// comparator); one kernel on member 0, reading every member's sorted shard over
// peer access, finds by exact rank selection which part of every member's sorted shard belongs in
// each member's output range; the host reads that table (the one synchronization: so this sort
// cannot be captured into a graph, and refuses to be); each member then merges its parts with
// cub::DeviceMerge, pairwise in log2(members) rounds, into its shard of `keys`; the first round
// reads its parts where they lie (peer reads), so every element crosses between GPUs at most once.
//
// Needs peer access between every pair of members (enabled here; emulated groups have it), and
// at most 64 members. Memory: besides the buffers, member k needs count(k) * (sizeof(key) +
// sizeof(value)) bytes (twice that in groups of more than 2 members, whose merges take several
// rounds) plus CUB's temporary storage for a sort and a merge of count(k) elements (small for the
// radix sort, which uses the shard as its second buffer; about count(k) * (sizeof(key) +
// sizeof(value)) for the comparator's merge sort), and member 0 8 * members^2 bytes more:
// checked before anything is enqueued, a member that cannot get it is named with the bytes in a
// std::invalid_argument. So a radix sort over 2 members holds about twice its keys (and values)
// at the peak. If the sort throws after it started enqueuing, the shards' contents are
// unspecified.
#pragma once

#include "../distributed/distributed_buffer.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../execution/detail/peer_paths.cuh"
#include "../execution/device_group.cuh"
#include "../execution/graph.cuh"
#include "../execution/launch.cuh"
#include "detail/scratch.cuh"
#include "detail/sort.cuh"

#include <cub/device/device_merge.cuh>
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort {

struct descending_t {};
inline constexpr descending_t descending{};

namespace detail {

struct no_values {};

template <class K, class V>
struct sort_arrays {
  K* keys = nullptr;
  V* values = nullptr;
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
  int device = 0; // where keys and values are
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

template <class T>
void copy_elements(T* to, int to_device, const T* from, int from_device, std::size_t count,
                   stream_ref stream, std::string_view what) {
  if (count == 0) return;
  check_cuda(cudaMemcpyPeerAsync(to, to_device, from, from_device, count * sizeof(T),
                                 stream.native_handle()),
             what, stream.device().get());
}

template <class K, class V, class Less>
void sort_over_members(const device_group& group, distributed_buffer<K>& keys,
                       distributed_buffer<V>* values, Less less, std::string_view function) {
  constexpr bool with_values = !std::is_same_v<V, no_values>;
  const std::string name(function);
  const std::size_t p = group.size();
  require_buffer_of_group(keys, group, function, "keys");
  if constexpr (with_values) {
    require_buffer_of_group(*values, group, function, "values");
    require_argument(values->split().counts() == keys.split().counts(), function, "values",
                     "is split differently from the keys; make it with keys.split().");
  }
  require_argument(p <= max_sort_members, function, "group",
                   "has " + std::to_string(p) + " members; the sort takes at most " +
                       std::to_string(max_sort_members) + ".");
  refuse_capture(group, function, "the sort reads a split table on the host",
                 "Run it outside the capture.");
  refuse_recorded_error(function, group.device(0).get());
  if (p > 1) {
    require_peer_paths(group, function,
                       "the sort reads every member's sorted shard from member 0. Use GPUs with "
                       "a peer path.");
    (void)group.enable_peer_access(); // true: every pair has a path
  }
  const partition& split = keys.split();
  auto count = [&](std::size_t k) { return split.count(k); };
  auto shard_keys = [&](std::size_t k) { return keys.shard(k).data.data(); };
  auto shard_values = [&](std::size_t k) -> V* {
    if constexpr (with_values)
      return values->shard(k).data.data();
    else
      return nullptr;
  };
  constexpr std::size_t value_bytes = with_values ? sizeof(V) : 0;

  // Scratch: sorted shard (keys, values); with more than two parts to merge, a second copy for
  // the rounds between; CUB's storage.
  const std::size_t copies = p > 2 ? 2 : 1;
  std::vector<std::size_t> temp_bytes(p, 1), need(p);
  for (std::size_t k = 0; k < p; ++k) {
    scoped_device on(group.device(k));
    const cudaStream_t stream = group.stream(k).native_handle();
    const std::size_t c = count(k);
    if (c > 0) {
      std::size_t bytes = 0;
      bool unused = false;
      check_cuda(sort_shard<K, V>(nullptr, bytes, {}, {}, c, less, stream, unused),
                 "cub sort (size query, " + name + ")", group.device(k).get());
      temp_bytes[k] = std::max(temp_bytes[k], bytes);
      bytes = 0;
      const std::int64_t half = std::int64_t(c - c / 2);
      check_cuda(merge_runs<K, V>(nullptr, bytes, {nullptr, nullptr, 0, half},
                                  {nullptr, nullptr, half, std::int64_t(c / 2)}, {}, less, stream),
                 "cub::DeviceMerge (size query, " + name + ")", group.device(k).get());
      temp_bytes[k] = std::max(temp_bytes[k], bytes);
    }
    need[k] = copies * (align_up(c * sizeof(K)) + align_up(c * value_bytes)) +
              align_up(temp_bytes[k]) + (k == 0 ? align_up(p * p * sizeof(std::size_t)) : 0);
  }
  require_scratch_fits(group, need, function, "keys");

  std::vector<scratch> memory;
  memory.reserve(p);
  std::vector<sort_arrays<K, V>> sorted(p), received(p);
  std::vector<void*> temp(p);
  std::vector<event> done_sorting, done_pulling;
  done_sorting.reserve(p);
  done_pulling.reserve(p);
  std::size_t* table = nullptr;
  for (std::size_t k = 0; k < p; ++k) {
    memory.emplace_back(need[k], group.stream(k));
    const std::size_t c = count(k);
    sorted[k].keys = memory[k].take<K>(c);
    if constexpr (with_values) sorted[k].values = memory[k].take<V>(c);
    if (copies == 2) {
      received[k].keys = memory[k].take<K>(c);
      if constexpr (with_values) received[k].values = memory[k].take<V>(c);
    }
    if (k == 0) table = memory[k].take<std::size_t>(p * p);
    temp[k] = memory[k].rest();
    done_sorting.emplace_back(group.device(k));
    done_pulling.emplace_back(group.device(k));
  }
  // Whatever happens below, no member's scratch is freed (on its own stream, when `memory` goes)
  // before member 0's split kernel and every member's pulls stopped reading it.
  event root_done(group.device(0));
  struct wait_for_readers {
    const device_group& group;
    event& root_done;
    std::vector<event>& pulled;
    std::size_t recorded = 0;
    ~wait_for_readers() {
      ignore_cuda_error(
          cudaEventRecord(root_done.native_handle(), group.stream(0).native_handle()));
      // A member whose merging threw may have enqueued some of its peer reads: its stream's end
      // stands for them.
      for (; recorded < group.size(); ++recorded)
        ignore_cuda_error(cudaEventRecord(pulled[recorded].native_handle(),
                                          group.stream(recorded).native_handle()));
      for (std::size_t k = 0; k < group.size(); ++k) {
        const cudaStream_t stream = group.stream(k).native_handle();
        ignore_cuda_error(cudaStreamWaitEvent(stream, root_done.native_handle(), 0));
        for (std::size_t j = 0; j < recorded; ++j)
          ignore_cuda_error(cudaStreamWaitEvent(stream, pulled[j].native_handle(), 0));
      }
    }
  } guard{group, root_done, done_pulling};

  // 1. Each member sorts its shard into scratch.
  for (std::size_t k = 0; k < p; ++k) {
    const stream_ref stream = group.stream(k);
    const int device = group.device(k).get();
    scoped_device on(group.device(k));
    const std::size_t c = count(k);
    if (c > 0) {
      const sort_arrays<K, V> in{shard_keys(k), shard_values(k)};
      // The shard into scratch: before the comparator's in-place sort, and after a radix sort
      // that ended in the shard (an even number of passes, 4 for 32-bit keys), since the merges
      // below write the shards while reading every member's sorted keys from scratch.
      auto shard_to_scratch = [&] {
        copy_elements(sorted[k].keys, device, in.keys, device, c, stream,
                      "cudaMemcpyPeerAsync (" + name + " keys)");
        if constexpr (with_values)
          copy_elements(sorted[k].values, device, in.values, device, c, stream,
                        "cudaMemcpyPeerAsync (" + name + " values)");
      };
      if constexpr (!is_radix_less_v<Less>) shard_to_scratch();
      bool in_holds_result = false;
      check_cuda(sort_shard<K, V>(temp[k], temp_bytes[k], in, sorted[k], c, less,
                                  stream.native_handle(), in_holds_result),
                 "cub sort (" + name + ")", device);
      if (in_holds_result) shard_to_scratch();
    }
    done_sorting[k].record(stream);
  }

  // 2. Member 0 finds the splits; the host reads them.
  std::vector<std::size_t> splits((p + 1) * p, 0); // splits[j * p + k]: start of part j in k
  for (std::size_t k = 0; k < p; ++k)
    splits[p * p + k] = count(k);
  if (p > 1) {
    const stream_ref root = group.stream(0);
    sorted_runs<K> runs{};
    runs.members = p;
    for (std::size_t k = 0; k < p; ++k) {
      runs.keys[k] = sorted[k].keys;
      runs.count[k] = count(k);
      runs.boundary[k] = split.offset(k);
      root.wait(done_sorting[k]);
    }
    const std::size_t threads = (p - 1) * p;
    launch(root, {.grid = unsigned((threads + 255) / 256), .block = 256}, find_splits<K, Less>,
           runs, less, table);
    // Into pageable memory: the host waits for the table anyway, and cudaMallocHost and
    // cudaFreeHost would add waits of their own (cudaFreeHost synchronizes the device).
    std::vector<std::size_t> host(threads);
    check_cuda(cudaMemcpyAsync(host.data(), table, threads * sizeof(std::size_t),
                               cudaMemcpyDeviceToHost, root.native_handle()),
               "cudaMemcpyAsync (" + name + " splits)", group.device(0).get());
    check_cuda(cudaStreamSynchronize(root.native_handle()),
               "cudaStreamSynchronize (" + name + " splits)", group.device(0).get());
    std::copy_n(host.begin(), threads, splits.begin() + p);
    // A comparator that is no strict weak order can give splits that do not add up.
    for (std::size_t j = 1; j < p; ++j) {
      std::size_t sum = 0;
      for (std::size_t k = 0; k < p; ++k) {
        sum += splits[j * p + k];
        if (splits[j * p + k] > splits[(j + 1) * p + k]) sum = split.size() + 1;
      }
      if (sum != split.offset(j))
        throw std::runtime_error("cohort::" + name +
                                 ": the splits between members do not add up; is the comparator "
                                 "a strict weak order? (member 0, device " +
                                 std::to_string(group.device(0).get()) + ")");
    }
  }

  // 3. Each member merges its parts pairwise into its shard, in log2(parts) rounds: the first
  // round reads the parts where they are (peer reads), later rounds the previous round's output.
  for (std::size_t j = 0; j < p; ++j) {
    const stream_ref stream = group.stream(j);
    const int device = group.device(j).get();
    scoped_device on(group.device(j));
    std::vector<sorted_run<K, V>> runs; // the non-empty parts, in member order
    std::int64_t at = 0;
    for (std::size_t k = 0; k < p; ++k) {
      const std::size_t first = splits[j * p + k], n = splits[(j + 1) * p + k] - first;
      if (n == 0) continue;
      stream.wait(done_sorting[k]);
      runs.push_back({sorted[k].keys + first, with_values ? sorted[k].values + first : nullptr, at,
                      std::int64_t(n), group.device(k).get()});
      at += std::int64_t(n);
    }
    std::size_t rounds = 0;
    while ((std::size_t(1) << rounds) < runs.size())
      ++rounds;
    const sort_arrays<K, V> output{shard_keys(j), shard_values(j)};
    auto copy_run = [&](const sorted_run<K, V>& r, sort_arrays<K, V> to) {
      copy_elements(to.keys + r.start, device, r.keys, r.device, std::size_t(r.length), stream,
                    "cudaMemcpyPeerAsync (" + name + " keys)");
      if constexpr (with_values)
        copy_elements(to.values + r.start, device, r.values, r.device, std::size_t(r.length),
                      stream, "cudaMemcpyPeerAsync (" + name + " values)");
    };
    if (runs.size() == 1) copy_run(runs[0], output);
    for (std::size_t round = 0; round < rounds; ++round) {
      // The last round writes the output; the ones before alternate so that it does.
      const sort_arrays<K, V> to = (rounds - 1 - round) % 2 == 0 ? output : received[j];
      std::vector<sorted_run<K, V>> merged;
      for (std::size_t r = 0; r < runs.size(); r += 2) {
        const sorted_run<K, V>& a = runs[r];
        const sort_arrays<K, V> out{to.keys + a.start, with_values ? to.values + a.start : nullptr};
        if (r + 1 < runs.size()) {
          std::size_t bytes = 0;
          check_cuda(merge_runs(nullptr, bytes, a, runs[r + 1], out, less, stream.native_handle()),
                     "cub::DeviceMerge (size query, " + name + ")", device);
          if (bytes > temp_bytes[j])
            throw cuda_error(cudaErrorMemoryAllocation, "cub::DeviceMerge (" + name + ")", device,
                             std::source_location::current(),
                             "the merge asked for " + std::to_string(bytes) +
                                 " bytes of temporary storage, more than the " +
                                 std::to_string(temp_bytes[j]) + " reserved; please report.");
          check_cuda(merge_runs(temp[j], bytes, a, runs[r + 1], out, less, stream.native_handle()),
                     "cub::DeviceMerge (" + name + ")", device);
          merged.push_back({out.keys, out.values, a.start, a.length + runs[r + 1].length, device});
        } else {
          copy_run(a, to);
          merged.push_back({out.keys, out.values, a.start, a.length, device});
        }
      }
      runs = std::move(merged);
    }
    done_pulling[j].record(stream); // the last read of another member's scratch is before this
    guard.recorded = j + 1;
  }
}

template <class K>
void require_radix_key() {
  static_assert(radix_sortable_v<K>,
                "cohort::multi_device_sort without a comparator sorts the key types CUB's radix "
                "sort takes (integers, float, double, __half, __nv_bfloat16); pass a comparator "
                "for other types.");
}

} // namespace detail

// Sorts `keys` ascending in CUB's radix order, over the group; shard sizes are kept.
template <class K>
void multi_device_sort(const device_group& group, distributed_buffer<K>& keys) {
  detail::require_radix_key<K>();
  detail::sort_over_members<K, detail::no_values>(
      group, keys, nullptr, detail::radix_less<K, false>{}, "multi_device_sort");
}

// Sorts `keys` descending (CUB's radix order reversed).
template <class K>
void multi_device_sort(const device_group& group, distributed_buffer<K>& keys, descending_t) {
  detail::require_radix_key<K>();
  detail::sort_over_members<K, detail::no_values>(
      group, keys, nullptr, detail::radix_less<K, true>{}, "multi_device_sort");
}

// Sorts `keys` by `less`, a strict weak order callable on the device (stable).
template <class K, class Less>
void multi_device_sort(const device_group& group, distributed_buffer<K>& keys, Less less) {
  detail::sort_over_members<K, detail::no_values>(group, keys, nullptr, less, "multi_device_sort");
}

// Sorts `keys` ascending and moves `values` (same partition) with them; stable.
template <class K, class V>
void multi_device_sort_by_key(const device_group& group, distributed_buffer<K>& keys,
                              distributed_buffer<V>& values) {
  detail::require_radix_key<K>();
  detail::sort_over_members<K, V>(group, keys, &values, detail::radix_less<K, false>{},
                                  "multi_device_sort_by_key");
}

template <class K, class V>
void multi_device_sort_by_key(const device_group& group, distributed_buffer<K>& keys,
                              distributed_buffer<V>& values, descending_t) {
  detail::require_radix_key<K>();
  detail::sort_over_members<K, V>(group, keys, &values, detail::radix_less<K, true>{},
                                  "multi_device_sort_by_key");
}

template <class K, class V, class Less>
void multi_device_sort_by_key(const device_group& group, distributed_buffer<K>& keys,
                              distributed_buffer<V>& values, Less less) {
  detail::sort_over_members<K, V>(group, keys, &values, less, "multi_device_sort_by_key");
}

} // namespace cohort
