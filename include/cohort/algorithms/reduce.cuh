// cohort/algorithms/reduce.cuh — reductions over every GPU of a group.
//
// Each member reduces its own part with CUB (cub::DeviceReduce::TransformReduce), then member 0
// combines the members' results with `op` and `init`. Any associative operator and trivially
// copyable value type works: the result is op(init, x[0], x[1], ...), with `init` used once.
// Nothing blocks until `wait()` on the returned `pending`.
//
//   auto sum = cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{});
//   auto max = cohort::multi_device_transform_reduce(group, x, -INFINITY,
//                  cuda::maximum<>{}, [] __device__(float v) { return fabsf(v); });
//   auto dot = cohort::multi_device_transform_reduce_n(group, n, 0.0, cuda::std::plus<>{},
//                  [=] __device__(std::size_t i) { return double(a[i]) * b[i]; });
//   float s = sum.wait();
#pragma once

#include "../distributed/on_each_shard.cuh"
#include "../execution/on_each.cuh"
#include "pending.cuh"

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>
#include <type_traits>
#include <vector>

namespace cohort {

namespace detail {

// A value, or nothing: lets each member reduce without `init`, so `init` counts exactly once.
// The flag fills the rest of the struct, so that a maybe has no padding: CUB copies whole
// maybes, and padding never written is what compute-sanitizer's initcheck reports.
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

template <class T, class Transform>
struct wrap_value {
  Transform transform;
  template <class U>
  __device__ maybe<T> operator()(const U& x) const {
    return maybe<T>::of(static_cast<T>(transform(x)));
  }
};

template <class T, class Op>
struct combine_maybe {
  Op op;
  __device__ maybe<T> operator()(const maybe<T>& a, const maybe<T>& b) const {
    if (!a.has()) return b;
    if (!b.has()) return a;
    return maybe<T>::of(static_cast<T>(op(a.value, b.value)));
  }
};

struct identity {
  template <class U>
  __device__ const U& operator()(const U& x) const {
    return x;
  }
};

template <class T, class Op>
__global__ void combine_members(const maybe<T>* partials, std::size_t count, T init, Op op,
                                T* result) {
  T value = init;
  for (std::size_t k = 0; k < count; ++k)
    if (partials[k].has()) value = static_cast<T>(op(value, partials[k].value));
  *result = value;
}

// Member k reduces `input(k)` (an iterator) over `counts[k]` items into slot k of member 0's
// partials; member 0 then combines them. Returns the pending result.
template <class T, class Op, class Transform, class InputOf>
pending<T> reduce_over_members(const device_group& group, const std::vector<std::size_t>& counts,
                               InputOf input_of, T init, Op op, Transform transform) {
  static_assert(std::is_trivially_copyable_v<T>,
                "cohort reductions need a trivially copyable value type.");
  static_assert(std::is_default_constructible_v<T>,
                "cohort reductions need a default-constructible value type.");
  using slot = maybe<T>;
  static_assert(sizeof(slot) == sizeof(T) + alignof(T), "a maybe<T> must have no padding");
  const std::size_t n_members = group.size();
  const stream_ref root = group.stream(0);

  std::vector<device_buffer<unsigned char>> keep;
  keep.emplace_back(n_members * sizeof(slot), root); // member 0's gathered partials
  slot* gathered = reinterpret_cast<slot*>(keep[0].data());
  keep[0].fill_bytes(0); // has = false for members with no items
  event gathered_ready(root.device());
  gathered_ready.record(root);

  std::vector<event> member_done;
  member_done.reserve(n_members);
  on_each_member(group, [&](const member& m) {
    member_done.emplace_back(m.device);
    if (counts[m.rank] == 0) return;
    // Each member's scratch: its partial, then CUB's temporary storage.
    std::size_t temp_bytes = 0;
    auto input = input_of(m.rank);
    const wrap_value<T, Transform> wrap{transform};
    const combine_maybe<T, Op> combine{op};
    const slot none = slot::none();
    check_cuda(cub::DeviceReduce::TransformReduce(nullptr, temp_bytes, input, static_cast<slot*>(nullptr),
                                                  counts[m.rank], combine, wrap, none,
                                                  m.stream.native_handle()),
               "cub::DeviceReduce::TransformReduce (size query)", m.device.get());
    const std::size_t partial_bytes = (sizeof(slot) + 255) / 256 * 256;
    keep.emplace_back(partial_bytes + temp_bytes, m.stream);
    unsigned char* base = keep.back().data();
    slot* partial = reinterpret_cast<slot*>(base);
    // A T with padding (a user struct such as {float; long long}) has bytes CUB never writes:
    // zero the partial first, so that copying it reads only written bytes (what
    // compute-sanitizer's initcheck checks). Types without padding skip this.
    if constexpr (!std::is_arithmetic_v<T> && !std::has_unique_object_representations_v<T>)
      check_cuda(cudaMemsetAsync(partial, 0, sizeof(slot), m.stream.native_handle()),
                 "cudaMemsetAsync (reduction partial)", m.device.get());
    check_cuda(cub::DeviceReduce::TransformReduce(base + partial_bytes, temp_bytes, input, partial,
                                                  counts[m.rank], combine, wrap, none,
                                                  m.stream.native_handle()),
               "cub::DeviceReduce::TransformReduce", m.device.get());
    // The slot in member 0's gathered array must be initialised before it is overwritten.
    m.stream.wait(gathered_ready);
    check_cuda(cudaMemcpyPeerAsync(gathered + m.rank, root.device().get(), partial, m.device.get(),
                                   sizeof(slot), m.stream.native_handle()),
               "cudaMemcpyPeerAsync (reduction partial)", m.device.get());
    member_done.back().record(m.stream);
  });

  for (const event& e : member_done)
    root.wait(e);
  event done(root.device());
  T* host = static_cast<T*>(pinned_slots::instance().take());
  try {
    scoped_device on(root.device());
    combine_members<<<1, 1, 0, root.native_handle()>>>(gathered, n_members, init, op, host);
    check_launch("combine_members", root.device().get());
    done.record(root);
  } catch (...) {
    pinned_slots::instance().give_back(host); // nothing was enqueued that writes to it
    throw;
  }
  return pending<T>(host, std::move(done), std::move(keep));
}

} // namespace detail

// op(init, every element of `buffer`).
template <class T, class U, class Op>
pending<T> multi_device_reduce(const device_group& group, const distributed_buffer<U>& buffer,
                               T init, Op op) {
  return multi_device_transform_reduce(group, buffer, init, op, detail::identity{});
}

// op(init, transform(x) for every element x of `buffer`).
template <class T, class U, class Op, class Transform>
pending<T> multi_device_transform_reduce(const device_group& group,
                                         const distributed_buffer<U>& buffer, T init, Op op,
                                         Transform transform) {
  detail::require_buffer_of_group(buffer, group, "multi_device_transform_reduce", "buffer");
  std::vector<std::size_t> counts(group.size());
  for (std::size_t k = 0; k < group.size(); ++k)
    counts[k] = buffer.shard(k).data.size();
  return detail::reduce_over_members(
      group, counts, [&](std::size_t k) { return buffer.shard(k).data.data(); }, init, op,
      transform);
}

// op(init, transform(i) for every global index i in [0, n)), split evenly or by `split`.
template <class T, class Op, class Transform>
pending<T> multi_device_transform_reduce_n(const device_group& group, std::size_t n, T init, Op op,
                                           Transform transform, const partition& split) {
  detail::require_argument(split.parts() == group.size() && split.size() == n,
                           "multi_device_transform_reduce_n", "split",
                           "must have one part per member and cover n items.");
  return detail::reduce_over_members(
      group, split.counts(),
      [&](std::size_t k) { return thrust::counting_iterator<std::size_t>(split.offset(k)); }, init,
      op, transform);
}

template <class T, class Op, class Transform>
pending<T> multi_device_transform_reduce_n(const device_group& group, std::size_t n, T init, Op op,
                                           Transform transform) {
  return multi_device_transform_reduce_n(group, n, init, op, transform,
                                         partition::even(n, group.size()));
}

} // namespace cohort
