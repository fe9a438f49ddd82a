// cohort/algorithms/detail/reduce_kernels.cuh — the kernels of the reductions over a group: each
// member folds its items in order in one kernel (reduce_in_order, whose last block to finish folds
// the blocks' results), then member 0 folds the members' results in rank order with `init`
// (combine_members); a group of one folds `init` in as it writes the result.
#pragma once

#include "reduce_values.cuh"

#include <cub/warp/warp_reduce.cuh>
#include <cuda/atomic>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

namespace cohort::detail {

inline constexpr int reduce_block_threads = 256;
inline constexpr int reduce_block_warps = reduce_block_threads / 32;
// Blocks per SM of the first step. Measured on an H100 against cub::DeviceReduce::Reduce, floats
// and doubles from 2^21 to 2^28: four ran at 0.89-1.27x where eight ran at 0.72-1.28x; two, three
// and six did no better. With blocks that step through contiguous ranges, eight, sixteen and
// thirty-two ran no faster than four.
inline constexpr unsigned reduce_blocks_per_sm = 4;

// Items each lane loads per tile: 16 bytes of consecutive items (blocked, so the lane folds them
// in order, and a warp's tile is 512 contiguous bytes), in one 16-byte load where the input is a
// pointer aligned to 16 bytes (load_lane: cub::WarpLoad's vectorized form loads item by item in
// the CCCL of CUDA 13.0, NVIDIA/cccl#431).
template <class U>
inline constexpr int reduce_items_per_lane = sizeof(U) < 16 ? static_cast<int>(16 / sizeof(U)) : 1;

// Tiles a warp loads before it folds them, for more loads in flight per lane. An index range
// (nothing to load) and wide values (registers) take one. Measured on an H100 from 2^24 to 2^28
// floats and doubles: four a load ran up to 2% faster than one; eight, compiled for 8 blocks an SM,
// spilled registers and ran at 0.4-0.6x. Lanes that each fold a contiguous span of the warp's range
// alone (one WarpReduce a warp, not one a tile) ran at 1.04x at 2^20 floats but 0.3-0.7x from 2^22:
// the lanes' loads stride kilobytes apart.
template <class Input, class V>
inline constexpr int reduce_tiles_per_load = std::is_pointer_v<Input> && sizeof(V) <= 16 ? 4 : 1;

// A block takes a contiguous range of steps of reduce_step_tiles tiles, warp w folding the w-th run
// of reduce_warp_tiles in each: the block's loads stay within one step (16 KiB of items of 1, 2,
// 4, 8 or 16 bytes). Each
// warp on a range of its own, 4 tiles at a time, read 4224 streams at once on an H100 and ran at
// 0.85-0.95x cub::DeviceReduce::Reduce from 2^21 to 2^28 floats, where blocks that step together
// ran at 0.94-0.99x; 8, 16 or 32 blocks an SM in place of 4 did no better.
inline constexpr std::size_t reduce_warp_tiles = 4;
inline constexpr std::size_t reduce_step_tiles = reduce_warp_tiles * reduce_block_warps;

// The first of block b's steps, of `steps` shared by `blocks` blocks: contiguous ranges whose
// sizes differ by one at most (and no product that could overflow). Whole steps: ranges split at
// tiles left most blocks a partial step, whose extra barriers and short runs cost more than the
// balance gained (0.77-0.87x of CUB where a block had one whole step and most of another).
__host__ __device__ inline std::size_t block_first_step(std::size_t b, std::size_t blocks,
                                                        std::size_t steps) {
  const std::size_t each = steps / blocks, extra = steps % blocks;
  return b * each + (b < extra ? b : extra);
}

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

// Where the result of the block that folds all of a member's items goes: the member's slot, for
// member 0 to gather...
template <class T>
struct into_slot {
  maybe<T>* slot;
  __device__ void operator()(const maybe<T>& all) const { *slot = all; }
};

// ...or, for a group of one, op(init, it) as the result itself (device memory, or a pinned host
// slot), `init` alone where there are no items.
template <class T, class Op>
struct into_result {
  T init;
  Op op;
  T* result;
  __device__ void operator()(const maybe<T>& all) const {
    *result = all.has() ? convert<T>(op(init, all.value)) : init;
  }
};

// Where the blocks that share a member's items leave their results, one slot each, and the count
// of them done: zero when the kernel starts, and set back to zero by the last.
template <class T>
struct partial_slots {
  maybe<T>* slots = nullptr;
  unsigned* arrivals = nullptr;
};

// Where several blocks share a member's items: each leaves its result in its slot (slots[block]),
// and the last to finish folds the slots, in order, into `last`. One kernel, not a second one for
// the fold: a launch less (of host time, and of a gap on the device) where a member's items take a
// few microseconds.
template <class T, class Last>
struct via_slots {
  partial_slots<T> partials;
  Last last;
};

template <class Out>
inline constexpr bool is_via_slots = false;
template <class T, class Last>
inline constexpr bool is_via_slots<via_slots<T, Last>> = true;

// Reduces items [0, count) of `input` in order, values transform(item) of type V folded with `op`.
// Block b takes steps [block_first_step(b), block_first_step(b + 1)) of reduce_step_tiles tiles
// each; in a step warp w folds the w-th run of reduce_warp_tiles tiles. A
// warp loads Loads tiles at once, then for each tile in turn each lane folds its consecutive items,
// cub::WarpReduce (which keeps lane order) folds the lanes, and lane 0 folds the tiles in order;
// thread 0 then folds the step's warps in order into the block's result. One block gives it to
// `out` (into_slot or into_result); several leave it in `out`'s slots (via_slots), for the last
// of them to fold. Whole steps take the plain path; only the input's last, partial step pays for
// maybe<V> (a warp may have nothing, a tile may be partial). plan_reduce launches at most as many
// blocks as steps; a block past them would have none, and gives its slot none.
template <class V, int Loads, int MinBlocks, class Input, class Transform, class Op, class Out>
__global__ void __launch_bounds__(reduce_block_threads, MinBlocks)
    reduce_in_order(Input input, std::size_t count, Transform transform, Op op, Out out) {
  using U = typename std::iterator_traits<Input>::value_type;
  constexpr int per_lane = reduce_items_per_lane<U>;
  constexpr std::size_t tile = 32 * per_lane;
  constexpr std::size_t run_items = reduce_warp_tiles * tile;
  constexpr std::size_t step_items = reduce_block_warps * run_items;
  static_assert(reduce_warp_tiles % Loads == 0);
  using reduce_whole = cub::WarpReduce<V>;
  using reduce_partial = cub::WarpReduce<maybe<V>>;
  __shared__ typename reduce_whole::TempStorage whole_storage[reduce_block_warps];
  __shared__ typename reduce_partial::TempStorage partial_storage[reduce_block_warps];
  // The warps' results of a step: two sets where they are small, so that the warps write one
  // while thread 0 may still read the other and a step needs one barrier, not two (a chain of
  // eight dependent reads by thread 0 held every warp back, at 0.84x of CUB for floats). Raw
  // storage: a __shared__ variable may not have a constructor to run, and V's may.
  constexpr int sets = sizeof(V) <= 64 ? 2 : 1;
  constexpr std::size_t whole_bytes = sizeof(V) * reduce_block_warps * sets;
  constexpr std::size_t partial_bytes = sizeof(maybe<V>) * reduce_block_warps;
  __shared__ alignas(maybe<V>) unsigned char
      result_bytes[whole_bytes > partial_bytes ? whole_bytes : partial_bytes];

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const combine_maybe<V, Op> combine{op};
  bool aligned = false; // every lane's loads are 16-byte aligned where the input is
  if constexpr (std::is_pointer_v<Input>)
    aligned = reinterpret_cast<std::uintptr_t>(input) % 16 == 0;
  const std::size_t steps = (count + step_items - 1) / step_items;
  const std::size_t first_item = block_first_step(blockIdx.x, gridDim.x, steps) * step_items;
  const std::size_t begin = first_item < count ? first_item : count;
  const std::size_t past = block_first_step(blockIdx.x + 1, gridDim.x, steps) * step_items;
  const std::size_t end = past < count ? past : count;

  // N whole tiles from `at`, folded in order onto lane 0's `total` (which they start where
  // `fresh`). Warp-uniform: every lane runs every step, as WarpReduce needs.
  auto fold_tiles = [&]<int N>(std::size_t at, V& total, bool fresh,
                               std::integral_constant<int, N>) {
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
      if (lane == 0) total = fresh && t == 0 ? step : convert<V>(op(total, step));
      __syncwarp(); // the warp's temporary storage is reused by the next tile
    }
  };
  // A warp's whole run of reduce_warp_tiles tiles from `first`, folded into lane 0's `total`.
  auto fold_run = [&](std::size_t first, V& total) {
#pragma unroll
    for (std::size_t k = 0; k < reduce_warp_tiles; k += Loads)
      fold_tiles(first + k * tile, total, k == 0, std::integral_constant<int, Loads>{});
  };
  // Each warp's `mine` (lane 0's), folded in warp order onto thread 0's `onto`. Every thread calls
  // it, after thread 0 has read any results it overwrites.
  auto fold_warps = [&](const maybe<V>& mine, maybe<V>& onto) {
    maybe<V>* const results = reinterpret_cast<maybe<V>*>(result_bytes);
    if (lane == 0) results[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0)
      for (int w = 0; w < reduce_block_warps; ++w)
        onto = combine(onto, results[w]);
  };

  V total{}; // thread 0's: the block's whole steps, once `any`
  bool any = false;
  std::size_t step = begin;
  for (int set = 0; end - step >= step_items; step += step_items, set ^= sets - 1) {
    V mine{};
    fold_run(step + warp * run_items, mine);
    V* const results = reinterpret_cast<V*>(result_bytes) + set * reduce_block_warps;
    if (lane == 0) results[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
      V all = results[0];
#pragma unroll
      for (int w = 1; w < reduce_block_warps; ++w)
        all = convert<V>(op(all, results[w]));
      total = any ? convert<V>(op(total, all)) : all;
      any = true;
    }
    if constexpr (sets == 1) __syncthreads(); // read before the next step writes
  }

  maybe<V> block = any ? maybe<V>::of(total) : maybe<V>::none();
  if (step < end) {
    // The last, partial step: warp w's run [first, last) may be short, or empty.
    const std::size_t run = step + warp * run_items;
    const std::size_t first = run < end ? run : end;
    const std::size_t last = end - first < run_items ? end : first + run_items;
    const std::size_t whole_end = first + (last - first) / tile * tile;
    V whole{};
    if (whole_end - first == run_items) // a whole run, as in the steps above
      fold_run(first, whole);
    else
      for (std::size_t at = first; at < whole_end; at += tile)
        fold_tiles(at, whole, at == first, std::integral_constant<int, 1>{});
    maybe<V> mine = whole_end > first ? maybe<V>::of(whole) : maybe<V>::none();
    if (whole_end < last) {
      const int valid = static_cast<int>(last - whole_end);
      maybe<V> items = maybe<V>::none();
#pragma unroll
      for (int j = 0; j < per_lane; ++j)
        if (lane * per_lane + j < valid)
          items = combine(
              items, maybe<V>::of(convert<V>(transform(input[whole_end + lane * per_lane + j]))));
      const maybe<V> tail = reduce_partial(partial_storage[warp]).Reduce(items, combine);
      if (lane == 0) mine = combine(mine, tail);
    }
    if (step > begin) __syncthreads(); // thread 0 has read the results these overwrite
    fold_warps(mine, block);
  }
  if constexpr (is_via_slots<Out>) {
    __shared__ bool last;
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> arrivals(*out.partials.arrivals);
    if (threadIdx.x == 0) {
      out.partials.slots[blockIdx.x] = block;
      // Release: this slot is written before the count says so.
      last = arrivals.fetch_add(1, cuda::memory_order_acq_rel) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    // Each thread acquires the count for itself, so that the slots it reads are those written.
    (void)arrivals.load(cuda::memory_order_acquire);
    // Warp w folds the w-th run of the slots, lane l the l-th part of that, all in order.
    const unsigned blocks = gridDim.x;
    const unsigned warp_run = (blocks + reduce_block_warps - 1) / reduce_block_warps;
    const unsigned lane_run = (warp_run + 31) / 32;
    const unsigned warp_end = ::min(blocks, (warp + 1) * warp_run);
    const unsigned first = ::min(warp_end, warp * warp_run + lane * lane_run);
    const unsigned past_mine = ::min(warp_end, first + lane_run);
    maybe<V> mine = maybe<V>::none();
    for (unsigned i = first; i < past_mine; ++i)
      mine = combine(mine, out.partials.slots[i]);
    // Thread 0 read its last results before the barrier that shared `last`.
    maybe<V> all = maybe<V>::none();
    fold_warps(reduce_partial(partial_storage[warp]).Reduce(mine, combine), all);
    if (threadIdx.x == 0) {
      arrivals.store(0, cuda::memory_order_relaxed); // every thread has read it: for the next call
      out.last(all);
    }
  } else if (threadIdx.x == 0) {
    out(block);
  }
}

// The kernel for values of type V read from an Input.
template <class V, class Input, class Transform, class Op, class Out>
inline constexpr auto reduce_kernel =
    reduce_in_order<V, reduce_tiles_per_load<Input, V>, reduce_min_blocks<V>, Input, Transform, Op,
                    Out>;

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
