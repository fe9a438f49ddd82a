// cohort/algorithms/reduce.cuh — reductions over every GPU of a group, in order.
//
// The result is op(init, x[0], x[1], ..., x[n-1]) for any associative operator: commutativity is
// not assumed, and `init` is used once. `input` is a distributed_buffer (const or not) or a
// distributed_view over the user's memory, whose elements are x; or an index range
// (cohort::indices(n), split evenly, by a partition or by an adaptive_balancer), for which
// multi_device_transform_reduce's transform(i) gives x[i] from the global index i. Member k reduces
// its contiguous part in order (each block a contiguous range that its warps step through,
// cub::WarpReduce within a warp, warps and blocks combined in order), then member 0 combines the
// members' results in rank order with `init`. Any trivially copyable, default-constructible value
// type of at most 4 KiB works (at most 256 bytes for the pending form). A group of one reduces
// straight into the result: sums of arithmetic types and the minimum or maximum of integers (whose
// result is the in-order one whatever the order) through cub::DeviceReduce, at its cost; any other
// operator through the in-order kernel, whose last block folds `init` in. The scratch and events
// are the group's, kept between calls: a loop allocates and creates nothing.
//
// Two forms of each reduction. The first returns a `pending<T>`: the value lands in host memory,
// and nothing blocks until `wait()`. It cannot be captured into a CUDA graph (a pending value
// cannot outlive a replay): called on a stream that is being captured it throws
// std::logic_error before enqueuing anything. The second takes a `device_result<T>&` as its last
// argument and leaves the value in device memory on member 0 (`result.data()`), written in member
// 0's stream order; nothing is allocated or created during the call, so it can be captured and
// replayed any number of times. Its T is the result's (`init` converts to it). Captured over
// members on several devices, each member's device must reach member 0's memory pool (a graph
// captures only direct copies): call group.enable_peer_access() before the capture; without it
// the call throws std::logic_error, naming the member, before enqueuing anything. An index range
// split by a balancer cannot be captured (its timings are read on the host).
//
//   auto sum = cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{});
//   auto max = cohort::multi_device_transform_reduce(group, x, -INFINITY,
//                  cuda::maximum<>{}, [] __device__(float v) { return fabsf(v); });
//   auto dot = cohort::multi_device_transform_reduce(group, cohort::indices(n), 0.0,
//                  cuda::std::plus<>{},
//                  [=] __device__(std::size_t i) { return double(a[i]) * b[i]; });
//   float s = sum.wait();
//
//   cohort::device_result<float> total(group);            // made once, outside any capture
//   cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{}, total);
//   float* on_gpu0 = total.data();                         // for work on group.stream(0)
//   float t = total.get();                                 // or copy it yourself
//   cohort::device_result<double> wide(group);             // T is the result's: init converts
//   cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{}, wide);
#pragma once

#include "../distributed/distributed_view.cuh"
#include "../distributed/indices.cuh"
#include "../execution/device_group.cuh"
#include "detail/reduce_pending.cuh"
#include "detail/reduce_plan.cuh"
#include "device_result.cuh"
#include "pending.cuh"

#include <type_traits>

namespace cohort {

namespace detail {
template <class>
inline constexpr bool reduce_of_indices = false;
} // namespace detail

// op(init, every element of `input`, in order).
template <class T, distributed_range Input, detail::not_a_result Op>
pending<T> multi_device_reduce(const device_group& group, const Input& input, T init, Op op) {
  return detail::reduce_pending(group, input, init, op, detail::identity{}, "multi_device_reduce");
}

// The same into `result` (device memory on member 0; capturable).
template <class T, distributed_range Input, class Op>
void multi_device_reduce(const device_group& group, const Input& input,
                         std::type_identity_t<T> init, Op op, device_result<T>& result) {
  detail::device_result_access::enqueue(result, group, input, init, op, detail::identity{},
                                        "multi_device_reduce");
}

// An index range has no elements to reduce: its values come from a transform.
template <class T, class Op>
pending<T> multi_device_reduce(const device_group&, const index_range&, T, Op) {
  static_assert(detail::reduce_of_indices<Op>,
                "cohort::multi_device_reduce over an index range (cohort::indices) has no "
                "elements to reduce: use cohort::multi_device_transform_reduce(group, indices, "
                "init, op, transform), whose transform(i) gives index i's value.");
}
template <class T, class Op>
void multi_device_reduce(const device_group&, const index_range&, std::type_identity_t<T>, Op,
                         device_result<T>&) {
  static_assert(detail::reduce_of_indices<Op>,
                "cohort::multi_device_reduce over an index range (cohort::indices) has no "
                "elements to reduce: use cohort::multi_device_transform_reduce(group, indices, "
                "init, op, transform, result), whose transform(i) gives index i's value.");
}

// op(init, transform(x) for every element x of `input`, in order); for an index range,
// op(init, transform(i) for every global index i, in order).
template <class T, detail::algorithm_input Input, class Op, detail::not_a_result Transform>
pending<T> multi_device_transform_reduce(const device_group& group, const Input& input, T init,
                                         Op op, Transform transform) {
  return detail::reduce_pending(group, input, init, op, transform, "multi_device_transform_reduce");
}

// The same into `result` (device memory on member 0; capturable).
template <class T, detail::algorithm_input Input, class Op, class Transform>
void multi_device_transform_reduce(const device_group& group, const Input& input,
                                   std::type_identity_t<T> init, Op op, Transform transform,
                                   device_result<T>& result) {
  detail::device_result_access::enqueue(result, group, input, init, op, transform,
                                        "multi_device_transform_reduce");
}

} // namespace cohort
