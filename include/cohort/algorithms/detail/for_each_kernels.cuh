// cohort/algorithms/detail/for_each_kernels.cuh — the element form's kernel: f on every element in
// place, each thread reading all of its elements before it calls f on the first.
//
// f takes the element itself (T&, or const T& where T is const), so the elements cannot be loaded
// as vectors into copies. Called one by one, each f reads an element and writes it before the next
// read can start: one load in flight per thread, short of the memory's bandwidth. Here each thread
// reads its `items` elements, a block's width apart (every warp's access is one coalesced line),
// before calling f on them; where f writes only its own element, the compiler sees that no write
// between reaches the values read and hands them to f, so that `items` loads are in flight at once.
// Where it cannot tell (f writes through a pointer of its own), f reads the element again, from the
// L1 cache: the result is the same either way. The grid fills the member's SMs and strides.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace cohort::detail {

inline constexpr unsigned for_each_block = 256;
inline constexpr unsigned for_each_blocks_per_sm = 2048 / for_each_block; // a full SM

// 32 bytes of each thread's elements in flight, 1 to 16 of them.
template <class T>
inline constexpr unsigned for_each_items =
    sizeof(T) >= 32 ? 1u : (32 / sizeof(T) > 16 ? 16u : static_cast<unsigned>(32 / sizeof(T)));

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
  constexpr unsigned items = for_each_items<T>;
  constexpr std::size_t tile = std::size_t(for_each_block) * items;
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

// The grid for `n` elements on a member with `sm_count` SMs: one block a tile, at most a full
// device's worth (the blocks stride past that).
template <class T>
unsigned for_each_grid(std::size_t n, unsigned sm_count) {
  constexpr std::size_t tile = std::size_t(for_each_block) * for_each_items<T>;
  const std::size_t tiles = (n + tile - 1) / tile;
  const std::size_t full = std::size_t(sm_count == 0 ? 1 : sm_count) * for_each_blocks_per_sm;
  return static_cast<unsigned>(tiles < full ? tiles : full);
}

} // namespace cohort::detail
