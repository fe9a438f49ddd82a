// cohort/algorithms/detail/sort_plan.cuh — how a multi-device sort runs, decided before anything is
// enqueued: where the sorted runs wait for the merges (in scratch on the GPUs, read over peer
// access, or staged in page-locked host memory), how much each member sorts and merges at once,
// and the memory each member and the host need, checked against what they can give.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/argument_error.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/detail/peer_paths.cuh"
#include "../../execution/device_group.cuh"
#include "../../partitioning/partition.cuh"
#include "host_staging.cuh"
#include "scratch.cuh"
#include "sort_cub.cuh"
#include "sort_kernels.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort::detail {

// What the planner is asked for: nothing in a user's build; tests (COHORT_TEST_HOOKS) can force a
// form and a block size.
struct sort_request {
  bool on_devices_only = false;
  bool through_host = false;
  std::size_t max_block = 0; // 0: as large as the member's memory allows
  bool watched = false;      // a test watches the planned scratch: no other form
};

#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
// For tests, per thread: force a form, and make the staged form work in blocks of at most
// `max_block` elements, so that small inputs take several runs and pieces per member;
// `before_scratch` is called with each plan's scratch per member just before it is allocated (a
// test takes memory there).
enum class sort_staging { automatic, on_devices, through_host };
struct sort_tuning {
  sort_staging staging = sort_staging::automatic;
  std::size_t max_block = 0; // 0: as large as the member's memory allows
  std::function<void(const std::vector<std::size_t>& need)> before_scratch;
};
inline thread_local sort_tuning sort_tuning_for_tests{};

inline sort_request requested_sort() {
  const sort_tuning& tuning = sort_tuning_for_tests;
  return {tuning.staging == sort_staging::on_devices, tuning.staging == sort_staging::through_host,
          tuning.max_block, static_cast<bool>(tuning.before_scratch)};
}
inline void before_sort_scratch(const std::vector<std::size_t>& need) {
  if (sort_tuning_for_tests.before_scratch) sort_tuning_for_tests.before_scratch(need);
}
#else
constexpr sort_request requested_sort() {
  return {};
}
inline void before_sort_scratch(const std::vector<std::size_t>&) {}
#endif

// `count` elements of member `member`, from global index `first`, sorted as one run.
struct run_span {
  std::size_t member = 0;
  std::size_t first = 0;
  std::size_t count = 0;
};

struct sort_plan {
  bool through_host = false;
  std::vector<std::size_t> block;      // per member: the most elements it sorts or merges at once
  std::vector<std::size_t> temp_bytes; // per member: CUB's temporary storage
  std::vector<std::size_t> need;       // per member: device scratch, in bytes
  std::size_t host_bytes = 0;          // page-locked host staging for every run
  std::vector<run_span> runs;          // in input order
  std::vector<std::size_t> cuts;       // global ranks where pieces of the output start, 0 and n
};

// The split table on member 0: a row of every run's split for each cut inside the output.
inline constexpr std::size_t sort_table_bytes = (max_sort_runs - 1) * max_sort_runs * 8;

// CUB's temporary storage for member k to sort `count` elements and to merge two runs of as many.
// Asked once per member, kind of sort and count: the member remembers (member_cache).
template <class K, class V, class Less>
std::size_t sort_temp_bytes(const device_group& group, std::size_t k, std::size_t count, Less less,
                            std::string_view function) {
  if (count == 0) return 1;
  static const char key = 0; // one per instantiation
  return group_memory_access::cache(group, k).remembered_bytes(&key, count, [&] {
    std::size_t most = 1;
    scoped_device on(group.device(k)); // CUB sizes its storage for the current device
    const cudaStream_t stream = group.stream(k).native_handle();
    const int device = group.device(k).get();
    std::size_t bytes = 0;
    bool unused = false;
    check_sort_step(sort_shard<K, V>(nullptr, bytes, {}, {}, count, less, stream, unused),
                    "cub sort", function, device, "size query");
    most = std::max(most, bytes);
    bytes = 0;
    const auto half = std::int64_t(count - count / 2);
    check_sort_step(merge_runs<K, V>(nullptr, bytes, {nullptr, nullptr, 0, half},
                                     {nullptr, nullptr, half, std::int64_t(count / 2)}, {}, less,
                                     stream),
                    "cub::DeviceMerge", function, device, "size query");
    return std::max(most, bytes);
  });
}

template <class K, class V>
std::size_t block_bytes(std::size_t count) {
  return align_up(count * sizeof(K)) +
         (std::is_same_v<V, no_values> ? 0 : align_up(count * sizeof(V)));
}

// Each member's shard is one run, sorted into scratch; the merges read the runs over peer access.
// Scratch: the sorted shard, a second copy for the rounds between when there are more than two
// runs to merge, and CUB's storage.
template <class K, class V, class Less>
sort_plan plan_on_devices(const device_group& group, const partition& split, Less less,
                          std::string_view function) {
  const std::size_t p = group.size();
  sort_plan plan;
  plan.block.resize(p), plan.temp_bytes.resize(p), plan.need.resize(p);
  plan.cuts.push_back(0);
  for (std::size_t k = 0; k < p; ++k) {
    const std::size_t c = split.count(k);
    plan.block[k] = c;
    plan.temp_bytes[k] = sort_temp_bytes<K, V>(group, k, c, less, function);
    plan.need[k] = (p > 2 ? 2 : 1) * block_bytes<K, V>(c) + align_up(plan.temp_bytes[k]) +
                   (k == 0 ? align_up(sort_table_bytes) : 0);
    if (c > 0) plan.runs.push_back({k, split.offset(k), c});
    if (split.offset(k) + c > plan.cuts.back()) plan.cuts.push_back(split.offset(k) + c);
  }
  return plan;
}

// Each member sorts its shard in chunks of at most `block` elements, one run each, and copies them
// to host staging; then it fills its output a piece of at most `block` elements at a time, copying
// the piece's part of every run in and merging them there. Scratch: one block (the radix sort's
// second buffer, then the merges' rounds between) and CUB's storage for a block. The block is as
// large as the member's share of its device allows, and at least 1 / (max_sort_runs / members) of
// its shard, so that there are at most max_sort_runs runs.
template <class K, class V, class Less>
sort_plan plan_through_host(const device_group& group, const partition& split, Less less,
                            std::string_view function, std::size_t max_block) {
  const std::size_t p = group.size();
  const std::size_t per_member = max_sort_runs / p;
  sort_plan plan;
  plan.through_host = true;
  plan.block.resize(p), plan.temp_bytes.resize(p), plan.need.resize(p);
  plan.host_bytes = block_bytes<K, V>(split.size());
  plan.cuts.push_back(0);
  for (std::size_t k = 0; k < p; ++k) {
    const std::size_t c = split.count(k);
    const std::size_t table = k == 0 ? align_up(sort_table_bytes) : 0;
    if (c == 0) {
      plan.temp_bytes[k] = 1;
      plan.need[k] = table;
      continue;
    }
    const std::size_t smallest = (c + per_member - 1) / per_member;
    std::size_t block = 0, temp = 0;
    auto try_block = [&](std::size_t b) {
      block = b;
      temp = sort_temp_bytes<K, V>(group, k, b, less, function);
      return block_bytes<K, V>(b) + align_up(temp) + table; // the scratch it needs
    };
    // Asked first: CUB's size queries load its kernels, and the driver may take device memory for
    // them (their stacks) then; the share below is measured after.
    std::size_t need = try_block(c);
    // The member's share of what its device can give, with a tenth left for the pool's rounding.
    std::size_t sharing = 0;
    for (std::size_t j = 0; j < p; ++j)
      sharing += group.device(j) == group.device(k) && split.count(j) > 0 ? 1 : 0;
    const std::size_t share = allocatable_bytes(group.device(k)) / 10 * 9 / sharing;
    while (block > smallest && need > share)
      need = try_block(std::max(smallest, block / 8 * 7));
    if (max_block > 0 && block > std::max(smallest, max_block))
      need = try_block(std::max(smallest, max_block));
    plan.block[k] = block;
    plan.temp_bytes[k] = temp;
    plan.need[k] = need;
    for (std::size_t at = 0; at < c; at += block) {
      plan.runs.push_back({k, split.offset(k) + at, std::min(block, c - at)});
      plan.cuts.push_back(split.offset(k) + std::min(c, at + block));
    }
  }
  return plan;
}

// The form: on the devices when every pair of members has a peer path and the scratch fits, else
// through host memory; either way checked: scratch that does not fit even staged, on a device or
// on the host, is a cuda_error with cudaErrorMemoryAllocation naming the device and the bytes.
// `failed`: a plan whose scratch then could not be allocated (memory went between the check and
// the allocation); the new plan is staged, in blocks of at most half of the failed plan's largest
// when that was staged too.
template <class K, class V, class Less>
sort_plan plan_sort(const device_group& group, const partition& split, Less less,
                    std::string_view function, const sort_plan* failed = nullptr) {
  const sort_request request = requested_sort();
  const std::string no_peer_path = missing_peer_path(group); // empty where every pair has one
  std::optional<scratch_shortfall> on_devices_short;
  if (failed == nullptr && no_peer_path.empty() && !request.through_host) {
    sort_plan plan = plan_on_devices<K, V>(group, split, less, function);
    // What the members keep from earlier sorts needs no room (kept_scratch).
    std::vector<std::size_t> growth = plan.need;
    for (std::size_t k = 0; k < group.size(); ++k)
      if (group_memory_access::cache(group, k).holds(scratch_source::device_pool, plan.need[k]))
        growth[k] = 0;
    on_devices_short = find_scratch_shortfall(group, growth);
    if (!on_devices_short) return plan;
  }
  // Why the runs are not kept on the devices, for the messages below (made only for them).
  auto why_staged = [&]() -> std::string {
    if (on_devices_short) return on_devices_short->text();
    if (failed != nullptr) return "the scratch on the devices could not be allocated";
    return no_peer_path.empty() ? "staged through the host by request" : no_peer_path;
  };
  if (request.on_devices_only) { // tests only
    if (on_devices_short)
      throw_scratch_shortfall(*on_devices_short, function,
                              "free memory, or spread the data over more members.");
    throw_invalid_argument(function, "keys", why_staged() + "; use GPUs with a peer path.");
  }
  std::size_t max_block = request.max_block;
  if (failed != nullptr && failed->through_host) {
    const std::size_t half =
        std::max<std::size_t>(1, *std::max_element(failed->block.begin(), failed->block.end()) / 2);
    max_block = max_block > 0 ? std::min(max_block, half) : half;
  }
  sort_plan plan = plan_through_host<K, V>(group, split, less, function, max_block);
  const std::size_t host = available_host_bytes();
  if (plan.host_bytes > host / 10 * 9) [[unlikely]]
    throw_host_staging_shortfall(function, plan.host_bytes, host, group.device(0).get(),
                                 why_staged());
  require_scratch_fits(group, plan.need, function);
  return plan;
}

// The plan, with each member's scratch taken for it in `memory` (slices of it). On the devices the
// sorted runs, which the other members read, wait in the scratch each member keeps between calls
// from the device's pool, which the group lets its members reach (another resource's memory may
// not be); staged, each member's block is the call's own, from the group's resource (`owned`).
// Free memory is not memory the pool can get in one piece, and memory can go between the check
// and the allocation (another process, the driver), so a plan whose scratch runs out of memory is
// made again, smaller (staged, in smaller blocks), until no smaller one exists: then the
// re-plan's out-of-memory cuda_error, or the allocation's, is thrown. Nothing is enqueued but the
// allocations, freed again on their streams.
template <class K, class V, class Less>
sort_plan plan_with_scratch(const device_group& group, const partition& split, Less less,
                            std::string_view function, std::vector<scratch>& owned,
                            std::vector<scratch_slices>& memory) {
  sort_plan plan = plan_sort<K, V>(group, split, less, function);
  for (;;) {
    owned.clear();
    memory.clear();
    owned.reserve(group.size());
    before_sort_scratch(plan.need);
    try {
      if (plan.through_host) {
        for (std::size_t k = 0; k < group.size(); ++k) {
          // What an earlier sort on the devices kept goes back: this form does not use it.
          group_memory_access::cache(group, k).release(scratch_source::device_pool);
          owned.emplace_back(plan.need[k], group.stream(k),
                             group_memory_access::scratch_resource(group, k));
          memory.emplace_back(static_cast<unsigned char*>(owned[k].rest()));
        }
      } else {
        for (unsigned char* base :
             kept_scratch(group, plan.need, scratch_source::device_pool, function))
          memory.emplace_back(base);
      }
      return plan;
    } catch (const cuda_error& error) {
      owned.clear();
      memory.clear();
      for (std::size_t k = 0; k < group.size(); ++k) // what grew for the failed plan
        group_memory_access::cache(group, k).release(scratch_source::device_pool);
      if (error.status() != cudaErrorMemoryAllocation ||
          (!plan.through_host && requested_sort().on_devices_only))
        throw;
      // Members that share a device reuse each other's freed scratch only once the frees ran on
      // their streams (and the re-plan counts it as free): wait for them. Nothing of the sort is
      // queued yet.
      group.synchronize();
      sort_plan smaller = plan_sort<K, V>(group, split, less, function, &plan);
      if (plan.through_host && smaller.block == plan.block) throw;
      plan = std::move(smaller);
    }
  }
}

} // namespace cohort::detail
