// cohort/algorithms/detail/reduce_cub.cuh — the reductions a group of one hands to CUB's
// DeviceReduce: those whose result is the in-order fold's, bit for bit, in any order. CUB
// reorders operands (it assumes the operator commutes), so only these qualify: sums of arithmetic
// types (floating-point addition commutes bit for bit, and cohort's order of association was
// never promised), and the minimum and maximum of integers. The minimum and maximum of floating
// types do not: where -0.0 and +0.0 tie, the in-order fold returns the one its operator picks by
// position. Those, and every other operator, keep cohort's in-order kernel.
#pragma once

#include "../../communication/operators.cuh"
#include "../../detail/narrow_floats.cuh"
#include "../../errors/cuda_error.cuh"
#include "reduce_kernels.cuh"

#include <cub/device/device_reduce.cuh>
#include <cuda/functional>
#include <cuda/std/functional>

#include <cstddef>
#include <iterator>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

enum class any_order_reduction { none, sum, min, max };

// Which of CUB's reductions gives op's in-order result over values of T, if any.
template <class T, class Op>
constexpr any_order_reduction any_order_reduction_of() {
  using O = std::remove_cvref_t<Op>;
  if constexpr (!std::is_arithmetic_v<T> || sizeof(T) > 8) {
    return any_order_reduction::none;
  } else if constexpr (std::is_same_v<O, cuda::std::plus<>> ||
                       std::is_same_v<O, cuda::std::plus<T>> || std::is_same_v<O, sum_t>) {
    return any_order_reduction::sum;
  } else if constexpr (!std::is_integral_v<T>) {
    return any_order_reduction::none;
  } else if constexpr (std::is_same_v<O, cuda::minimum<>> || std::is_same_v<O, cuda::minimum<T>> ||
                       std::is_same_v<O, min_t>) {
    return any_order_reduction::min;
  } else if constexpr (std::is_same_v<O, cuda::maximum<>> || std::is_same_v<O, cuda::maximum<T>> ||
                       std::is_same_v<O, max_t>) {
    return any_order_reduction::max;
  } else {
    return any_order_reduction::none;
  }
}

// The operator CUB gets, returning T as the user's does on two T: for a sum of a type narrower
// than int, plus<T> (plus<> would accumulate in int, and a bool sum would count, not OR).
template <class T, any_order_reduction Kind>
auto any_order_operator() {
  if constexpr (Kind == any_order_reduction::sum) {
    if constexpr (sizeof(T) >= sizeof(int))
      return cuda::std::plus<>{};
    else
      return cuda::std::plus<T>{};
  } else if constexpr (Kind == any_order_reduction::min) {
    return cuda::minimum<>{};
  } else {
    return cuda::maximum<>{};
  }
}

// transform(x) as a T, the value the in-order kernel folds for x. Declared to return T: CUB reads
// the result type on the host, where nvcc cannot tell an extended __device__ lambda's.
template <class T, class F>
struct as_value {
  F f;
  template <class U>
  __device__ T operator()(const U& x) const {
    return convert<T>(f(x));
  }
};

// CUB's reduction of `count` items of `input` (a size query when temp is null), transformed by
// `transform` (cohort's identity or the user's) and converted to T, with `init`, into `result`.
// A pointer to T with no transform goes to DeviceReduce::Reduce as it is, so that CUB loads it in
// vectors as its own DeviceReduce::Sum does.
template <class T, any_order_reduction Kind, class Input, class Transform>
cudaError_t reduce_in_any_order(void* temp, std::size_t& bytes, Input input, std::size_t count,
                                Transform transform, T init, T* result, cudaStream_t stream) {
  using U = typename std::iterator_traits<Input>::value_type;
  const auto op = any_order_operator<T, Kind>();
  if constexpr (std::is_same_v<Transform, identity> && std::is_same_v<U, T> &&
                std::is_pointer_v<Input>)
    return cub::DeviceReduce::Reduce(temp, bytes, input, result, count, op, init, stream);
  else
    return cub::DeviceReduce::TransformReduce(temp, bytes, input, result, count, op,
                                              as_value<T, Transform>{transform}, init, stream);
}

// A CUB reduction's status; the message is built only when it failed.
inline void check_cub_reduce(cudaError_t status, std::string_view function, bool size_query,
                             int device,
                             std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) [[unlikely]]
    check_cuda(status,
               std::string(size_query ? "cub::DeviceReduce (size query, " : "cub::DeviceReduce (") +
                   std::string(function) + ")",
               device, where);
}

} // namespace cohort::detail
