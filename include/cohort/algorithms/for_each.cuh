// cohort/algorithms/for_each.cuh — call a device function on every element, on every GPU.
//
//   // Element form: f(T&) on every element of a distributed buffer, on the device that owns it
//   // (f(const T&) over a const buffer).
//   cohort::multi_device_for_each(group, x, [] __device__(float& v) { v *= 2; });
//
//   // Index form: f(i) for every global index i in [0, n), split over the group.
//   cohort::multi_device_for_each_n(group, n, [=] __device__(std::size_t i) { out[i] = i; });
//   cohort::multi_device_for_each_n(group, n, f, cohort::partition::weighted(n, {1, 3}));
//   cohort::multi_device_for_each_n(group, n, f, balancer);   // adaptive: see adaptive_balancer
//
//   // One device: f(i) for i in [0, n) on a stream.
//   cohort::for_each_n(stream, n, [=] __device__(std::size_t i) { y[i] = a * in[i] + y[i]; });
//
// Every form enqueues on the group's (or the given) streams and returns without waiting; the
// kernels are CUB's DeviceFor (what thrust::for_each runs), instantiated in the caller's
// translation unit. `f` may be an extended __device__ lambda or a function object holding state
// by value. Order it after other streams' work with `group.fork(origin)`.
#pragma once

#include "../detail/nvtx.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../execution/adaptive_balancer.cuh"
#include "../execution/on_each.cuh"

#include <cub/device/device_for.cuh>

#include <algorithm>
#include <cstddef>

namespace cohort {

namespace detail {

// Turns a launch's local index into the global one. `f` is mutable: CUB calls a function object
// whose call operator is not const, and so does cohort.
template <class F>
struct at_global_index {
  mutable F f;
  std::size_t offset;
  __device__ void operator()(std::size_t local) const { f(offset + local); }
};

// cub::DeviceFor::Bulk launches a block for every 512 indices and casts the count of blocks to
// unsigned int (CUB 3.0): from about 2^40 indices its launch fails, and past 2^41 the count wraps
// and it visits a few blocks' worth, reporting success. Larger counts go in pieces of 2^38.
inline constexpr std::size_t bulk_piece = std::size_t(1) << 38;

// f(first_index + i) for every i in [0, n), on `stream`: one kernel per F whatever n is.
template <class F>
void bulk(stream_ref stream, std::size_t n, std::size_t first_index, F f, std::string_view what) {
  for (std::size_t done = 0; done < n; done += bulk_piece)
    check_cuda(cub::DeviceFor::Bulk(std::min(bulk_piece, n - done),
                                    at_global_index<F>{f, first_index + done},
                                    stream.native_handle()),
               what, stream.device().get());
}

} // namespace detail

// f(i) for every i in [0, n), on `stream`'s device.
template <class F>
void for_each_n(stream_ref stream, std::size_t n, F f) {
  const detail::nvtx_range range("for_each_n", "%zu items on device %d", n, stream.device().get());
  detail::require_stream(stream, "for_each_n");
  scoped_device on(stream.device());
  detail::bulk(stream, n, 0, f, "cub::DeviceFor::Bulk (for_each_n)");
}

namespace detail {

// multi_device_for_each's body, for a buffer (or a const one, whose elements f gets as const T&).
template <class Buffer, class F>
void for_each_element(const device_group& group, Buffer& buffer, F f) {
  const nvtx_range range("multi_device_for_each", "%zu items, %zu members", buffer.size(),
                         group.size());
  require_buffer_of_group(buffer, group, "multi_device_for_each", "buffer");
  refuse_recorded_error("multi_device_for_each", group.device(0).get());
  on_each_shard(buffer, [&](const auto& s) {
    const nvtx_range part("multi_device_for_each", "member %zu: %zu items", s.rank, s.data.size());
    if (s.data.empty()) return;
    check_cuda(cub::DeviceFor::ForEachN(s.data.data(), s.data.size(), f, s.stream.native_handle()),
               "cub::DeviceFor::ForEachN (multi_device_for_each)", s.device.get());
  });
}

} // namespace detail

// f(element) for every element of `buffer`, each on the device that owns it: f(T&), or
// f(const T&) where the buffer is const (a pass that reads it and writes elsewhere; an f that
// takes T& does not compile there, failing inside CUB).
template <class T, class F>
void multi_device_for_each(const device_group& group, distributed_buffer<T>& buffer, F f) {
  detail::for_each_element(group, buffer, f);
}
template <class T, class F>
void multi_device_for_each(const device_group& group, const distributed_buffer<T>& buffer, F f) {
  detail::for_each_element(group, buffer, f);
}

// f(i) for every global index i in [0, n), member k taking [split.offset(k), + split.count(k)).
template <class F>
void multi_device_for_each_n(const device_group& group, std::size_t n, F f,
                             const partition& split) {
  const detail::nvtx_range range("multi_device_for_each_n", "%zu items, %zu members", n,
                                 group.size());
  detail::members_of(group, "multi_device_for_each_n");
  detail::require_argument(split.parts() == group.size(), "multi_device_for_each_n", "split",
                           "has " + std::to_string(split.parts()) + " parts but the group has " +
                               std::to_string(group.size()) + " members.");
  detail::require_argument(split.size() == n, "multi_device_for_each_n", "split",
                           "covers " + std::to_string(split.size()) + " items but n is " +
                               std::to_string(n) + ".");
  detail::refuse_recorded_error("multi_device_for_each_n", group.device(0).get());
  on_each_member(group, [&](const member& m) {
    const detail::nvtx_range part("multi_device_for_each_n", "member %zu: %zu items", m.rank,
                                  split.count(m.rank));
    detail::bulk(m.stream, split.count(m.rank), split.offset(m.rank), f,
                 "cub::DeviceFor::Bulk (multi_device_for_each_n)");
  });
}

// The same, split evenly.
template <class F>
void multi_device_for_each_n(const device_group& group, std::size_t n, F f) {
  multi_device_for_each_n(group, n, f,
                          partition::even(n, detail::members_of(group, "multi_device_for_each_n")));
}

// The same, split by `balancer`, which times each member's share on this call and moves work
// toward the faster members on later calls (never waiting for the timings).
template <class F>
void multi_device_for_each_n(const device_group& group, std::size_t n, F f,
                             adaptive_balancer& balancer) {
  const detail::nvtx_range range("multi_device_for_each_n", "%zu items, %zu members, adaptive", n,
                                 group.size());
  detail::members_of(group, "multi_device_for_each_n");
  detail::refuse_recorded_error("multi_device_for_each_n", group.device(0).get());
  // Refused under capture, by this call's name: its timing events are read on the host on the
  // next call, and a graph would replay old records.
  const partition split = balancer.next_split(group, n, "multi_device_for_each_n", "balancer");
  on_each_member(group, [&](const member& m) {
    const detail::nvtx_range part("multi_device_for_each_n", "member %zu: %zu items", m.rank,
                                  split.count(m.rank));
    balancer.start(m.rank, m.stream);
    detail::bulk(m.stream, split.count(m.rank), split.offset(m.rank), f,
                 "cub::DeviceFor::Bulk (multi_device_for_each_n)");
    balancer.stop(m.rank, m.stream);
  });
}

} // namespace cohort
