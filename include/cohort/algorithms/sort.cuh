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
// Order: without a comparator, keys are any type CUB's radix sort takes (bool, char, the signed
// and unsigned integers, float, double, __half, __nv_bfloat16; not wchar_t or charN_t) in CUB's
// order: -0.0 and +0.0 are equal (so they keep their input
// order), NaNs go by their bits (positive NaNs after +inf, negative NaNs before -inf); descending
// is that order reversed. With a comparator, a strict weak order callable on the device. Keys and
// values are trivially copyable and default-constructible. Without a comparator, CUB's radix
// kernels hold values in shared memory, so large values do not compile (ptxas: "uses too much
// shared data"; 128-byte values on sm_90, in plain CUB as well; 120 bytes compiled): sort 32-bit
// indices by key and gather the values with them.
//
// How: each member sorts its shard into scratch (cub::DeviceRadixSort in its DoubleBuffer form,
// passing the keys between the shard and the scratch, or cub::DeviceMergeSort's stable sort for a
// comparator); one kernel on member 0, reading every member's sorted shard over peer access (which
// the sort enables between the members, as device_group::enable_peer_access would), finds
// by exact rank selection which part of every member's sorted shard belongs in each member's
// output range; the host reads that table (the one synchronization: so this sort cannot be
// captured into a graph, and refuses to be); each member then merges its parts with
// cub::DeviceMerge, pairwise in log2(members) rounds, into its shard of `keys`; the first round
// reads its parts where they lie (peer reads), so every element crosses between GPUs at most once.
//
// Memory, on the devices: besides the buffers, member k needs count(k) * (sizeof(key) +
// sizeof(value)) bytes (twice that in groups of more than 2 members, whose merges take several
// rounds) plus CUB's temporary storage for a sort and a merge of count(k) elements (small for the
// radix sort, which uses the shard as its second buffer; about count(k) * (sizeof(key) +
// sizeof(value)) for the comparator's merge sort), and member 0 32 KiB more for the split table.
// So a radix sort over 2 members holds about twice its keys (and values) at the peak.
//
// Staged through host memory: where two members have no peer path, or where that scratch does not
// fit on some member's device, the sorted runs wait in page-locked host memory instead, mapped into
// every device: size() * (sizeof(key) + sizeof(value)) bytes of it, allocated for the call. Each
// member sorts its shard in chunks of a block that fits its share of its device's free memory (at
// least 1 / (64 / members) of the shard: a group has at most 64 runs), copies each sorted chunk out
// to host memory, and then fills its shard one block-sized piece at a time: the piece's part of
// every run copied in, then merged there. Every element crosses PCIe twice; device scratch is one
// block plus CUB's storage. This form waits for the GPUs before it returns (it frees the host
// memory), and so does an exception after it started.
//
// Either way, at most 64 members; everything is checked before any work is enqueued: a member
// whose scratch cannot fit even so, or a host without the memory, is named with the bytes in a
// std::invalid_argument. Scratch that the check found room for but that then cannot be allocated
// (free memory the pool cannot get in one piece, or memory taken meanwhile) is planned again,
// staged and in smaller blocks; when no smaller plan fits, that is the same std::invalid_argument,
// or the allocation's out-of-memory cuda_error. Only the scratch's allocations, freed again, come
// before such an exception. If the sort throws after its work started, the shards' contents are
// unspecified.
#pragma once

#include "../detail/nvtx.cuh"
#include "../distributed/distributed_buffer.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../execution/device_group.cuh"
#include "../execution/graph.cuh"
#include "../execution/launch.cuh"
#include "detail/host_staging.cuh"
#include "detail/scratch.cuh"
#include "detail/sort.cuh"
#include "detail/sort_cub.cuh"
#include "detail/sort_plan.cuh"

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

template <class K, class V, class Less>
void sort_over_members(const device_group& group, distributed_buffer<K>& keys,
                       distributed_buffer<V>* values, Less less, std::string_view function) {
  constexpr bool with_values = !std::is_same_v<V, no_values>;
  constexpr bool radix = is_radix_less_v<Less>;
  static_assert(std::is_trivially_copyable_v<K> && std::is_default_constructible_v<K> &&
                    std::is_trivially_copyable_v<V> && std::is_default_constructible_v<V>,
                "cohort sorts need trivially copyable, default-constructible keys and values "
                "(CUB's sorts and merges make values of them).");
  const std::string name(function);
  const std::size_t p = group.size();
  const nvtx_range range(function, "%zu keys%s, %zu members", keys.size(),
                         with_values ? " with values" : "", p);
  require_buffer_of_group(keys, group, function, "keys");
  if constexpr (with_values) {
    require_buffer_of_group(*values, group, function, "values");
    if constexpr (std::is_same_v<K, V>)
      require_argument(static_cast<const void*>(values) != static_cast<const void*>(&keys),
                       function, "values",
                       "is the keys buffer; give the values a buffer of their own.");
    require_argument(values->split().counts() == keys.split().counts(), function, "values",
                     "is split differently from the keys; make it with keys.split().");
  }
  require_argument(p <= max_sort_members, function, "group",
                   "has " + std::to_string(p) + " members; the sort takes at most " +
                       std::to_string(max_sort_members) + ".");
  refuse_capture(group, function, "the sort reads a split table on the host",
                 "Run it outside the capture.");
  refuse_recorded_error(function, group.device(0).get());
  const partition& split = keys.split();
  // Memory, all of it taken before anything is enqueued. Each member's scratch: on the devices, its
  // sorted shard (and with more than two runs to merge, a second copy for the rounds between);
  // staged, one block (the radix sort's second buffer, then the rounds between); member 0 the
  // split table; CUB's storage. Staged: every run at its global index in host memory.
  std::vector<scratch> memory;
  const sort_plan plan = plan_with_scratch<K, V>(group, split, less, function, memory);
  const bool staged = plan.through_host;
  if (!staged && p > 1) (void)group.enable_peer_access(); // true: every pair has a path
  auto shard = [&](std::size_t k, std::size_t at) {
    sort_arrays<K, V> arrays{keys.shard(k).data.data(), nullptr};
    if constexpr (with_values) arrays.values = values->shard(k).data.data();
    return arrays.at(at);
  };

  host_staging staging(plan.host_bytes, group, function);
  sort_arrays<K, V> host{};
  if (staged) {
    host.keys = reinterpret_cast<K*>(staging.data());
    if constexpr (with_values)
      host.values = reinterpret_cast<V*>(staging.data() + align_up(split.size() * sizeof(K)));
  }
  std::vector<sort_arrays<K, V>> local(p), between(p);
  std::vector<void*> temp(p);
  std::vector<event> done_sorting, done_pulling;
  done_sorting.reserve(p);
  done_pulling.reserve(p);
  std::size_t* table = nullptr;
  for (std::size_t k = 0; k < p; ++k) {
    const std::size_t c = plan.block[k];
    local[k].keys = memory[k].take<K>(c);
    if constexpr (with_values) local[k].values = memory[k].take<V>(c);
    between[k] = local[k];
    if (!staged && p > 2) {
      between[k].keys = memory[k].take<K>(c);
      if constexpr (with_values) between[k].values = memory[k].take<V>(c);
    }
    if (k == 0) table = memory[k].take<std::size_t>(sort_table_bytes / sizeof(std::size_t));
    temp[k] = memory[k].rest();
    done_sorting.emplace_back(group.device(k));
    done_pulling.emplace_back(group.device(k));
  }
  // Where run r's sorted keys (and values) wait for the merges.
  auto run_arrays = [&](std::size_t r) {
    const run_span& run = plan.runs[r];
    return staged ? host.at(run.first) : local[run.member];
  };
  // Whatever happens below, no member's scratch is freed (on its own stream, when `memory` goes)
  // before member 0's split kernel and every member's pulls stopped reading it. (The host staging
  // waits for every stream before it is freed.)
  event root_done(group.device(0));
  struct wait_for_readers {
    const device_group& group;
    event& root_done;
    std::vector<event>& pulled;
    std::size_t recorded = 0;
    // Each member's calls with its device current (a device that cannot be made current lost its
    // context, and its work with it).
    ~wait_for_readers() {
      detail::on_device_quietly(group.device(0), [&] {
        ignore_cuda_error(
            cudaEventRecord(root_done.native_handle(), group.stream(0).native_handle()));
      });
      // A member whose merging threw may have enqueued some of its peer reads: its stream's end
      // stands for them.
      for (; recorded < group.size(); ++recorded)
        detail::on_device_quietly(group.device(recorded), [&] {
          ignore_cuda_error(cudaEventRecord(pulled[recorded].native_handle(),
                                            group.stream(recorded).native_handle()));
        });
      for (std::size_t k = 0; k < group.size(); ++k)
        detail::on_device_quietly(group.device(k), [&] {
          const cudaStream_t stream = group.stream(k).native_handle();
          ignore_cuda_error(cudaStreamWaitEvent(stream, root_done.native_handle(), 0));
          for (std::size_t j = 0; j < recorded; ++j)
            ignore_cuda_error(cudaStreamWaitEvent(stream, pulled[j].native_handle(), 0));
        });
    }
  } guard{group, root_done, done_pulling};
  auto copy_arrays = [&](sort_arrays<K, V> to, const K* from_keys, const V* from_values,
                         std::size_t count, stream_ref stream) {
    copy_elements(to.keys, from_keys, count, stream, "cudaMemcpyAsync (" + name + " keys)");
    if constexpr (with_values)
      copy_elements(to.values, from_values, count, stream, "cudaMemcpyAsync (" + name + " values)");
  };

  // 1. Each member sorts its runs: on the devices, its shard into scratch; staged, each chunk in
  // place (through the block) and then out to host staging.
  for (const run_span& run : plan.runs) {
    const std::size_t k = run.member, c = run.count;
    const stream_ref stream = group.stream(k);
    const int device = group.device(k).get();
    scoped_device on(group.device(k));
    const sort_arrays<K, V> in = shard(k, run.first - split.offset(k));
    // The comparator's merge sort works in place: on the devices in the scratch, filled from the
    // shard first (the merges below write the shards while reading every member's sorted keys);
    // staged in the shard itself. The radix sort passes the keys between the shard and the scratch
    // (an even number of passes, 4 for 32-bit keys, ends in the shard).
    const sort_arrays<K, V> out = radix || !staged ? local[k] : in;
    if (!radix && !staged) copy_arrays(out, in.keys, in.values, c, stream);
    bool in_holds_result = false;
    std::size_t bytes = plan.temp_bytes[k];
    check_cuda(
        sort_shard<K, V>(temp[k], bytes, in, out, c, less, stream.native_handle(), in_holds_result),
        "cub sort (" + name + ")", device);
    const sort_arrays<K, V> result = in_holds_result ? in : out;
    if (staged)
      copy_arrays(run_arrays(std::size_t(&run - plan.runs.data())), result.keys, result.values, c,
                  stream);
    else if (in_holds_result)
      copy_arrays(local[k], in.keys, in.values, c, stream);
  }
  for (std::size_t k = 0; k < p; ++k)
    done_sorting[k].record(group.stream(k));

  // 2. Member 0 finds, for each cut, how many of every run's keys rank below it; the host reads
  // that table. at_cut[c * runs + r]: run r's keys below cuts[c].
  const std::size_t runs = plan.runs.size(), cuts = plan.cuts.size();
  const std::size_t inside = cuts > 2 ? cuts - 2 : 0;
  std::vector<std::size_t> at_cut(cuts * runs, 0);
  for (std::size_t r = 0; r < runs; ++r)
    at_cut[(cuts - 1) * runs + r] = plan.runs[r].count;
  if (runs == 1) {
    for (std::size_t c = 1; c + 1 < cuts; ++c)
      at_cut[c] = plan.cuts[c];
  } else if (runs > 1 && inside > 0) {
    const stream_ref root = group.stream(0);
    sorted_runs<K> search{};
    search.runs = runs;
    for (std::size_t r = 0; r < runs; ++r) {
      search.keys[r] = run_arrays(r).keys;
      search.count[r] = plan.runs[r].count;
    }
    search.ranks = inside;
    std::copy_n(plan.cuts.begin() + 1, inside, search.rank);
    for (std::size_t k = 0; k < p; ++k)
      root.wait(done_sorting[k]);
    const std::size_t threads = inside * runs;
    launch(root, {.grid = unsigned((threads + 255) / 256), .block = 256}, find_splits<K, Less>,
           search, less, table);
    // Into pageable memory: the host waits for the table anyway, and cudaMallocHost and
    // cudaFreeHost would add waits of their own (cudaFreeHost synchronizes the device). With member
    // 0's device current: a copy of its stream-ordered (pool) memory fails with another current.
    scoped_device on(group.device(0));
    check_cuda(cudaMemcpyAsync(at_cut.data() + runs, table, threads * sizeof(std::size_t),
                               cudaMemcpyDeviceToHost, root.native_handle()),
               "cudaMemcpyAsync (" + name + " splits)", group.device(0).get());
    check_cuda(cudaStreamSynchronize(root.native_handle()),
               "cudaStreamSynchronize (" + name + " splits)", group.device(0).get());
    // A comparator that is no strict weak order can give splits that do not add up.
    for (std::size_t c = 1; c + 1 < cuts; ++c) {
      std::size_t sum = 0;
      for (std::size_t r = 0; r < runs; ++r) {
        sum += at_cut[c * runs + r];
        if (at_cut[c * runs + r] > at_cut[(c + 1) * runs + r]) sum = split.size() + 1;
      }
      if (sum != plan.cuts[c])
        throw std::runtime_error("cohort::" + name +
                                 ": the splits between members do not add up; is the comparator "
                                 "a strict weak order? (member 0, device " +
                                 std::to_string(group.device(0).get()) + ")");
    }
  }

  // 3. Each member fills its shard piece by piece (on the devices one piece, the whole shard),
  // merging the piece's part of every run pairwise in log2(parts) rounds. On the devices the first
  // round reads the parts where they are (peer reads), so every element crosses between GPUs at
  // most once; staged, the parts are first copied in from host memory.
  for (std::size_t j = 0; j < p; ++j) {
    const stream_ref stream = group.stream(j);
    const int device = group.device(j).get();
    scoped_device on(group.device(j));
    const std::size_t begin = split.offset(j), end = begin + split.count(j);
    for (std::size_t c = 0; c + 1 < cuts; ++c) {
      if (plan.cuts[c] < begin || plan.cuts[c + 1] > end) continue;
      std::vector<sorted_run<K, V>> parts; // the non-empty ones, in run order
      std::int64_t at = 0;
      for (std::size_t r = 0; r < runs; ++r) {
        const std::size_t first = at_cut[c * runs + r], n = at_cut[(c + 1) * runs + r] - first;
        if (n == 0) continue;
        stream.wait(done_sorting[plan.runs[r].member]);
        const sort_arrays<K, V> from = run_arrays(r).at(first);
        parts.push_back({from.keys, from.values, at, std::int64_t(n)});
        at += std::int64_t(n);
      }
      std::size_t rounds = 0;
      while ((std::size_t(1) << rounds) < parts.size())
        ++rounds;
      const sort_arrays<K, V> output = shard(j, plan.cuts[c] - begin);
      auto copy_part = [&](sorted_run<K, V>& part, sort_arrays<K, V> to) {
        const sort_arrays<K, V> place = to.at(std::size_t(part.start));
        copy_arrays(place, part.keys, part.values, std::size_t(part.length), stream);
        part.keys = place.keys;
        part.values = place.values;
      };
      if (parts.size() == 1) copy_part(parts[0], output);
      if (staged && parts.size() > 1)
        for (sorted_run<K, V>& part : parts) // where the first round reads from
          copy_part(part, rounds % 2 == 0 ? output : between[j]);
      for (std::size_t round = 0; round < rounds; ++round) {
        // The last round writes the output; the ones before alternate so that it does.
        const sort_arrays<K, V> to = (rounds - 1 - round) % 2 == 0 ? output : between[j];
        std::vector<sorted_run<K, V>> merged;
        for (std::size_t r = 0; r < parts.size(); r += 2) {
          sorted_run<K, V> a = parts[r];
          const sort_arrays<K, V> out = to.at(std::size_t(a.start));
          if (r + 1 == parts.size()) {
            copy_part(a, to);
            merged.push_back(a);
            continue;
          }
          std::size_t bytes = 0;
          check_cuda(merge_runs(nullptr, bytes, a, parts[r + 1], out, less, stream.native_handle()),
                     "cub::DeviceMerge (size query, " + name + ")", device);
          if (bytes > plan.temp_bytes[j])
            throw cuda_error(cudaErrorMemoryAllocation, "cub::DeviceMerge (" + name + ")", device,
                             std::source_location::current(),
                             "the merge asked for " + std::to_string(bytes) +
                                 " bytes of temporary storage, more than the " +
                                 std::to_string(plan.temp_bytes[j]) + " reserved; please report.");
          check_cuda(merge_runs(temp[j], bytes, a, parts[r + 1], out, less, stream.native_handle()),
                     "cub::DeviceMerge (" + name + ")", device);
          merged.push_back({out.keys, out.values, a.start, a.length + parts[r + 1].length});
        }
        parts = std::move(merged);
      }
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
