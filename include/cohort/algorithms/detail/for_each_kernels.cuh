// cohort/algorithms/detail/for_each_kernels.cuh — for_each's kernels: f on every element in
// place, each thread reading all of its elements before it calls f on the first; and f on every
// index (for_each_indices, below).
//
// f takes the element itself (T&, or const T& where T is const), so the elements cannot be loaded
// as vectors into copies. Called one by one, each f reads an element and writes it before the next
// read can start. Here each thread reads its elements first: 4 runs, a block's width apart (every
// warp's access is coalesced), of as many adjacent elements as make 4 bytes (one for 4- and
// 8-byte types, 2 halves, 4 bytes). Where f writes only its own element, the compiler sees that no
// write between reaches the values read and hands them to f, so that all the loads are in flight
// at once. Where it cannot tell (f writes through a pointer of its own), f reads the element again,
// from the L1 cache: the result is the same either way. Where the runs start on a multiple of 4
// bytes the kernel is told so (for_each_aligns, below), and the compiler makes a run's reads, and
// the writes f makes to its elements, one 4-byte access each. One tile a block, no grid-stride
// loop (with one around it, bytes ran at 0.56 of the copy bandwidth on an H100 instead of 0.84).
// Measured over 2^28 elements in place, v = a * v + b, as a fraction of the copy bandwidth on an
// H100: floats 1.00; halves 1.01 told the runs are aligned, 0.98 untold; bytes 1.00 told, 0.84
// untold (one-byte stores), 0.62 where the shard starts off a 4-byte boundary (its runs then
// straddle words). On an H200, untold: floats 1.00, halves 0.89, bytes 0.69. More runs a thread
// do worse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail {

inline constexpr unsigned for_each_block = 256;
inline constexpr unsigned for_each_runs = 4;
// Adjacent elements in a thread's run: as many as make 4 bytes, at least one.
template <class T>
inline constexpr unsigned for_each_run = sizeof(T) < 4 ? unsigned(4 / sizeof(T)) : 1u;
// A thread's elements in a tile, and a tile's (one block's).
template <class T>
inline constexpr unsigned for_each_items = unsigned(for_each_runs* for_each_run<T>);
template <class T>
inline constexpr std::size_t for_each_tile = std::size_t(for_each_block) * for_each_items<T>;

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

// The offset of a thread's `j`th element from its first.
template <class T>
__device__ constexpr std::size_t for_each_offset(unsigned j) {
  constexpr unsigned run = for_each_run<T>;
  return std::size_t(j / run) * for_each_block * run + j % run;
}

// A run's bytes, and whether a kernel told that every run starts on a multiple of them can do
// better than one that is not: where a run is wider than T's alignment (2 halves, 4 bytes), the
// compiler then makes f's writes to a run's elements, and the reads, one 4-byte access each
// (f still gets each element itself; the compiler merges what it sees f do).
template <class T>
inline constexpr std::size_t for_each_run_bytes = sizeof(T) * for_each_run<T>;
template <class T>
inline constexpr bool
    for_each_aligns = for_each_run_bytes<T> > alignof(T) && for_each_run_bytes<T> <= 16 &&
                      (for_each_run_bytes<T> & (for_each_run_bytes<T> - 1)) == 0;

template <class T, bool Aligned, class F>
__global__ void __launch_bounds__(for_each_block) for_each_elements(T* data, std::size_t n, F f) {
  constexpr unsigned items = for_each_items<T>;
  constexpr std::size_t tile = for_each_tile<T>;
  const std::size_t first = std::size_t(threadIdx.x) * for_each_run<T>;
  const std::size_t base = std::size_t(blockIdx.x) * tile;
  if constexpr (Aligned)
    data = static_cast<T*>(__builtin_assume_aligned(data, for_each_run_bytes<T>));
  T* p = data + base + first;
  if (n - base >= tile) {
    [[maybe_unused]] std::conditional_t<for_each_preloads<T>, std::remove_const_t<T>, char>
        read[items];
    if constexpr (for_each_preloads<T>) {
#pragma unroll
      for (unsigned j = 0; j < items; ++j)
        read[j] = p[for_each_offset<T>(j)];
    }
#pragma unroll
    for (unsigned j = 0; j < items; ++j)
      f(p[for_each_offset<T>(j)]);
    if constexpr (for_each_preloads<T>) {
#pragma unroll
      for (unsigned j = 0; j < items; ++j)
        keep_read(read[j]);
    }
  } else { // the last, partial tile
    for (unsigned j = 0; j < items; ++j)
      if (first + for_each_offset<T>(j) < n - base) f(p[for_each_offset<T>(j)]);
  }
}

// The index form's kernel: f(first + i) for every i in [0, n), each thread two indices a block's
// width apart, as cub::DeviceFor::Bulk's kernel takes them. cohort launches it itself: through
// Bulk's dispatch a launch took 0.45 us more host time on an H100, which a group pays on every
// member. f's call operator need not be const (CUB allows that too): `f` is the kernel's copy.
inline constexpr unsigned for_each_index_items = 2;
inline constexpr std::size_t for_each_index_tile =
    std::size_t(for_each_block) * for_each_index_items;
// The most indices one launch takes: 2^29 blocks (more take several launches).
inline constexpr std::size_t bulk_piece = std::size_t(1) << 38;

// A whole tile takes no test an index: f's reads for a later index may then go before its writes
// for an earlier one (with a test each, a y = a * x + y ran 2% slower than Bulk's on an H100).
template <class F>
__global__ void __launch_bounds__(for_each_block)
    for_each_indices(std::size_t first, std::size_t n, F f) {
  const std::size_t tile_first = std::size_t(blockIdx.x) * for_each_index_tile;
  const std::size_t i = tile_first + threadIdx.x;
  if (n - tile_first >= for_each_index_tile) {
#pragma unroll
    for (unsigned j = 0; j < for_each_index_items; ++j)
      f(first + i + j * for_each_block);
  } else {
    for (unsigned j = 0; j < for_each_index_items; ++j)
      if (i + j * for_each_block < n) f(first + i + j * for_each_block);
  }
}

// The most elements one launch takes: CUDA's grid limit in tiles (more take several launches).
template <class T>
inline constexpr std::size_t for_each_piece = std::size_t(0x7fffffff) * for_each_tile<T>;

// The kernel for elements from `data` on (a tile's bytes are a multiple of a run's, so every
// piece of a shard starts aligned as the shard does).
template <class T, class F>
auto for_each_elements_at(const T* data) -> void (*)(T*, std::size_t, F) {
  if constexpr (for_each_aligns<T>)
    if (reinterpret_cast<std::uintptr_t>(data) % for_each_run_bytes<T> == 0)
      return for_each_elements<T, true, F>;
  return for_each_elements<T, false, F>;
}

// The grid for `n` elements, at most a piece: one block a tile.
template <class T>
inline unsigned for_each_grid(std::size_t n) {
  return static_cast<unsigned>((n + for_each_tile<T> - 1) / for_each_tile<T>);
}

} // namespace cohort::detail
