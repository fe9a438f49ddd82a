// cohort/algorithms/detail/for_each_kernels.cuh — the element form's kernel: f on every element in
// place, each thread reading all of its elements before it calls f on the first.
//
// f takes the element itself (T&, or const T& where T is const), so the elements cannot be loaded
// as vectors into copies. Called one by one, each f reads an element and writes it before the next
// read can start. Here each thread reads its 4 elements, a block's width apart (every warp's access
// is coalesced), before calling f on them; where f writes only its own element, the compiler sees
// that no write between reaches the values read and hands them to f, so that 4 loads are in flight
// at once. Where it cannot tell (f writes through a pointer of its own), f reads the element again,
// from the L1 cache: the result is the same either way. One tile a block, no grid-stride loop:
// measured on an H100 over 1 GiB in place, that reaches the copy bandwidth for 4- and 8-byte
// elements (a loop over 8 blocks an SM reached 0.86 of it), and 8 or 16 items a thread do worse for
// 1- and 2-byte ones than 4.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace cohort::detail {

inline constexpr unsigned for_each_block = 256;
inline constexpr unsigned for_each_items = 4;
inline constexpr std::size_t for_each_tile = std::size_t(for_each_block) * for_each_items;

// Whether a thread's elements are read into registers first: types the registers hold whole.
template <class T>
inline constexpr bool
    for_each_preloads = std::is_trivially_default_constructible_v<std::remove_const_t<T>> &&
                        (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

// Marks a value read as used, emitting nothing: the read stays until the compiler has handed its
// value to f, and goes where f reads the element again.
template <class T>
__device__ void keep_read(const T& v) {
  if constexpr (sizeof(T) == 8) {
    unsigned long long bits;
    memcpy(&bits, &v, 8);
    asm volatile("" ::"l"(bits));
  } else if constexpr (sizeof(T) == 4) {
    unsigned bits;
    memcpy(&bits, &v, 4);
    asm volatile("" ::"r"(bits));
  } else {
    unsigned short bits = 0;
    memcpy(&bits, &v, sizeof(T));
    asm volatile("" ::"h"(bits));
  }
}

template <class T, class F>
__global__ void __launch_bounds__(for_each_block) for_each_elements(T* data, std::size_t n, F f) {
  constexpr unsigned items = for_each_items;
  constexpr std::size_t tile = for_each_tile;
  for (std::size_t base = std::size_t(blockIdx.x) * tile; base < n;
       base += std::size_t(gridDim.x) * tile) {
    T* p = data + base + threadIdx.x;
    if (n - base >= tile) {
      if constexpr (for_each_preloads<T>) {
        std::remove_const_t<T> read[items];
#pragma unroll
        for (unsigned j = 0; j < items; ++j)
          read[j] = p[j * for_each_block];
#pragma unroll
        for (unsigned j = 0; j < items; ++j)
          f(p[j * for_each_block]);
#pragma unroll
        for (unsigned j = 0; j < items; ++j)
          keep_read(read[j]);
      } else {
#pragma unroll
        for (unsigned j = 0; j < items; ++j)
          f(p[j * for_each_block]);
      }
    } else { // the last, partial tile
      for (unsigned j = 0; j < items; ++j)
        if (threadIdx.x + std::size_t(j) * for_each_block < n - base) f(p[j * for_each_block]);
    }
  }
}

// The grid for `n` elements: one block a tile, up to CUDA's limit (the blocks stride past it).
inline unsigned for_each_grid(std::size_t n) {
  const std::size_t tiles = (n + for_each_tile - 1) / for_each_tile;
  constexpr std::size_t most = 0x7fffffff;
  return static_cast<unsigned>(tiles < most ? tiles : most);
}

} // namespace cohort::detail
