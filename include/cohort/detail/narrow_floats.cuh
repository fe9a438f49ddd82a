// cohort/detail/narrow_floats.cuh — half, bfloat16 and the fp8 types: which they
// are, and conversions between them and other arithmetic types that go through CUDA's intrinsics.
//
// PyTorch extensions compile out these types' operators and implicit conversions
// (__CUDA_NO_HALF_OPERATORS__, __CUDA_NO_HALF_CONVERSIONS__ and their bfloat16 twins), and fp8
// converts only explicitly: `convert<To>(v)` builds under all of those, for every pair of types
// that static_cast converts plus these four.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#if defined(__has_include)
#if __has_include(<cuda_fp8.h>)
#include <cuda_fp8.h>
#define COHORT_HAS_FP8 1
#endif
#endif

#include <type_traits>

namespace cohort::detail {

template <class A>
inline constexpr bool is_16_bit_float =
    std::is_same_v<A, __half> || std::is_same_v<A, __nv_bfloat16>;

#if defined(COHORT_HAS_FP8)
template <class A>
inline constexpr bool is_8_bit_float =
    std::is_same_v<A, __nv_fp8_e4m3> || std::is_same_v<A, __nv_fp8_e5m2>;
#else
template <class A>
inline constexpr bool is_8_bit_float = false;
#endif

// The floating types narrower than float: cohort's operators compute on them through float (or
// their own intrinsics), and the peer-to-peer engine can accumulate them in float.
template <class A>
inline constexpr bool is_narrow_float = is_16_bit_float<A> || is_8_bit_float<A>;

// `v` as a To. The narrow floats go through float; float rounds to nearest (fp8: saturating to
// its largest finite value, as its constructor from float does).
template <class To, class From>
__host__ __device__ inline To convert(const From& v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half>) {
    return convert<To>(__half2float(v));
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(__bfloat162float(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
#if defined(COHORT_HAS_FP8)
  } else if constexpr (is_8_bit_float<From>) {
    constexpr auto kind = std::is_same_v<From, __nv_fp8_e4m3> ? __NV_E4M3 : __NV_E5M2;
    return convert<To>(__half(__nv_cvt_fp8_to_halfraw(v.__x, kind)));
  } else if constexpr (is_8_bit_float<To>) {
    constexpr auto kind = std::is_same_v<To, __nv_fp8_e4m3> ? __NV_E4M3 : __NV_E5M2;
    To out;
    out.__x = __nv_cvt_float_to_fp8(static_cast<float>(v), __NV_SATFINITE, kind);
    return out;
#endif
  } else {
    return static_cast<To>(v);
  }
}

} // namespace cohort::detail
