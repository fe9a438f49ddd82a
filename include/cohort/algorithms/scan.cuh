// cohort/algorithms/scan.cuh — prefix scans of one array spread over every GPU of a group.
//
//   cohort::distributed_buffer<float> x(group, n);
//   cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<>{});            // in place
//   cohort::multi_device_inclusive_scan(group, x, y, cuda::std::plus<>{});         // into y
//   cohort::multi_device_exclusive_scan(group, x, 0.0f, cuda::std::plus<>{});      // init first
//   cohort::multi_device_exclusive_scan_n(group, n, [] __device__(std::size_t i) { return 1; },
//                                         offsets, 0ull, cuda::std::plus<>{});     // f(i) values
//   cohort::multi_device_inclusive_scan(group, y, [] __device__(float a, float b) {
//     return fmaxf(a, b); });                                                      // running max
//
// Any associative operator and trivially copyable, default-constructible type: element i of the
// inclusive scan is op(...op(op(x[0], x[1]), x[2])..., x[i]), of the exclusive one op(init, x[0],
// ..., x[i-1]), the order kept (the operator need not commute). The operator may be a function
// object, a __host__ __device__ lambda or an extended __device__ lambda; such a lambda without a
// trailing return type is taken as returning T (CUB must know the result type in host code, and
// nvcc cannot tell it). `y` must have the partition of `x`; the index forms' f(i) values are
// scanned into `out`, over its partition.
//
// How: each member first runs a CUB scan of its shard that keeps only the last value (its total;
// it reads the shard once and writes nothing else). The carry (everything before a shard) then
// goes down the ranks on the GPUs: member k waits for member k-1's event, combines the carry it
// was handed with its own total (carry on the left), and peer-copies the result to member k+1,
// then runs cub::DeviceScan over its shard seeded with the carry (exclusive scan with the carry as
// a cub::FutureValue read on the device; the inclusive form applies x[i] as it writes). An empty
// shard hands on the carry it got. Every step is enqueued on the group's streams: nothing waits
// for the host, nothing copies pageable memory, and the whole scan can be captured into a graph
// (every member's stream in one capture: a scan with some of them outside it throws
// std::logic_error, naming the member, before anything is enqueued). Captured, each member on
// another device than the next must reach that device's memory pool (a graph captures only direct
// copies): call group.enable_peer_access() before the capture; a scan captured without it throws
// std::logic_error, naming the pair, before anything is enqueued. Outside a capture the carry is a
// cudaMemcpyPeerAsync and needs no access.
// Each element is read twice and written once (one GPU's CUB scan reads it once), so on p GPUs
// the scan takes about 3/(2p) of one GPU's time at best: 0.75x the time on 2, i.e. 1.33x faster.
// (The inclusive form on members past the first reads x[i] a third time as it writes out[i], just
// after CUB loaded its tile: mostly from cache, not counted here.)
// Member k's hand-off lands in memory allocated on member k+1's stream, so it (and member k's own
// scan, after it on k's stream) waits until k+1's stream has reached the scan: the scan is
// fastest when the members' streams reach it together. The carry is held in T between members
// (CUB accumulates in the operator's result type within a shard): where the operator returns a
// wider type than T (a float sum of __half), results can differ from one GPU's scan by T's
// rounding of the carry at each shard boundary.
//
// Memory: besides `y`, each member takes three values of T and CUB's temporary storage for a
// scan of its shard (a few bytes per 1,000 elements), checked before anything is enqueued: a
// member that cannot get them is named with the bytes in a std::invalid_argument (not while the
// group's streams are being captured: a graph allocates its scratch when it is launched).
#pragma once

#include "../communication/operators.cuh"
#include "../detail/nvtx.cuh"
#include "../distributed/distributed_buffer.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../detail/one_capture.cuh"
#include "../execution/device_group.cuh"
#include "../execution/launch.cuh"
#include "../detail/peer_copy.cuh"
#include "detail/scan.cuh"
#include "detail/scratch.cuh"

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort {

namespace detail {

// Scans, on member k, `input_of(k)` (an iterator over split.count(k) values) into out's shard k;
// `init` is the exclusive scan's first value (unused, and may be null, for the inclusive one).
// `argument` names `out` in errors.
template <bool Exclusive, class T, class InputOf, class Op>
void scan_over_members(const device_group& group, InputOf input_of, distributed_buffer<T>& out,
                       const T* init, Op given_op, std::string_view function,
                       std::string_view argument) {
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
  if (capturing)
    for (std::size_t k = 0; k + 1 < members; ++k)
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
  const std::string name(function);

  // The CUB calls, for the size queries (temp == nullptr) and for the run.
  auto last_pass = [&](std::size_t k, void* temp, std::size_t& bytes, T* total) {
    const std::ptrdiff_t c = static_cast<std::ptrdiff_t>(split.count(k));
    return cub::DeviceScan::InclusiveScan(
        temp, bytes, input_of(k), thrust::make_tabulate_output_iterator(keep_last<T>{total, c - 1}),
        op, split.count(k), group.stream(k).native_handle());
  };
  auto scan_pass = [&](std::size_t k, void* temp, std::size_t& bytes, T* carry) {
    T* target = out.shard(k).data.data();
    const cudaStream_t stream = group.stream(k).native_handle();
    if constexpr (Exclusive) {
      return cub::DeviceScan::ExclusiveScan(temp, bytes, input_of(k), target, op,
                                            cub::FutureValue<T>(carry), split.count(k), stream);
    } else {
      if (!has_carry[k])
        return cub::DeviceScan::InclusiveScan(temp, bytes, input_of(k), target, op, split.count(k),
                                              stream);
      using In = decltype(input_of(k));
      const apply_last_element<T, In, ScanOp> apply{input_of(k), target, op};
      return cub::DeviceScan::ExclusiveScan(temp, bytes, input_of(k),
                                            thrust::make_tabulate_output_iterator(apply), op,
                                            cub::FutureValue<T>(carry), split.count(k), stream);
    }
  };
  auto needs_total = [&](std::size_t k) { return split.count(k) > 0 && k + 1 < members; };

  std::vector<std::size_t> temp_bytes(members, 1), need(members);
  for (std::size_t k = 0; k < members; ++k) {
    scoped_device on(group.device(k));
    std::size_t bytes = 0;
    if (needs_total(k)) {
      check_cuda(last_pass(k, nullptr, bytes, nullptr),
                 "cub::DeviceScan (size query, " + name + ")", group.device(k).get());
      temp_bytes[k] = std::max(temp_bytes[k], bytes);
    }
    if (split.count(k) > 0) {
      bytes = 0;
      check_cuda(scan_pass(k, nullptr, bytes, nullptr),
                 "cub::DeviceScan (size query, " + name + ")", group.device(k).get());
      temp_bytes[k] = std::max(temp_bytes[k], bytes);
    }
    need[k] = 3 * align_up(sizeof(T)) + align_up(temp_bytes[k]);
  }
  require_scratch_fits(group, need, function, argument);

  std::vector<scratch> memory;
  std::vector<event> allocated, handed;
  memory.reserve(members);
  allocated.reserve(members);
  handed.reserve(members);
  std::vector<T*> carry(members), next(members), total(members);
  std::vector<void*> temp(members);
  for (std::size_t k = 0; k < members; ++k) {
    memory.emplace_back(need[k], group.stream(k));
    carry[k] = memory[k].take<T>(1);
    next[k] = memory[k].take<T>(1);
    total[k] = memory[k].take<T>(1);
    temp[k] = memory[k].rest();
    allocated.emplace_back(group.device(k));
    allocated[k].record(group.stream(k)); // the peer copy from member k-1 lands after this
    handed.emplace_back(group.device(k));
  }
  // Member k's carry slot is written by member k-1's copy: should anything below throw, every
  // member's stream waits for its predecessor's hand-off before its scratch is freed (an event
  // never recorded is complete at once).
  struct wait_for_hand_offs {
    const device_group& group;
    const std::vector<event>& handed;
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
      check_cuda(last_pass(k, temp[k], temp_bytes[k], total[k]), "cub::DeviceScan (" + name + ")",
                 device);
    if (k > 0) stream.wait(handed[k - 1]);
    if (k + 1 < members) {
      if (has_carry[k] || has_total) {
        launch(stream, {}, chain_carry<T, ScanOp>, carry[k], static_cast<bool>(has_carry[k]),
               total[k], has_total, next[k], op);
        stream.wait(allocated[k + 1]);
        copy_between_devices(carry[k + 1], group.device(k + 1), next[k], group.device(k), sizeof(T),
                             stream, capturing, name + " carry");
      }
      handed[k].record(stream);
    }
    if (has_total)
      check_cuda(scan_pass(k, temp[k], temp_bytes[k], carry[k]), "cub::DeviceScan (" + name + ")",
                 device);
  }
  // `memory` is freed on each member's stream after its scan; member k+1's slot, written by
  // member k's copy, is freed after member k+1 waited for that copy.
  guard.finished = true;
}

template <class T, class U>
void require_same_partition(const device_group& group, const distributed_buffer<U>& input,
                            const distributed_buffer<T>& output, std::string_view function) {
  require_buffer_of_group(input, group, function, "input");
  require_buffer_of_group(output, group, function, "output");
  require_argument(input.split().counts() == output.split().counts(), function, "output",
                   "is split differently from the input; make it with input.split().");
}

template <class T>
auto shard_input(const distributed_buffer<T>& buffer) {
  return [&buffer](std::size_t k) -> const T* { return buffer.shard(k).data.data(); };
}

template <class T>
void require_covers(const distributed_buffer<T>& out, std::size_t n, std::string_view function) {
  require_argument(out.size() == n, function, "output",
                   "has " + std::to_string(out.size()) + " elements but n is " + std::to_string(n) +
                       "; it must hold the n values.");
}

} // namespace detail

// x[i] = op(x[0], ..., x[i]) for every element of `data`, in place.
template <class T, class Op>
void multi_device_inclusive_scan(const device_group& group, distributed_buffer<T>& data, Op op) {
  detail::require_buffer_of_group(data, group, "multi_device_inclusive_scan", "data");
  detail::scan_over_members<false>(group, detail::shard_input(data), data,
                                   static_cast<const T*>(nullptr), op,
                                   "multi_device_inclusive_scan", "data");
}

// output[i] = op(input[0], ..., input[i]); `output` has the input's partition.
template <class T, class Op>
void multi_device_inclusive_scan(const device_group& group, const distributed_buffer<T>& input,
                                 distributed_buffer<T>& output, Op op) {
  detail::require_same_partition(group, input, output, "multi_device_inclusive_scan");
  detail::scan_over_members<false>(group, detail::shard_input(input), output,
                                   static_cast<const T*>(nullptr), op,
                                   "multi_device_inclusive_scan", "output");
}

// x[i] = op(init, x[0], ..., x[i-1]) (x[0] = init), in place.
template <class T, class Op>
void multi_device_exclusive_scan(const device_group& group, distributed_buffer<T>& data,
                                 std::type_identity_t<T> init, Op op) {
  detail::require_buffer_of_group(data, group, "multi_device_exclusive_scan", "data");
  detail::scan_over_members<true>(group, detail::shard_input(data), data, &init, op,
                                  "multi_device_exclusive_scan", "data");
}

// output[i] = op(init, input[0], ..., input[i-1]); `output` has the input's partition.
template <class T, class Op>
void multi_device_exclusive_scan(const device_group& group, const distributed_buffer<T>& input,
                                 distributed_buffer<T>& output, std::type_identity_t<T> init,
                                 Op op) {
  detail::require_same_partition(group, input, output, "multi_device_exclusive_scan");
  detail::scan_over_members<true>(group, detail::shard_input(input), output, &init, op,
                                  "multi_device_exclusive_scan", "output");
}

// output[i] = op(f(0), ..., f(i)) for i in [0, n), each member computing its shard of `output`.
template <class F, class T, class Op>
void multi_device_inclusive_scan_n(const device_group& group, std::size_t n, F f,
                                   distributed_buffer<T>& output, Op op) {
  detail::require_buffer_of_group(output, group, "multi_device_inclusive_scan_n", "output");
  detail::require_covers(output, n, "multi_device_inclusive_scan_n");
  detail::scan_over_members<false>(
      group, [&](std::size_t k) { return detail::index_input<T>(f, output.split().offset(k)); },
      output, static_cast<const T*>(nullptr), op, "multi_device_inclusive_scan_n", "output");
}

// output[i] = op(init, f(0), ..., f(i-1)) for i in [0, n).
template <class F, class T, class Op>
void multi_device_exclusive_scan_n(const device_group& group, std::size_t n, F f,
                                   distributed_buffer<T>& output, std::type_identity_t<T> init,
                                   Op op) {
  detail::require_buffer_of_group(output, group, "multi_device_exclusive_scan_n", "output");
  detail::require_covers(output, n, "multi_device_exclusive_scan_n");
  detail::scan_over_members<true>(
      group, [&](std::size_t k) { return detail::index_input<T>(f, output.split().offset(k)); },
      output, &init, op, "multi_device_exclusive_scan_n", "output");
}

} // namespace cohort
