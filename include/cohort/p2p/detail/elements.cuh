// cohort/p2p/detail/elements.cuh — how the engine's kernels move and reduce elements: loads
// through L2 (other GPUs write during the kernel, and L1 is not coherent with them), 16-byte
// packs, one walk over a range that maps element i to the same thread on every rank.
#pragma once

#include "../../communication/operators.cuh"
#include "engine.cuh"

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace cohort::detail::p2p {

// Loads one P through L2, in the widest pieces its alignment allows.
template <class P>
__device__ inline P load_shared(const P* p) {
  P out;
  if constexpr (alignof(P) >= 16 && sizeof(P) % 16 == 0) {
    uint4 pieces[sizeof(P) / 16];
    for (std::size_t k = 0; k < sizeof(P) / 16; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const uint4*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else if constexpr (alignof(P) >= 8 && sizeof(P) % 8 == 0) {
    unsigned long long pieces[sizeof(P) / 8];
    for (std::size_t k = 0; k < sizeof(P) / 8; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned long long*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else if constexpr (alignof(P) >= 4 && sizeof(P) % 4 == 0) {
    unsigned int pieces[sizeof(P) / 4];
    for (std::size_t k = 0; k < sizeof(P) / 4; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned int*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else if constexpr (alignof(P) >= 2 && sizeof(P) % 2 == 0) {
    unsigned short pieces[sizeof(P) / 2];
    for (std::size_t k = 0; k < sizeof(P) / 2; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned short*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else {
    unsigned char pieces[sizeof(P)];
    for (std::size_t k = 0; k < sizeof(P); ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned char*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  }
  return out;
}

// V elements moved as one aligned unit (16 bytes where the host found the pointers aligned).
template <class T, int V>
struct alignas(V > 1 ? sizeof(T) * V : alignof(T)) pack {
  T v[V];
};

// Elements per pack for T: 16 bytes' worth where T divides 16, else one.
template <class T>
inline constexpr int wide_pack = (sizeof(T) <= 16 && 16 % sizeof(T) == 0) ? int(16 / sizeof(T)) : 1;

// A contiguous range walked by every thread of the grid in the same order on every rank: pack j
// by thread j mod (grid size), then the leftover elements one per thread.
template <class T, int V, class F, class G>
__device__ inline void walk(std::size_t count, F&& on_pack, G&& on_element) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t thread = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::size_t packs = count / V;
  constexpr int unroll = 4;
  std::size_t j = thread;
  for (; j + (unroll - 1) * stride < packs; j += unroll * stride)
    on_pack.template operator()<unroll>(j, stride);
  for (; j < packs; j += stride)
    on_pack.template operator()<1>(j, stride);
  for (std::size_t e = packs * V + thread; e < count; e += stride)
    on_element(e);
}

// The bytes of a P, with its size and alignment: what the copies move, so that they take any
// trivially copyable type, one without a default constructor too.
template <class P>
struct alignas(alignof(P)) bytes_of {
  unsigned char bytes[sizeof(P)];
};

// Copies `count` elements from `from` (maybe another rank's memory) to `to`.
template <class T, int V>
__device__ inline void copy_range(const T* from, T* to, std::size_t count) {
  using P = bytes_of<pack<T, V>>;
  using E = bytes_of<T>;
  const P* src = reinterpret_cast<const P*>(from);
  P* dst = reinterpret_cast<P*>(to);
  walk<T, V>(
      count,
      [&]<int U>(std::size_t j, std::size_t stride) {
        P held[U];
        for (int u = 0; u < U; ++u)
          held[u] = load_shared(src + j + u * stride);
        for (int u = 0; u < U; ++u)
          dst[j + u * stride] = held[u];
      },
      [&](std::size_t e) {
        reinterpret_cast<E*>(to)[e] = load_shared(reinterpret_cast<const E*>(from) + e);
      });
}

// How a reduction turns elements into accumulators and back.
template <class T, class Acc, class Op, bool Average>
struct reducer {
  Op op;
  int ranks;
  // Checked in device code, where nvcc knows an extended __device__ lambda's parameters (host code
  // takes such a lambda as callable with anything).
  __device__ Acc apply(Acc a, Acc b) const {
    static_assert(
        std::is_invocable_v<const Op&, Acc&, Acc&>,
        "cohort's peer-to-peer reduction calls this operator with two values of its "
        "accumulator type, and cannot: for __half, __nv_bfloat16, their pairs and fp8 "
        "both the type and float are compiled (accumulate_in_float picks at run time), so "
        "give an operator that takes both, e.g. [] __device__(auto a, auto b).");
    return op(a, b);
  }
  __device__ Acc finish(Acc a) const {
    if constexpr (Average && is_16_bit_float<Acc>)
      return __hdiv(a, convert<Acc>(ranks)); // its operator may be compiled out (operators.cuh)
    else if constexpr (Average && is_8_bit_float<Acc>)
      return convert<Acc>(convert<float>(a) / static_cast<float>(ranks)); // fp8 has no division
    else if constexpr (Average)
      return a / convert<Acc>(ranks);
    else
      return a;
  }
  __device__ T out(Acc a) const { return convert<T>(finish(a)); }
};

// Reduces `count` elements at offset `first` of every rank's `from` into `to`, in rank order (so
// every rank that reduces the same elements gets the same bits).
template <class T, class Acc, int V, class R>
__device__ inline void reduce_range(const per_rank<const T>& from, std::size_t first, T* to,
                                    std::size_t count, const R& r) {
  using P = pack<T, V>;
  walk<T, V>(
      count,
      [&]<int U>(std::size_t j, std::size_t stride) {
        Acc acc[U][V];
        for (int u = 0; u < U; ++u) {
          const P p = load_shared(reinterpret_cast<const P*>(from.of[0] + first) + j + u * stride);
          for (int k = 0; k < V; ++k)
            acc[u][k] = convert<Acc>(p.v[k]);
        }
        for (int q = 1; q < r.ranks; ++q)
          for (int u = 0; u < U; ++u) {
            const P p =
                load_shared(reinterpret_cast<const P*>(from.of[q] + first) + j + u * stride);
            for (int k = 0; k < V; ++k)
              acc[u][k] = r.apply(acc[u][k], convert<Acc>(p.v[k]));
          }
        for (int u = 0; u < U; ++u) {
          P result;
          for (int k = 0; k < V; ++k)
            result.v[k] = r.out(acc[u][k]);
          reinterpret_cast<P*>(to)[j + u * stride] = result;
        }
      },
      [&](std::size_t e) {
        Acc acc = convert<Acc>(load_shared(from.of[0] + first + e));
        for (int q = 1; q < r.ranks; ++q)
          acc = r.apply(acc, convert<Acc>(load_shared(from.of[q] + first + e)));
        to[e] = r.out(acc);
      });
}

} // namespace cohort::detail::p2p
