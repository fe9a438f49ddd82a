// cohort/algorithms/scan.cuh — prefix scans of one array spread over every GPU of a group.
//
//   cohort::distributed_buffer<float> x(group, n);
//   cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<>{});            // in place
//   cohort::multi_device_inclusive_scan(group, x, y, cuda::std::plus<>{});         // into y
//   cohort::multi_device_exclusive_scan(group, x, 0.0f, cuda::std::plus<>{});      // init first
//   cohort::multi_device_inclusive_scan(group, x, y, cuda::std::plus<>{},
//                                       [] __device__(float v) { return v * v; }); // of x[i]^2
//   cohort::multi_device_exclusive_scan(group, cohort::indices(n), offsets, 0ull,
//                                       cuda::std::plus<>{},
//                                       [] __device__(std::size_t i) { return i % 3; }); // f(i)
//   cohort::multi_device_inclusive_scan(group, y, [] __device__(float a, float b) {
//     return fmaxf(a, b); });                                                      // running max
//
// Any associative operator and trivially copyable, default-constructible type: element i of the
// inclusive scan is op(...op(op(x[0], x[1]), x[2])..., x[i]), of the exclusive one op(init, x[0],
// ..., x[i-1]), the order kept (the operator need not commute). The operator may be a function
// object, a __host__ __device__ lambda or an extended __device__ lambda; such a lambda without a
// trailing return type is taken as returning T (CUB must know the result type in host code, and
// nvcc cannot tell it). T is the output's element type.
//
// The input is a distributed_buffer (const or not) or a distributed_view of the user's memory,
// and the output any writable one split as the input (made with input.split()); they may be the
// same memory only as the same spans (the scan is then in place: any other overlap is refused).
// Or the input is `cohort::indices(n)`: the scan is then of transform(i) for every global index i,
// into an output of n elements, over the output's split (an index range given its own split must
// have the output's; one split by an adaptive_balancer is refused). A transform, where given, is
// applied to each input element (or index) before the scan and its result converted to T; it may
// be called more than once for an element, so it must be a function of its argument alone.
// Without one the input's elements must be T, or numbers converted to T.
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
// A group of one runs its CUB scan alone (cub::DeviceScan's inclusive scan, or its exclusive one
// seeded with init): no total, no carry, so it costs what cub::DeviceScan costs, less the device
// queries CUB makes on every call (detail/cub_scan.cuh).
//
// Memory: besides the output, each member takes three values of T and CUB's temporary storage for
// a scan of its shard (a few bytes per 1,000 elements), checked before anything is enqueued: a
// member that cannot get them is a cohort::cuda_error (cudaErrorMemoryAllocation) naming the call,
// the member's device and the bytes. The group keeps that scratch, and the events, for its next
// calls (device_group::release_scratch gives the scratch back), so a loop of scans allocates and
// creates nothing. Captured, the scratch is the graph's, allocated when it is launched (and not
// checked now), so that nothing the group may free later is in the graph.
#pragma once

#include "../distributed/distributed_view.cuh"
#include "../distributed/indices.cuh"
#include "../execution/device_group.cuh"
#include "detail/scan.cuh"
#include "detail/scan_forms.cuh"

#include <type_traits>
#include <utility>

namespace cohort {

// data[i] = op(data[0], ..., data[i]) for every element of `data` (a buffer or a view), in place.
template <distributed_range Data, class Op>
void multi_device_inclusive_scan(const device_group& group, Data&& data, Op op) {
  detail::require_writable_data<Data>();
  if constexpr (writable_distributed_range<Data>)
    detail::scan_in_place<false>(group, data, nullptr, op, "multi_device_inclusive_scan");
}

// data[i] = op(init, data[0], ..., data[i-1]) (data[0] = init), in place.
template <distributed_range Data, class Op>
void multi_device_exclusive_scan(const device_group& group, Data&& data,
                                 std::type_identity_t<detail::scan_value_t<Data>> init, Op op) {
  detail::require_writable_data<Data>();
  if constexpr (writable_distributed_range<Data>)
    detail::scan_in_place<true>(group, data, &init, op, "multi_device_exclusive_scan");
}

// output[i] = op(t(input[0]), ..., t(input[i])), t the transform (for an index range, t(i)).
template <detail::algorithm_input Input, distributed_range Output, class Op, class Transform>
void multi_device_inclusive_scan(const device_group& group, Input&& input, Output&& output, Op op,
                                 Transform transform) {
  if constexpr (detail::scan_types_fit<Input, Output, Transform>())
    detail::scan_into<false>(group, input, output, nullptr, op, transform,
                             "multi_device_inclusive_scan");
}

// output[i] = op(input[0], ..., input[i]).
template <detail::algorithm_input Input, distributed_range Output, class Op>
void multi_device_inclusive_scan(const device_group& group, Input&& input, Output&& output, Op op) {
  multi_device_inclusive_scan(group, std::forward<Input>(input), std::forward<Output>(output), op,
                              detail::as_is{});
}

// output[i] = op(init, t(input[0]), ..., t(input[i-1])), t the transform (for an index range,
// t(i)).
template <detail::algorithm_input Input, distributed_range Output, class Op, class Transform>
void multi_device_exclusive_scan(const device_group& group, Input&& input, Output&& output,
                                 std::type_identity_t<detail::scan_value_t<Output>> init, Op op,
                                 Transform transform) {
  if constexpr (detail::scan_types_fit<Input, Output, Transform>())
    detail::scan_into<true>(group, input, output, &init, op, transform,
                            "multi_device_exclusive_scan");
}

// output[i] = op(init, input[0], ..., input[i-1]).
template <detail::algorithm_input Input, distributed_range Output, class Op>
void multi_device_exclusive_scan(const device_group& group, Input&& input, Output&& output,
                                 std::type_identity_t<detail::scan_value_t<Output>> init, Op op) {
  multi_device_exclusive_scan(group, std::forward<Input>(input), std::forward<Output>(output), init,
                              op, detail::as_is{});
}

} // namespace cohort
