// cohort/algorithms/detail/reduce_kernels.cuh — the kernels of the reductions over a group: each
// member folds its items in order (reduce_in_order), then member 0 folds the members' results in
// rank order with `init` (combine_members); a group of one folds `init` in as its last block
// writes the result. `maybe<T>` lets a part with no items say so, so that no identity element is
// needed and `init` counts once.
#pragma once

#include "../../detail/narrow_floats.cuh"

#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include <cstddef>
#include <cstdint>
#include <iterator>
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

inline constexpr int reduce_block_threads = 256;
inline constexpr int reduce_block_warps = reduce_block_threads / 32;
// Blocks per SM of the first step, each warp a contiguous range. Measured on an H100 against
// cub::DeviceReduce::Reduce, floats and doubles from 2^21 to 2^28: four ran at 0.89-1.27x where
// eight ran at 0.72-1.28x; two, three and six did no better.
inline constexpr unsigned reduce_blocks_per_sm = 4;

// Items each lane loads per tile: 16 bytes of consecutive items (blocked, so the lane folds them
// in order, and a warp's tile is 512 contiguous bytes), in one 16-byte load where the input is a
// pointer aligned to 16 bytes (load_lane: cub::WarpLoad's vectorized form loads item by item in
// the CCCL of CUDA 13.0, NVIDIA/cccl#431).
template <class U>
inline constexpr int reduce_items_per_lane = sizeof(U) < 16 ? static_cast<int>(16 / sizeof(U)) : 1;

// Tiles a warp loads before it folds them, for more loads in flight per lane. An index range
// (nothing to load) and wide values (registers) take one. Measured on an H100 from 2^24 to 2^28
// floats and doubles: four a step ran up to 2% faster than one; eight, compiled for 8 blocks an SM,
// spilled registers and ran at 0.4-0.6x. Lanes that each fold a contiguous span of the warp's range
// alone (one WarpReduce a warp, not one a tile) ran at 1.04x at 2^20 floats but 0.3-0.7x from 2^22:
// the lanes' loads stride kilobytes apart.
template <class Input, class V>
inline constexpr int reduce_tiles_per_step = std::is_pointer_v<Input> && sizeof(V) <= 16 ? 4 : 1;

// Blocks per SM the first step's kernel is compiled for: 4 of 256 threads (64 registers a thread)
// for values of up to 8 bytes, which is how it is launched; wider values get the registers they
// need, and fewer blocks fit.
template <class V>
inline constexpr int reduce_min_blocks = sizeof(V) <= 8 ? static_cast<int>(reduce_blocks_per_sm)
                                                        : 1;

// A lane's items [at, at + N): one 16-byte load where `aligned` says the input allows it.
template <int N, class Input, class U>
__device__ void load_lane(Input at, U (&items)[N], bool aligned) {
  if constexpr (std::is_pointer_v<Input> && sizeof(U) * N == 16 &&
                std::is_trivially_copyable_v<U>) {
    if (aligned) {
      const uint4 all = *reinterpret_cast<const uint4*>(at);
      __builtin_memcpy(items, &all, 16);
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j)
    items[j] = at[j];
}

// Where a block's result goes: its partial slot (out[blockIdx.x]), for a later step to fold...
template <class T>
struct into_partials {
  maybe<T>* out;
  __device__ void operator()(const maybe<T>& block) const { out[blockIdx.x] = block; }
};

// ...or, from the one block that folds all a group of one has, op(init, it) as the result itself
// (device memory, or a pinned host slot), `init` alone where there are no items.
template <class T, class Op>
struct into_result {
  T init;
  Op op;
  T* result;
  __device__ void operator()(const maybe<T>& all) const {
    *result = all.has() ? convert<T>(op(init, all.value)) : init;
  }
};

// Reduces items [0, count) of `input` in order, values transform(item) of type V folded with `op`.
// Warp w of block b (global warp g = b * warps + w) takes the contiguous range
// [g * per_warp, (g + 1) * per_warp) and steps through it Tiles warp tiles at a time: it loads
// them all, then for each tile in turn each lane folds its consecutive items, cub::WarpReduce
// (which keeps lane order) folds the lanes, and lane 0 folds the tiles in order. Whole tiles take
// the plain path (no "nothing" to test per item); only a warp's last, partial tile pays for
// maybe<V>. The warps' results are folded in order and given to `out` (into_partials or
// into_result).
template <class V, int Tiles, int MinBlocks, class Input, class Transform, class Op, class Out>
__global__ void __launch_bounds__(reduce_block_threads, MinBlocks)
    reduce_in_order(Input input, std::size_t count, std::size_t per_warp, Transform transform,
                    Op op, Out out) {
  using U = typename std::iterator_traits<Input>::value_type;
  constexpr int per_lane = reduce_items_per_lane<U>;
  constexpr int tile = 32 * per_lane;
  using reduce_whole = cub::WarpReduce<V>;
  using reduce_partial = cub::WarpReduce<maybe<V>>;
  __shared__ typename reduce_whole::TempStorage whole_storage[reduce_block_warps];
  __shared__ typename reduce_partial::TempStorage partial_storage[reduce_block_warps];
  // Raw storage: a __shared__ variable may not have a constructor to run, and V's may.
  __shared__ alignas(maybe<V>) unsigned char warp_bytes[sizeof(maybe<V>) * reduce_block_warps];
  maybe<V>* warp_total = reinterpret_cast<maybe<V>*>(warp_bytes);

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const combine_maybe<V, Op> combine{op};
  bool aligned = false; // every lane's loads are 16-byte aligned where the input is
  if constexpr (std::is_pointer_v<Input>)
    aligned = reinterpret_cast<std::uintptr_t>(input) % 16 == 0;
  const std::size_t first =
      (static_cast<std::size_t>(blockIdx.x) * reduce_block_warps + warp) * per_warp;
  const std::size_t end =
      first < count ? (count - first < per_warp ? count : first + per_warp) : first;
  const std::size_t whole_end = first + (end - first) / tile * tile;
  // Warp-uniform bounds: every lane of the warp runs every step, as WarpReduce needs.
  V total{}; // meaningful in lane 0 once a tile is folded
  auto fold_tiles = [&]<int N>(std::size_t at, std::integral_constant<int, N>) {
    U items[N][per_lane];
#pragma unroll
    for (int t = 0; t < N; ++t)
      load_lane(input + (at + t * tile + lane * per_lane), items[t], aligned);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      V mine = convert<V>(transform(items[t][0]));
#pragma unroll
      for (int j = 1; j < per_lane; ++j)
        mine = convert<V>(op(mine, convert<V>(transform(items[t][j]))));
      const V step = reduce_whole(whole_storage[warp]).Reduce(mine, op);
      if (lane == 0) total = at == first && t == 0 ? step : convert<V>(op(total, step));
      __syncwarp(); // the warp's temporary storage is reused by the next tile
    }
  };
  std::size_t at = first;
  for (; whole_end - at >= std::size_t{Tiles} * tile; at += std::size_t{Tiles} * tile)
    fold_tiles(at, std::integral_constant<int, Tiles>{});
  if constexpr (Tiles > 1)
    for (; at < whole_end; at += tile)
      fold_tiles(at, std::integral_constant<int, 1>{});
  maybe<V> result = whole_end > first ? maybe<V>::of(total) : maybe<V>::none();
  if (whole_end < end) {
    const int valid = static_cast<int>(end - whole_end);
    maybe<V> mine = maybe<V>::none();
#pragma unroll
    for (int j = 0; j < per_lane; ++j)
      if (lane * per_lane + j < valid)
        mine = combine(mine,
                       maybe<V>::of(convert<V>(transform(input[whole_end + lane * per_lane + j]))));
    const maybe<V> step = reduce_partial(partial_storage[warp]).Reduce(mine, combine);
    if (lane == 0) result = combine(result, step);
  }
  if (lane == 0) warp_total[warp] = result;
  __syncthreads();
  if (threadIdx.x == 0) {
    maybe<V> block = maybe<V>::none();
    for (int w = 0; w < reduce_block_warps; ++w)
      block = combine(block, warp_total[w]);
    out(block);
  }
}

// The first step's kernel for values of type V read from an Input.
template <class V, class Input, class Transform, class Op, class Out>
inline constexpr auto reduce_kernel =
    reduce_in_order<V, reduce_tiles_per_step<Input, V>, reduce_min_blocks<V>, Input, Transform, Op,
                    Out>;

// The second step: one block folds the first step's `count` partial slots, in order, and gives
// the result to `out`. Thread t folds its contiguous run of slots in order, then one
// cub::BlockReduce (whose default algorithm keeps thread order) folds the runs. With a
// BlockReduce for each chunk of 256 slots, 2^21 to 2^24 doubles ran at 0.60-0.90x of CUB on an
// H100 where this runs at 0.72-0.98x (both at 8 blocks an SM).
template <class T, class Op, class Out>
__global__ void __launch_bounds__(reduce_block_threads)
    fold_partials(const maybe<T>* partials, unsigned count, Op op, Out out) {
  using reduce_block = cub::BlockReduce<maybe<T>, reduce_block_threads>;
  static_assert(sizeof(typename reduce_block::TempStorage) + sizeof(maybe<T>) <= 48 * 1024,
                "a value too wide for one block's shared memory");
  __shared__ typename reduce_block::TempStorage storage;
  const combine_maybe<T, Op> combine{op};
  const std::size_t run = (std::size_t{count} + reduce_block_threads - 1) / reduce_block_threads;
  const std::size_t begin = threadIdx.x * run < count ? threadIdx.x * run : count;
  const std::size_t end = count - begin < run ? count : begin + run;
  maybe<T> mine = maybe<T>::none();
  for (std::size_t i = begin; i < end; ++i)
    mine = combine(mine, partials[i]);
  const maybe<T> all = reduce_block(storage).Reduce(mine, combine);
  if (threadIdx.x == 0) out(all);
}

// `value` into `result` (device memory, or a pinned host slot): a group of one's reduction of no
// items, whose result is `init`.
template <class T>
__global__ void store_result(T* result, T value) {
  *result = value;
}

// On member 0: op(init, partial of member 0, partial of member 1, ...), members without items
// skipped, into `result` (device memory, or pinned host memory for a pending value).
template <class T, class Op>
__global__ void combine_members(const maybe<T>* partials, std::size_t count, T init, Op op,
                                T* result) {
  T value = init;
  for (std::size_t k = 0; k < count; ++k)
    if (partials[k].has()) value = convert<T>(op(value, partials[k].value));
  *result = value;
}

} // namespace cohort::detail
