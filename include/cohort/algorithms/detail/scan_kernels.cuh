// cohort/algorithms/detail/scan_kernels.cuh — the device pieces of the multi-device scans: the
// functors CUB's scans read and write through, and the one-thread kernels that hand each member's
// carry to the next.
#pragma once

#include "../../detail/narrow_floats.cuh"
#include "../../execution/launch.cuh"

#include <cuda/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstddef>

namespace cohort::detail {

// Written through a tabulate_output_iterator by a scan that is run for its last value only: the
// shard's total, which the next members need before their own scan.
template <class T>
struct keep_last {
  T* total;
  std::ptrdiff_t last;
  template <class U>
  __device__ void operator()(std::ptrdiff_t i, const U& value) const {
    if (i == last) *total = convert<T>(value);
  }
};

// An exclusive scan seeded with the carry gives e[i] = carry . x[0] ... x[i-1]; the inclusive
// result is e[i] . x[i]. Reading x[i] just before writing out[i] is safe in place: each element is
// written once, by the thread that reads it here, after CUB has loaded the tile. e[i] comes in
// CUB's accumulator type (the operator's result: float for a float sum of __half) and is applied
// as CUB would, op(accumulator, x[i]), then rounded to T once (rounding e[i] to T first rounded
// every element twice).
template <class T, class In, class Op>
struct apply_last_element {
  In in;
  T* out;
  Op op;
  template <class U>
  __device__ void operator()(std::ptrdiff_t i, const U& exclusive) const {
    out[i] = convert<T>(op(exclusive, convert<T>(in[i])));
  }
};

// Whether nvcc cannot tell Op's result type in host code: an extended __device__ lambda without a
// trailing return type (CUB reads that type on the host, and CCCL's static_assert refuses it).
template <class Op>
constexpr bool result_type_hidden() {
#if defined(__NVCC__) && defined(__CUDACC_EXTENDED_LAMBDA__)
  return __nv_is_extended_device_lambda_closure_type(Op) &&
         !__nv_is_extended_host_device_lambda_closure_type(Op) &&
         !__nv_is_extended_device_lambda_with_preserved_return_type(Op);
#else
  return false;
#endif
}

// The operator as CUB gets it: one whose result type is hidden is taken as returning T; any other
// goes as it is, so that CUB accumulates in its result type.
template <class T, class Op>
auto scan_operator(Op op) {
  if constexpr (result_type_hidden<Op>())
    return cuda::proclaim_return_type<T>(op);
  else
    return op;
}

// transform(x) as a T, for every element x of a shard: the input of the range forms with a
// transform, or of an input whose elements are another type than the output's (then the transform
// is `as_is`). Declared to return T: CUB reads the input's value type on the host, and nvcc cannot
// tell an extended __device__ lambda's result there.
struct as_is {
  template <class U>
  __host__ __device__ const U& operator()(const U& x) const {
    return x;
  }
};

template <class T, class F>
struct transformed {
  F f;
  template <class U>
  __device__ T operator()(const U& x) const {
    return convert<T>(f(x));
  }
};

template <class T, class U, class F>
auto element_input(const U* shard, F f) {
  return thrust::make_transform_iterator(shard, transformed<T, F>{f});
}

// f(offset + i) as a T: the input of the index forms.
template <class T, class F>
struct value_at_index {
  F f;
  std::size_t offset;
  __device__ T operator()(std::size_t i) const { return convert<T>(f(offset + i)); }
};

template <class T, class F>
auto index_input(F f, std::size_t offset) {
  return thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0),
                                         value_at_index<T, F>{f, offset});
}

// next = carry . total, with either missing where the host knows it is (no earlier element, an
// empty shard). The carry goes on the left: the operator need not commute.
template <class T, class Op>
__global__ void chain_carry(const T* carry, bool has_carry, const T* total, bool has_total, T* next,
                            Op op) {
  if (has_carry && has_total)
    *next = convert<T>(op(*carry, *total));
  else
    *next = has_carry ? *carry : *total;
}

template <class T>
__global__ void store_value(T* target, T value) {
  *target = value;
}

} // namespace cohort::detail
