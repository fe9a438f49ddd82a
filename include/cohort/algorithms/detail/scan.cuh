// cohort/algorithms/detail/scan.cuh — the multi-device scan's member loop: each member's total,
// the carry handed down the ranks, and each member's CUB scan seeded with it (scan.cuh says how
// and why; the entry points there check the arguments first). A group of one runs its CUB scan
// alone (scan_one.cuh). Outside a capture, each member's scratch and events are the ones it keeps
// between calls (execution/detail/member_cache.cuh).
#pragma once

#include "../../communication/operators.cuh"
#include "../../detail/nvtx.cuh"
#include "../../detail/one_capture.cuh"
#include "../../detail/peer_copy.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "../../execution/launch.cuh"
#include "../../streams/event.cuh"
#include "cub_scan.cuh"
#include "scan_kernels.cuh"
#include "scan_one.cuh"
#include "scratch.cuh"

#include <algorithm>
#include <cstddef>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort::detail {

// The events of a scan over several members, among each member's own (member_cache::event): its
// scratch taken (the carry from the member before lands after it), and its carry handed on.
inline constexpr std::size_t scan_allocated_event = 0;
inline constexpr std::size_t scan_handed_event = 1;

// What a member remembers CUB's storage by, besides the types: the pass that keeps the last value
// only, and the inclusive scan of a shard with no carry (member 0's).
struct scan_last_pass {};
struct scan_without_carry {};

// Scans, on member k, `input_of(k)` (an iterator over split.count(k) values of T) into out's shard
// k, where `out` is a writable distributed range of T over `group` (checked by the caller);
// `init` is the exclusive scan's first value (unused, and may be null, for the inclusive one).
template <bool Exclusive, class T, class InputOf, class Out, class Op>
void scan_over_members(const device_group& group, InputOf input_of, Out& out, const T* init,
                       Op given_op, std::string_view function) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "cohort scans need a trivially copyable, default-constructible type (CUB's scan "
                "makes values of it).");
  refuse_average<Op>();
  const nvtx_range range(function, "%zu items, %zu members", out.size(), group.size());
  const auto op = scan_operator<T>(given_op);
  using ScanOp = std::remove_const_t<decltype(op)>;
  // Member k waits for member k-1's carry: all in one capture, or none.
  const bool capturing = require_one_capture(
      group.size(), [&](std::size_t k) { return group.stream(k); }, function);
  refuse_recorded_error(function, group.device(0).get());
  const std::size_t members = group.size();
  if (members == 1) {
    scan_one_member<Exclusive>(group, input_of(0), out.shard(0).data.data(), out.split().count(0),
                               init, op, capturing, function);
    return;
  }
  if (capturing)
    for (std::size_t k = 0; k + 1 < members; ++k)
      if (!pool_reaches(group.device(k), group.device(k + 1)))
        require_capturable_copy(group.device(k), group.device(k + 1), function,
                                "member " + std::to_string(k) + "'s copy of its carry to member " +
                                    std::to_string(k + 1));
  const partition& split = out.split();
  std::vector<bool> has_carry(members);
  bool before = Exclusive; // init counts as an element before shard 0
  for (std::size_t k = 0; k < members; ++k) {
    has_carry[k] = before;
    before = before || split.count(k) > 0;
  }

  // The CUB calls, for the size queries (temp == nullptr) and for the run.
  auto last_pass = [&](std::size_t k, void* temp, std::size_t& bytes, T* total) {
    const std::ptrdiff_t c = static_cast<std::ptrdiff_t>(split.count(k));
    return cub_scan(temp, bytes, input_of(k),
                    thrust::make_tabulate_output_iterator(keep_last<T>{total, c - 1}), op,
                    cub::NullType{}, split.count(k), group.stream(k).native_handle(),
                    group.device(k).get());
  };
  auto scan_pass = [&](std::size_t k, void* temp, std::size_t& bytes, T* carry) {
    T* target = out.shard(k).data.data();
    const cudaStream_t stream = group.stream(k).native_handle();
    const int device = group.device(k).get();
    if constexpr (Exclusive) {
      return cub_scan(temp, bytes, input_of(k), target, op, cub::FutureValue<T>(carry),
                      split.count(k), stream, device);
    } else {
      if (!has_carry[k])
        return cub_scan(temp, bytes, input_of(k), target, op, cub::NullType{}, split.count(k),
                        stream, device);
      using In = decltype(input_of(k));
      const apply_last_element<T, In, ScanOp> apply{input_of(k), target, op};
      return cub_scan(temp, bytes, input_of(k), thrust::make_tabulate_output_iterator(apply), op,
                      cub::FutureValue<T>(carry), split.count(k), stream, device);
    }
  };
  auto needs_total = [&](std::size_t k) { return split.count(k) > 0 && k + 1 < members; };

  // CUB's size queries, each asked once per member, kind of pass and size.
  using In = decltype(input_of(0));
  const void* const last_key = scan_size_key<In, T, ScanOp, scan_last_pass>();
  const void* const seeded_key = scan_size_key<In, T, ScanOp, std::bool_constant<Exclusive>>();
  const void* const unseeded_key = scan_size_key<In, T, ScanOp, scan_without_carry>();
  std::vector<std::size_t> temp_bytes(members, 1), need(members);
  for (std::size_t k = 0; k < members; ++k) {
    scoped_device on(group.device(k));
    member_cache& cache = group_memory_access::cache(group, k);
    auto asked = [&](auto pass) {
      std::size_t bytes = 0;
      check_cub_scan(pass(k, nullptr, bytes, nullptr), function, true, group.device(k).get());
      return bytes;
    };
    if (needs_total(k))
      temp_bytes[k] = std::max(temp_bytes[k], cache.remembered_bytes(last_key, split.count(k), [&] {
        return asked(last_pass);
      }));
    if (split.count(k) > 0) {
      const bool seeded = Exclusive || has_carry[k];
      temp_bytes[k] = std::max(
          temp_bytes[k], cache.remembered_bytes(seeded ? seeded_key : unseeded_key, split.count(k),
                                                [&] { return asked(scan_pass); }));
    }
    need[k] = 3 * align_up(sizeof(T)) + align_up(temp_bytes[k]);
  }
  // Out of memory is a cuda_error (cudaErrorMemoryAllocation) naming the call, the member's device
  // and the bytes, thrown before anything is enqueued. Captured, the scratch is the graph's to
  // allocate at each launch, from the device's pool (whose copies between devices a graph can
  // hold; memory the group keeps could be freed while the graph still runs); otherwise it is each
  // member's kept scratch, from the group's resource.
  std::vector<scratch> memory; // captured only
  std::vector<unsigned char*> base;
  if (capturing) {
    require_scratch_fits(group, need, function);
    memory.reserve(members);
    for (std::size_t k = 0; k < members; ++k) {
      memory.emplace_back(need[k], group.stream(k), default_memory_resource());
      base.push_back(static_cast<unsigned char*>(memory[k].rest()));
    }
  } else {
    base = kept_scratch(group, need, scratch_source::group_resource, function);
  }
  // The events: each member's kept ones; captured, new ones, so that no wait below (the one on a
  // failure too) names an event last recorded outside the capture.
  std::vector<event> captured;
  captured.reserve(capturing ? 2 * members : 0); // no reallocation: the refs below stay good
  std::vector<event_ref> allocated, handed;
  std::vector<T*> carry(members), next(members), total(members);
  std::vector<void*> temp(members);
  for (std::size_t k = 0; k < members; ++k) {
    scratch_slices slices(base[k]);
    carry[k] = slices.take<T>(1);
    next[k] = slices.take<T>(1);
    total[k] = slices.take<T>(1);
    temp[k] = slices.rest();
    member_cache& cache = group_memory_access::cache(group, k);
    if (capturing) {
      captured.emplace_back(group.device(k));
      captured.emplace_back(group.device(k));
    }
    allocated.push_back(capturing ? captured[2 * k] : cache.event(scan_allocated_event));
    allocated[k].record(group.stream(k)); // the peer copy from member k-1 lands after this
    handed.push_back(capturing ? captured[2 * k + 1] : cache.event(scan_handed_event));
  }
  // Member k's carry slot is written by member k-1's copy: should anything below throw, every
  // member's stream waits for its predecessor's hand-off before its scratch is freed (an event
  // never recorded is complete at once).
  struct wait_for_hand_offs {
    const device_group& group;
    const std::vector<event_ref>& handed;
    bool finished = false;
    ~wait_for_hand_offs() {
      if (finished) return;
      for (std::size_t k = 1; k < group.size() && k - 1 < handed.size(); ++k)
        on_device_quietly(group.device(k), [&] {
          ignore_cuda_error(cudaStreamWaitEvent(group.stream(k).native_handle(),
                                                handed[k - 1].native_handle(), 0));
        });
    }
  } guard{group, handed};
  if constexpr (Exclusive) launch(group.stream(0), {}, store_value<T>, carry[0], *init);

  for (std::size_t k = 0; k < members; ++k) {
    const stream_ref stream = group.stream(k);
    const int device = group.device(k).get();
    scoped_device on(group.device(k));
    const bool has_total = split.count(k) > 0;
    if (needs_total(k))
      check_cub_scan(last_pass(k, temp[k], temp_bytes[k], total[k]), function, false, device);
    if (k > 0) stream.wait(handed[k - 1]);
    if (k + 1 < members) {
      if (has_carry[k] || has_total) {
        launch(stream, {}, chain_carry<T, ScanOp>, carry[k], static_cast<bool>(has_carry[k]),
               total[k], has_total, next[k], op);
        stream.wait(allocated[k + 1]);
        copy_between_devices(carry[k + 1], group.device(k + 1), next[k], group.device(k), sizeof(T),
                             stream, capturing, function);
      }
      handed[k].record(stream);
    }
    if (has_total)
      check_cub_scan(scan_pass(k, temp[k], temp_bytes[k], carry[k]), function, false, device);
  }
  // Captured, `memory` is freed on each member's stream after its scan; member k+1's slot, written
  // by member k's copy, is freed (or taken by a later call) after member k+1 waited for that copy.
  guard.finished = true;
}

} // namespace cohort::detail
