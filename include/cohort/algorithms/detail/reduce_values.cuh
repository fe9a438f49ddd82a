// cohort/algorithms/detail/reduce_values.cuh — what the reduction kernels fold: `maybe<T>`, a
// value or nothing, so that a part with no items can say so without an identity element and
// `init` counts once; the operator over it; the transform that leaves items as they are; and
// the checks a reduction's value type must pass.
#pragma once

#include "../../detail/narrow_floats.cuh"

#include <type_traits>

namespace cohort::detail {

// A value, or nothing: lets each member reduce without `init`, so `init` counts exactly once,
// and lets a partial tile reduce without an identity element. The flag fills the rest of the
// struct, so that a maybe has no padding: padding never written is what compute-sanitizer's
// initcheck reports when a maybe is copied.
template <class T>
struct maybe {
  T value;
  unsigned char flag[alignof(T)]; // all bytes 1 or all 0

  __host__ __device__ bool has() const { return flag[0] != 0; }
  __host__ __device__ static maybe of(T v) { return with(v, 1); }
  __host__ __device__ static maybe none() { return with(T{}, 0); }

 private:
  __host__ __device__ static maybe with(T v, unsigned char f) {
    maybe m;
    m.value = v;
    for (unsigned i = 0; i < alignof(T); ++i)
      m.flag[i] = f;
    return m;
  }
};

// `op` with "nothing" as the identity on both sides: associative whenever `op` is, and the
// left operand always comes first.
template <class T, class Op>
struct combine_maybe {
  Op op;
  __device__ maybe<T> operator()(const maybe<T>& a, const maybe<T>& b) const {
    if (!a.has()) return b;
    if (!b.has()) return a;
    return maybe<T>::of(convert<T>(op(a.value, b.value)));
  }
};

struct identity {
  template <class U>
  __device__ const U& operator()(const U& x) const {
    return x;
  }
};

template <class T>
void require_value_type() {
  static_assert(std::is_trivially_copyable_v<T>,
                "cohort reductions need a trivially copyable value type.");
  static_assert(std::is_default_constructible_v<T>,
                "cohort reductions need a default-constructible value type.");
  static_assert(sizeof(maybe<T>) == sizeof(T) + alignof(T), "a maybe<T> must have no padding");
  // Each block keeps one partial result per warp in static shared memory (48 KiB at most).
  static_assert(sizeof(T) <= 4096,
                "cohort's reductions take values of at most 4 KiB (a block keeps one per warp in "
                "shared memory): reduce a wider value in parts.");
}

} // namespace cohort::detail
