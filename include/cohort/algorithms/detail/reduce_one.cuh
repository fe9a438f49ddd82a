// cohort/algorithms/detail/reduce_one.cuh — a reduction over a group of one: the member's items
// folded straight into the result (a pinned host slot, or a device_result's value) on its stream,
// with nothing gathered, copied or waited for. CUB's DeviceReduce where the result is the same in
// any order (reduce_cub.cuh) of more than 16 MiB, which is then what cub::DeviceReduce costs; else
// cohort's in-order kernel, one launch, whose last block folds `init` in as it writes the result.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "../../execution/launch.cuh"
#include "reduce_cub.cuh"
#include "reduce_kernels.cuh"
#include "reduce_plan.cuh"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

// One address per instantiation: the key under which a member remembers what CUB asked for.
template <class... Kinds>
const void* size_key() {
  static const char key = 0;
  return &key;
}

// Up to this many bytes of items in memory, a group of one's sums and integer minima and maxima
// run the in-order kernel, not CUB's: one launch where CUB's takes two, which is most of a call of
// a few microseconds. On an H100, into device memory in batches of 10, the in-order kernel ran at
// 1.33-1.63x cub::DeviceReduce::Reduce at 2^20 floats, 1.01-1.09x at 2^21 doubles (16 MiB), and
// 0.96-0.97x at 2^22 doubles (32 MiB). An index range has nothing to load: CUB's, at any count.
inline constexpr std::size_t reduce_in_order_up_to_bytes = std::size_t{16} << 20;

// CUB's reduction (of kind Kind) of `count` items of `input` into `result` on member 0's stream,
// where the items are an index range or more than reduce_in_order_up_to_bytes in memory and
// `cub_storage` has CUB's storage: true where it was enqueued.
template <any_order_reduction Kind, class T, class Op, class Transform, class Input,
          class CubStorage>
bool reduce_one_through_cub(const device_group& group, Input input, std::size_t count, T init,
                            Transform transform, T* result, CubStorage& cub_storage,
                            adaptive_balancer* balancer, std::string_view function) {
  using U = typename std::iterator_traits<Input>::value_type;
  if (std::is_pointer_v<Input> && count <= reduce_in_order_up_to_bytes / sizeof(U)) return false;
  const stream_ref stream = group.stream(0);
  const int device = stream.device().get();
  auto cub = [&](void* temp, std::size_t& bytes) {
    return reduce_in_any_order<T, Kind>(temp, bytes, input, count, transform, init, result,
                                        stream.native_handle());
  };
  member_cache& cache = group_memory_access::cache(group, 0);
  std::size_t bytes = cache.remembered_bytes(size_key<Input, T, Op, Transform>(), count, [&] {
    std::size_t asked = 0;
    check_cub_reduce(cub(nullptr, asked), function, true, device);
    return asked;
  });
  void* const temp = cub_storage(bytes);
  if (temp == nullptr) return false;
  // CUB reports the thread's recorded error as its launch's: one left by an earlier call is
  // reported as that, before anything is enqueued.
  refuse_recorded_error(function, device);
  if (balancer != nullptr) balancer->start(0, stream);
  check_cub_reduce(cub(temp, bytes), function, false, device);
  if (balancer != nullptr) balancer->stop(0, stream);
  return true;
}

// Enqueues on member 0's stream the reduction of what `source` reads into `result`. The memory it
// works in is asked for before anything is enqueued, and only one of the two per call:
// `cub_storage(bytes)` gives CUB's temporary storage, or null where it has none that large (a
// captured device_result's fixed memory: the in-order kernel runs instead); `partials(n)` gives
// the in-order kernel's partial_slots<T>, n slots.
template <class T, class Op, class Transform, class Source, class CubStorage, class Partials>
void enqueue_reduce_one(const device_group& group, const Source& source, T init, Op op,
                        Transform transform, T* result, CubStorage cub_storage, Partials partials,
                        std::string_view function) {
  using Input = decltype(source.input_of(0));
  using U = typename std::iterator_traits<Input>::value_type;
  using slot = maybe<T>;
  const stream_ref stream = group.stream(0);
  const int device = stream.device().get();
  const Input input = source.input_of(0);
  const std::size_t count = source.counts[0];
  adaptive_balancer* const balancer = source.balancer;
  scoped_device on(stream.device()); // CUB sizes and launches for the current device
  constexpr any_order_reduction kind = any_order_reduction_of<T, Op>();
  if constexpr (kind != any_order_reduction::none)
    if (reduce_one_through_cub<kind, T, Op>(group, input, count, init, transform, result,
                                            cub_storage, balancer, function))
      return;

  const unsigned blocks = plan_reduce<U>(count, reduce_max_blocks(group, 0));
  const partial_slots<T> slots = blocks > 1 ? partials(blocks) : partial_slots<T>{};
  if (balancer != nullptr) balancer->start(0, stream);
  const launch_config config{.grid = std::max(1u, blocks),
                             .block = reduce_block_threads,
                             .name = "cohort::detail::reduce_in_order"};
  const into_result<T, Op> into{init, op, result};
  if (blocks == 0) {
    launch(stream, {.name = "cohort::detail::store_result"}, store_result<T>, result, init);
  } else if (blocks == 1) {
    launch(stream, config, reduce_kernel<T, Input, Transform, Op, into_result<T, Op>>, input, count,
           transform, op, into);
  } else {
    // A T with padding has bytes the kernels never write: zeroed, so that the last block's
    // copies of the slots read only written bytes (what compute-sanitizer's initcheck checks).
    if constexpr (!std::is_arithmetic_v<T> && !std::has_unique_object_representations_v<T>)
      check_cuda(cudaMemsetAsync(slots.slots, 0, blocks * sizeof(slot), stream.native_handle()),
                 "cudaMemsetAsync (reduction partials)", device);
    using out = via_slots<T, into_result<T, Op>>;
    launch(stream, config, reduce_kernel<T, Input, Transform, Op, out>, input, count, transform, op,
           out{slots, into});
  }
  if (balancer != nullptr) balancer->stop(0, stream);
}

} // namespace cohort::detail
