// cohort/communication/operators.cuh — the reduction operators every collective understands.
//
// cohort::sum, prod, min, max and avg name NCCL's operators on the NCCL path and are ordinary
// device function objects on the peer-to-peer path, which also takes any user operator:
//
//   cohort::all_reduce(nccl, grads, cohort::avg);                       // NCCL
//   cohort::all_reduce(peers, summaries, [] __device__(stats a, stats b) { return merge(a, b); });
//
// This header needs no NCCL.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace cohort {

namespace detail {
// half and bfloat16 go through CUDA's intrinsics, not their operators, which PyTorch extensions
// compile out (__CUDA_NO_HALF_OPERATORS__; __CUDA_NO_BFLOAT16_OPERATORS__ does the same).
template <class A>
inline constexpr bool is_16_bit_float =
    std::is_same_v<A, __half> || std::is_same_v<A, __nv_bfloat16>;
} // namespace detail

struct sum_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hadd(a, b);
    else
      return a + b;
  }
};
struct prod_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hmul(a, b);
    else
      return a * b;
  }
};
struct min_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hlt(b, a) ? b : a;
    else
      return b < a ? b : a;
  }
};
struct max_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hlt(a, b) ? b : a;
    else
      return a < b ? b : a;
  }
};
// The sum divided by the number of ranks. The peer-to-peer engine divides once, after the sum;
// NCCL's ncclAvg, on the NCCL path, scales each input by 1/ranks before summing floating types
// (its premultiplied sum), so there results can differ from the engine's in the last bits where
// the rank count is not a power of two (bfloat16: by up to bfloat16's rounding of 1/ranks).
struct avg_t : sum_t {};

inline constexpr sum_t sum{};
inline constexpr prod_t prod{};
inline constexpr min_t min{};
inline constexpr max_t max{};
inline constexpr avg_t avg{};

namespace detail {
template <class Op>
inline constexpr bool divides_by_ranks = std::is_same_v<std::remove_cvref_t<Op>, avg_t>;
// One of cohort's own operators, which act on each element (each lane of a __half2) alike.
template <class Op>
inline constexpr bool is_cohort_operator = std::is_same_v<std::remove_cvref_t<Op>, sum_t> ||
                                           std::is_same_v<std::remove_cvref_t<Op>, prod_t> ||
                                           std::is_same_v<std::remove_cvref_t<Op>, min_t> ||
                                           std::is_same_v<std::remove_cvref_t<Op>, max_t> ||
                                           std::is_same_v<std::remove_cvref_t<Op>, avg_t>;
} // namespace detail

} // namespace cohort
