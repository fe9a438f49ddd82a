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

#include "../detail/narrow_floats.cuh"

#include <type_traits>

namespace cohort {

namespace detail {
// half and bfloat16 go through CUDA's intrinsics, not their operators, which PyTorch extensions
// compile out (__CUDA_NO_HALF_OPERATORS__, and its bfloat16 twin). fp8 has no arithmetic: it
// goes through float, each result rounded back (to nearest, saturating).
template <class A>
__host__ __device__ float wide(const A& a) {
  return convert<float>(a);
}
} // namespace detail

struct sum_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hadd(a, b);
    else if constexpr (detail::is_8_bit_float<A>)
      return detail::convert<A>(detail::wide(a) + detail::wide(b));
    else
      return a + b;
  }
};
struct prod_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hmul(a, b);
    else if constexpr (detail::is_8_bit_float<A>)
      return detail::convert<A>(detail::wide(a) * detail::wide(b));
    else
      return a * b;
  }
};
// min and max return a or b itself, never a rounded value.
struct min_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hlt(b, a) ? b : a;
    else if constexpr (detail::is_8_bit_float<A>)
      return detail::wide(b) < detail::wide(a) ? b : a;
    else
      return b < a ? b : a;
  }
};
struct max_t {
  template <class A>
  __host__ __device__ A operator()(const A& a, const A& b) const {
    if constexpr (detail::is_16_bit_float<A>)
      return __hlt(a, b) ? b : a;
    else if constexpr (detail::is_8_bit_float<A>)
      return detail::wide(a) < detail::wide(b) ? b : a;
    else
      return a < b ? b : a;
  }
};
// The sum divided by the number of ranks. The peer-to-peer engine divides once, after the sum;
// NCCL's ncclAvg, on the NCCL path, scales each input by 1/ranks before summing floating types
// (its premultiplied sum), so there results can differ from the engine's in the last bits where
// the rank count is not a power of two (bfloat16: by up to bfloat16's rounding of 1/ranks).
// Only the collectives take it: multi_device_reduce and the scans have no ranks to divide by, and
// refuse it when the call is compiled.
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
// Called by the reductions and scans over a group, which have no ranks to divide by.
template <class Op>
constexpr void refuse_average() {
  static_assert(!divides_by_ranks<Op>,
                "cohort::avg is the collectives' mean over ranks: a reduction or scan over a "
                "group has no ranks to divide by. Use cohort::sum and divide by the count.");
}
} // namespace detail

} // namespace cohort
