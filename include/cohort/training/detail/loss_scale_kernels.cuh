// cohort/training/detail/loss_scale_kernels.cuh — what loss_scaler runs on the GPUs: each
// member's state, the kernel that raises the member's flag where its gradients hold an inf or a
// NaN, and the one that turns the members' vote into the step's verdict and the next scale.
#pragma once

#include "../../detail/narrow_floats.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail::training {

// One per member, in its device's memory. Every member's update computes the same values from
// the same vote, so the members' states stay equal without more communication.
struct loss_scale_state {
  float scale;                // what the next backward multiplies its loss by
  float inverse_scale;        // 1 / the scale of the gradients the last update checked
  int skip;                   // the last update's verdict: some member's gradients overflowed
  int found;                  // this member's flag, then (after the vote) every member's
  unsigned clean;             // clean steps since the scale last changed
  unsigned long long steps;   // updates made
  unsigned long long skipped; // of them, steps skipped
};

// The rules update_scale applies (loss_scale_options, checked).
struct loss_scale_rules {
  float growth, backoff, min_scale, max_scale;
  unsigned growth_interval;
};

// Member 0's state as the host reads it, in pinned memory, behind a sequence number (odd while
// the GPU writes): the host retries a read that overlapped a write, so it never mixes two updates.
struct loss_scale_host_copy {
  unsigned long long sequence;
  unsigned long long steps;
  unsigned long long skipped;
  float scale;
  int last_skipped;
};

// An inf or a NaN: every bit of the exponent set. Read as bits, so that half and bfloat16 need no
// conversion and a double beyond float's range is not taken for an overflow.
template <class T>
struct float_bits;
template <>
struct float_bits<__half> {
  using type = unsigned short;
  static constexpr type exponent = 0x7C00u;
};
template <>
struct float_bits<__nv_bfloat16> {
  using type = unsigned short;
  static constexpr type exponent = 0x7F80u;
};
template <>
struct float_bits<float> {
  using type = unsigned;
  static constexpr type exponent = 0x7F800000u;
};
template <>
struct float_bits<double> {
  using type = unsigned long long;
  static constexpr type exponent = 0x7FF0000000000000ull;
};

template <class T>
inline constexpr bool checkable_float =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, float> ||
    std::is_same_v<T, double>;

template <class U>
__device__ inline bool non_finite_bits(U bits, U exponent) {
  return (bits & exponent) == exponent;
}

// Whether any of data[0, n) is an inf or a NaN, over this thread's share (thread `t` of
// `threads`): 16-byte loads from the first 16-byte boundary on, single elements around them.
template <class T>
__device__ bool any_non_finite(const T* data, std::size_t n, std::size_t t, std::size_t threads) {
  using U = typename float_bits<T>::type;
  constexpr U exponent = float_bits<T>::exponent;
  constexpr std::size_t lanes = 16 / sizeof(U);
  const auto* bits = reinterpret_cast<const U*>(data);
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(data) % 16 / sizeof(U);
  std::size_t head = misaligned == 0 ? 0 : lanes - misaligned;
  if (head > n) head = n;
  const std::size_t vectors = (n - head) / lanes;
  bool found = false;
  for (std::size_t k = t; k < head; k += threads)
    found |= non_finite_bits(bits[k], exponent);
  const auto* wide = reinterpret_cast<const uint4*>(bits + head);
  for (std::size_t k = t; k < vectors; k += threads) {
    const uint4 v = wide[k];
    U lane[lanes];
    std::memcpy(lane, &v, sizeof v);
#pragma unroll
    for (std::size_t j = 0; j < lanes; ++j)
      found |= non_finite_bits(lane[j], exponent);
  }
  for (std::size_t k = head + vectors * lanes + t; k < n; k += threads)
    found |= non_finite_bits(bits[k], exponent);
  return found;
}

// Up to this many spans (one member's shards of the buckets) are checked by one launch.
inline constexpr unsigned spans_per_check = 32;

template <class T>
struct span_batch {
  const T* data[spans_per_check];
  std::size_t count[spans_per_check];
  unsigned used; // how many of the slots hold a span
};

inline constexpr unsigned check_threads = 256;

// Raises state->found where any element of the batch's spans is an inf or a NaN. A block that
// finds the flag raised already (by an earlier batch of this update) has nothing to add.
template <class T>
__global__ void __launch_bounds__(check_threads)
    flag_non_finite(span_batch<T> batch, loss_scale_state* state) {
  if (__syncthreads_or(*static_cast<volatile int*>(&state->found) != 0)) return;
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  bool found = false;
  for (unsigned s = 0; s < batch.used && !found; ++s)
    found = any_non_finite(batch.data[s], batch.count[s], t, threads);
  if (__syncthreads_or(found) && threadIdx.x == 0) state->found = 1;
}

// After the vote (state->found is every member's): the step's verdict, the next scale, the
// counters; the flag lowered for the next step; member 0's copy for the host where `host` is set.
// (State is loss_scale_state: a template, as every kernel in a header must be, so that
// translation units may share it.)
template <class State>
__global__ void update_scale(State* state, loss_scale_rules rules, loss_scale_host_copy* host) {
  State s = *state;
  const bool overflowed = s.found != 0;
  s.found = 0;
  s.inverse_scale = 1.0f / s.scale;
  s.skip = overflowed ? 1 : 0;
  s.steps += 1;
  if (overflowed) {
    s.skipped += 1;
    s.clean = 0;
    s.scale = fmaxf(s.scale * rules.backoff, rules.min_scale);
  } else if (++s.clean >= rules.growth_interval) {
    s.clean = 0;
    s.scale = fminf(s.scale * rules.growth, rules.max_scale);
  }
  *state = s;
  if (host == nullptr) return;
  volatile loss_scale_host_copy* out = host;
  out->sequence = 2 * s.steps - 1; // odd: a write under way
  __threadfence_system();
  out->steps = s.steps;
  out->skipped = s.skipped;
  out->scale = s.scale;
  out->last_skipped = s.skip;
  __threadfence_system();
  out->sequence = 2 * s.steps;
}

template <class State>
__global__ void initialize_scale(State* state, float scale) {
  *state = State{scale, 1.0f / scale, 0, 0, 0, 0, 0};
}

} // namespace cohort::detail::training
