// cohort/memory/bitwise_copyable.cuh — which element types cohort may move as bytes.
//
// device_buffer, distributed_buffer and the collectives copy elements between host and devices,
// and between GPUs, as bytes, without running constructors. That is right for trivially copyable
// types, and for CUDA's __half2 and __nv_bfloat162, which declare copy constructors (so the
// standard trait says no) that copy nothing but their bytes. Specialize the trait for a type of
// yours that is the same (managed_buffer, the reductions and the sorts still ask for trivially
// copyable types):
//
//   struct my_pair { __half2 v; };   // not trivially copyable because __half2 is not
//   template <> struct cohort::bitwise_copyable<my_pair> : std::true_type {};
//   static_assert(cohort::bitwise_copyable_v<__half2>);
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace cohort {

template <class T>
struct bitwise_copyable : std::bool_constant<std::is_trivially_copyable_v<T> ||
                                             std::is_same_v<std::remove_cv_t<T>, __half2> ||
                                             std::is_same_v<std::remove_cv_t<T>, __nv_bfloat162>> {
};

template <class T>
inline constexpr bool bitwise_copyable_v = bitwise_copyable<std::remove_cv_t<T>>::value;

} // namespace cohort
