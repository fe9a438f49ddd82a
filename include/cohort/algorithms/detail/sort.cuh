// cohort/algorithms/detail/sort.cuh — the multi-device sort as one sequence of phases: plan (and
// take the scratch); sort each member's runs; find the split table; merge each member's parts
// into its shard. Where the runs wait between the phases (on the devices or staged through host
// memory) is the strategy the plan chose (sort_runs.cuh). A group of one sorts its shard with CUB
// alone (sort_one.cuh).
#pragma once

#include "../../detail/nvtx.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../distributed/distributed_view.cuh"
#include "../../distributed/on_each_shard.cuh"
#include "../../errors/argument_error.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/device_group.cuh"
#include "../../execution/graph.cuh"
#include "../../execution/launch.cuh"
#include "../../partitioning/partition.cuh"
#include "scratch.cuh"
#include "sort_cub.cuh"
#include "sort_kernels.cuh"
#include "sort_one.cuh"
#include "sort_plan.cuh"
#include "sort_runs.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort::detail {

// What is sorted: each member's shard of the keys (and values), their split, the order.
template <class K, class V, class Less>
struct sort_job {
  const device_group& group;
  const partition& split;
  std::vector<sort_arrays<K, V>> shards;
  Less less;
  std::string_view function;

  // Member k's shard from element `at` on.
  sort_arrays<K, V> shard(std::size_t k, std::size_t at) const { return shards[k].at(at); }
};

// 1. Each member sorts its runs: on the devices its shard into scratch; staged, each chunk (through
// the block) and then out to host memory.
template <class K, class V, class Less, class Runs>
void sort_each_run(const sort_job<K, V, Less>& job, const sort_plan& plan, const Runs& runs,
                   sort_events& events) {
  const device_group& group = job.group;
  for (std::size_t r = 0; r < plan.runs.size(); ++r) {
    const run_span& run = plan.runs[r];
    const std::size_t k = run.member, c = run.count;
    const stream_ref stream = group.stream(k);
    scoped_device on(group.device(k));
    const sort_arrays<K, V> in = job.shard(k, run.first - job.split.offset(k));
    const sort_arrays<K, V> out = runs.sort_into(k, in, c, stream);
    bool in_holds_result = false;
    std::size_t bytes = plan.temp_bytes[k];
    check_sort_step(sort_shard<K, V>(runs.member(k).temp, bytes, in, out, c, job.less,
                                     stream.native_handle(), in_holds_result),
                    "cub sort", job.function, group.device(k).get());
    runs.keep(r, in_holds_result ? in : out, in_holds_result, c, stream);
  }
  for (std::size_t k = 0; k < group.size(); ++k)
    events.done_sorting[k].record(group.stream(k));
}

// For each cut of the output and each run, how many of the run's keys rank below the cut.
struct split_table {
  std::size_t runs = 0, cuts = 0;
  std::vector<std::size_t> at_cut; // at_cut[c * runs + r]: run r's keys below cuts[c]

  std::size_t below(std::size_t c, std::size_t r) const { return at_cut[c * runs + r]; }
};

// 2. Member 0 finds, for each cut inside the output, how many of every run's keys rank below it;
// the host reads that table (the sort's one synchronization).
template <class K, class V, class Less, class Runs>
split_table find_split_table(const sort_job<K, V, Less>& job, const sort_plan& plan,
                             const Runs& runs, sort_events& events) {
  const device_group& group = job.group;
  split_table table{plan.runs.size(), plan.cuts.size(), {}};
  const std::size_t n_runs = table.runs, cuts = table.cuts;
  const std::size_t inside = cuts > 2 ? cuts - 2 : 0;
  std::vector<std::size_t>& at_cut = table.at_cut;
  at_cut.assign(cuts * n_runs, 0);
  for (std::size_t r = 0; r < n_runs; ++r)
    at_cut[(cuts - 1) * n_runs + r] = plan.runs[r].count;
  if (n_runs == 1) {
    for (std::size_t c = 1; c + 1 < cuts; ++c)
      at_cut[c] = plan.cuts[c];
  } else if (n_runs > 1 && inside > 0) {
    const stream_ref root = group.stream(0);
    sorted_runs<K> search{};
    search.runs = n_runs;
    for (std::size_t r = 0; r < n_runs; ++r) {
      search.keys[r] = runs.run(r).keys;
      search.count[r] = plan.runs[r].count;
    }
    search.ranks = inside;
    std::copy_n(plan.cuts.begin() + 1, inside, search.rank);
    for (std::size_t k = 0; k < group.size(); ++k)
      root.wait(events.done_sorting[k]);
    const std::size_t threads = inside * n_runs;
    std::size_t* on_device = runs.member(0).table;
    launch(root, {.grid = unsigned((threads + 255) / 256), .block = 256}, find_splits<K, Less>,
           search, job.less, on_device);
    // Into pageable memory: the host waits for the table anyway, and cudaMallocHost and
    // cudaFreeHost would add waits of their own (cudaFreeHost synchronizes the device). With member
    // 0's device current: a copy of its stream-ordered (pool) memory fails with another current.
    scoped_device on(group.device(0));
    const int device = group.device(0).get();
    check_sort_step(cudaMemcpyAsync(at_cut.data() + n_runs, on_device,
                                    threads * sizeof(std::size_t), cudaMemcpyDeviceToHost,
                                    root.native_handle()),
                    "cudaMemcpyAsync", job.function, device, "splits");
    check_sort_step(cudaStreamSynchronize(root.native_handle()), "cudaStreamSynchronize",
                    job.function, device, "splits");
    // A comparator that is no strict weak order can give splits that do not add up.
    for (std::size_t c = 1; c + 1 < cuts; ++c) {
      std::size_t sum = 0;
      for (std::size_t r = 0; r < n_runs; ++r) {
        sum += table.below(c, r);
        if (table.below(c, r) > table.below(c + 1, r)) sum = job.split.size() + 1;
      }
      if (sum != plan.cuts[c]) [[unlikely]]
        throw std::runtime_error("cohort::" + std::string(job.function) +
                                 ": the splits between members do not add up; is the comparator "
                                 "a strict weak order? (member 0, device " +
                                 std::to_string(device) + ")");
    }
  }
  return table;
}

// 3. Each member fills its shard piece by piece (on the devices one piece, the whole shard),
// merging the piece's part of every run pairwise in log2(parts) rounds, the last into the shard.
template <class K, class V, class Less, class Runs>
void merge_into_shards(const sort_job<K, V, Less>& job, const sort_plan& plan, const Runs& runs,
                       const split_table& table, sort_events& events) {
  const device_group& group = job.group;
  for (std::size_t j = 0; j < group.size(); ++j) {
    const stream_ref stream = group.stream(j);
    const int device = group.device(j).get();
    scoped_device on(group.device(j));
    const std::size_t begin = job.split.offset(j), end = begin + job.split.count(j);
    const sort_arrays<K, V> between = runs.member(j).between;
    for (std::size_t c = 0; c + 1 < table.cuts; ++c) {
      if (plan.cuts[c] < begin || plan.cuts[c + 1] > end) continue;
      std::vector<sorted_run<K, V>> parts; // the non-empty ones, in run order
      std::int64_t at = 0;
      for (std::size_t r = 0; r < table.runs; ++r) {
        const std::size_t first = table.below(c, r), n = table.below(c + 1, r) - first;
        if (n == 0) continue;
        stream.wait(events.done_sorting[plan.runs[r].member]);
        const sort_arrays<K, V> from = runs.run(r).at(first);
        parts.push_back({from.keys, from.values, at, std::int64_t(n)});
        at += std::int64_t(n);
      }
      std::size_t rounds = 0;
      while ((std::size_t(1) << rounds) < parts.size())
        ++rounds;
      const sort_arrays<K, V> output = job.shard(j, plan.cuts[c] - begin);
      if (parts.size() == 1) move_part(parts[0], output, stream, job.function);
      runs.gather(parts, rounds % 2 == 0 ? output : between, stream); // where round 0 reads
      for (std::size_t round = 0; round < rounds; ++round) {
        // The last round writes the output; the ones before alternate so that it does.
        const sort_arrays<K, V> to = (rounds - 1 - round) % 2 == 0 ? output : between;
        std::vector<sorted_run<K, V>> merged;
        for (std::size_t r = 0; r < parts.size(); r += 2) {
          sorted_run<K, V> a = parts[r];
          const sort_arrays<K, V> out = to.at(std::size_t(a.start));
          if (r + 1 == parts.size()) {
            move_part(a, to, stream, job.function);
            merged.push_back(a);
            continue;
          }
          std::size_t bytes = 0;
          check_sort_step(
              merge_runs(nullptr, bytes, a, parts[r + 1], out, job.less, stream.native_handle()),
              "cub::DeviceMerge", job.function, device, "size query");
          if (bytes > plan.temp_bytes[j]) [[unlikely]]
            throw cuda_error(cudaErrorMemoryAllocation,
                             "cub::DeviceMerge (" + std::string(job.function) + ")", device,
                             std::source_location::current(),
                             "the merge asked for " + std::to_string(bytes) +
                                 " bytes of temporary storage, more than the " +
                                 std::to_string(plan.temp_bytes[j]) + " reserved; please report.");
          check_sort_step(merge_runs(runs.member(j).temp, bytes, a, parts[r + 1], out, job.less,
                                     stream.native_handle()),
                          "cub::DeviceMerge", job.function, device);
          merged.push_back({out.keys, out.values, a.start, a.length + parts[r + 1].length});
        }
        parts = std::move(merged);
      }
    }
    events.done_merging[j].record(stream); // the last read of another member's scratch
    events.merged = j + 1;
  }
}

// The phases in order, with the runs kept by `runs`.
template <class K, class V, class Less, class Runs>
void sort_in_phases(const sort_job<K, V, Less>& job, const sort_plan& plan, const Runs& runs) {
  sort_events events(job.group);
  sort_each_run(job, plan, runs, events);
  const split_table table = find_split_table(job, plan, runs, events);
  merge_into_shards(job, plan, runs, table, events);
}

// Plans, takes the scratch (nothing is enqueued before), and sorts with the strategy planned.
template <class K, class V, class Less>
void sort_over_members(const sort_job<K, V, Less>& job) {
  constexpr bool radix = is_radix_less_v<Less>;
  std::vector<scratch> owned;
  std::vector<scratch_slices> memory;
  const sort_plan plan =
      plan_with_scratch<K, V>(job.group, job.split, job.less, job.function, owned, memory);
  if (plan.through_host) {
    const runs_through_host<K, V, radix> runs(job.group, plan, memory, job.split.size(),
                                              job.function);
    sort_in_phases(job, plan, runs);
  } else {
    const runs_on_devices<K, V, radix> runs(job.group, plan, memory, job.function);
    sort_in_phases(job, plan, runs);
  }
}

// The element type sorted in a range, or no_values where there are none.
template <class Values>
struct sorted_element {
  using type = range_element_t<Values>;
};
template <>
struct sorted_element<no_values> {
  using type = no_values;
};

// Whether any shard of `a` and any of `b` share memory.
template <class A, class B>
bool share_memory(const A& a, const B& b) {
  auto bytes_of = [](const auto& span) {
    const auto first = reinterpret_cast<std::uintptr_t>(span.data());
    return std::pair<std::uintptr_t, std::uintptr_t>(first, first + span.size_bytes());
  };
  for (std::size_t i = 0; i < a.shards(); ++i) {
    const auto [a_first, a_end] = bytes_of(a.shard(i).data);
    for (std::size_t j = 0; j < b.shards() && a_first != a_end; ++j) {
      const auto [b_first, b_end] = bytes_of(b.shard(j).data);
      if (b_first != b_end && a_first < b_end && b_first < a_end) return true;
    }
  }
  return false;
}

// The entry points' checks, all before anything is enqueued, then the sort of `keys` (and
// `values`, unless they are no_values) by `less`.
template <class Keys, class Values, class Less>
void sort_ranges(const device_group& group, Keys& keys, Values* values, Less less,
                 std::string_view function) {
  using K = typename sorted_element<Keys>::type;
  using V = typename sorted_element<Values>::type;
  constexpr bool with_values = !std::is_same_v<V, no_values>;
  static_assert(std::is_trivially_copyable_v<K> && std::is_default_constructible_v<K> &&
                    std::is_trivially_copyable_v<V> && std::is_default_constructible_v<V>,
                "cohort sorts need trivially copyable, default-constructible keys and values "
                "(CUB's sorts and merges make values of them).");
  const std::size_t p = group.size();
  const nvtx_range range(function, "%zu keys%s, %zu members", keys.size(),
                         with_values ? " with values" : "", p);
  require_buffer_of_group(keys, group, function, "keys");
  if constexpr (with_values) {
    require_buffer_of_group(*values, group, function, "values");
    require_argument(!share_memory(keys, *values), function, "values",
                     "is the keys buffer, or shares memory with it; give the values memory of "
                     "their own.");
    require_argument(values->split().counts() == keys.split().counts(), function, "values",
                     "is split differently from the keys; make it with keys.split().");
  }
  require_argument(p <= max_sort_members, function, "group", [&] {
    return "has " + std::to_string(p) + " members; the sort takes at most " +
           std::to_string(max_sort_members) + ".";
  });
  refuse_capture(group, function, "the sort reads a split table on the host",
                 "Run it outside the capture.");
  refuse_recorded_error(function, group.device(0).get());
  sort_job<K, V, Less> job{group, keys.split(), std::vector<sort_arrays<K, V>>(p), less, function};
  for (std::size_t k = 0; k < p; ++k) {
    job.shards[k].keys = keys.shard(k).data.data();
    if constexpr (with_values) job.shards[k].values = values->shard(k).data.data();
  }
  // A group of one sorts its shard as CUB would, where its scratch fits (sort_one.cuh).
  if (p == 1 && sort_one_member<K, V>(group, job.shards[0], job.split.count(0), less, function))
    return;
  sort_over_members(job);
}

} // namespace cohort::detail
