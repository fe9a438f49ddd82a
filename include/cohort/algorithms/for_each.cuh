// cohort/algorithms/for_each.cuh — call a device function on every element, on every GPU.
//
//   // Element form: f(T&) on every element of a distributed buffer or view, on the device that
//   // owns it (f(const T&) over a const buffer or a view of const elements).
//   cohort::multi_device_for_each(group, x, [] __device__(float& v) { v *= 2; });
//
//   // Index form: f(i) for every global index i in [0, n), split over the group.
//   cohort::multi_device_for_each(group, cohort::indices(n),
//                                 [=] __device__(std::size_t i) { out[i] = i; });
//   cohort::multi_device_for_each(group, cohort::indices(n, cohort::partition::weighted(n, {1, 3})),
//                                 f);
//   cohort::multi_device_for_each(group, cohort::indices(n, balancer), f); // see adaptive_balancer
//
//   // One device: f(i) for i in [0, n) on a stream.
//   cohort::for_each_n(stream, n, [=] __device__(std::size_t i) { y[i] = a * in[i] + y[i]; });
//
// Every form enqueues on the group's (or the given) streams and returns without waiting; the
// kernels are instantiated in the caller's translation unit (detail/for_each_kernels.cuh): the
// index forms a kernel shaped as cub::DeviceFor::Bulk's (what thrust::for_each runs), launched
// without Bulk's dispatch for less host time a call; the element form a kernel that keeps several
// elements' reads in flight per thread, f still taking each element itself.
// `f` may be an extended __device__ lambda or a function object holding state by value. Order
// it after other streams' work with `group.fork(origin)`. An index range split by
// an adaptive_balancer times each member's share and moves work toward the faster members on
// later calls (never waiting for the timings); that form is refused under capture.
#pragma once

#include "../detail/nvtx.cuh"
#include "../distributed/distributed_view.cuh"
#include "../distributed/indices.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../execution/adaptive_balancer.cuh"
#include "../execution/launch.cuh"
#include "../execution/on_each.cuh"
#include "detail/for_each_kernels.cuh"

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace cohort {

namespace detail {

// f(first_index + i) for every i in [0, n), on `stream`: one kernel per F whatever n is, in
// launches of at most bulk_piece indices (2^29 blocks, under CUDA's grid limit).
template <class F>
void bulk(stream_ref stream, std::size_t n, std::size_t first_index, F f, const char* what) {
  for (std::size_t done = 0; done < n; done += bulk_piece) {
    const std::size_t count = std::min(bulk_piece, n - done);
    launch(stream,
           {.grid = static_cast<unsigned>((count + for_each_index_tile - 1) / for_each_index_tile),
            .block = for_each_block,
            .name = what},
           for_each_indices<F>, first_index + done, count, f);
  }
}

} // namespace detail

// f(i) for every i in [0, n), on `stream`'s device.
template <class F>
void for_each_n(stream_ref stream, std::size_t n, F f) {
  const detail::nvtx_range range("for_each_n", "%zu items on device %d", n, stream.device().get());
  detail::require_stream(stream, "for_each_n");
  detail::refuse_recorded_error("for_each_n", stream.device().get());
  detail::bulk(stream, n, 0, f, "cohort::for_each_n");
}

// f(element) for every element of `range` (a distributed buffer or view), each on the device that
// owns it: f(T&), or f(const T&) where the elements are const (a const buffer, a view of const
// elements: a pass that reads them and writes elsewhere; an f that takes T& does not compile
// there). The reference is the element's own: f may take its address.
template <distributed_range Range, class F>
void multi_device_for_each(const device_group& group, Range&& range, F f) {
  const detail::nvtx_range whole("multi_device_for_each", "%zu items, %zu members", range.size(),
                                 group.size());
  detail::require_buffer_of_group(range, group, "multi_device_for_each", "range");
  detail::refuse_recorded_error("multi_device_for_each", group.device(0).get());
  for (std::size_t k = 0; k < range.shards(); ++k) {
    const auto s = range.shard(k);
    const detail::nvtx_range part("multi_device_for_each", "member %zu: %zu items", k,
                                  s.data.size());
    if (s.data.empty()) continue;
    using element = std::remove_reference_t<decltype(*s.data.data())>;
    for (std::size_t done = 0; done < s.data.size(); done += detail::for_each_piece<element>) {
      const std::size_t count = std::min(detail::for_each_piece<element>, s.data.size() - done);
      element* const first = s.data.data() + done;
      launch(s.stream,
             {.grid = detail::for_each_grid<element>(count),
              .block = detail::for_each_block,
              .name = "cohort::multi_device_for_each (elements)"},
             detail::for_each_elements_at<element, F>(first), first, count, f);
    }
  }
}

// f(i) for every global index i of `range` (cohort::indices(n[, split | balancer])), member k
// taking [split.offset(k), + split.count(k)) of the range's split: even, the one it was given, or
// its balancer's next, which is timed around each member's share.
template <class F>
void multi_device_for_each(const device_group& group, const index_range& range, F f) {
  adaptive_balancer* const balancer = range.balancer();
  const detail::nvtx_range whole("multi_device_for_each", "%zu indices, %zu members%s",
                                 range.size(), group.size(), balancer ? ", adaptive" : "");
  detail::members_of(group, "multi_device_for_each");
  detail::refuse_recorded_error("multi_device_for_each", group.device(0).get());
  // A balancer refuses a capture, by this call's name: its timing events are read on the host on
  // the next call, and a graph would replay old records.
  const partition split = range.split_for(group, "multi_device_for_each", "range");
  on_each_member(group, [&](const member& m) {
    const detail::nvtx_range part("multi_device_for_each", "member %zu: %zu indices", m.rank,
                                  split.count(m.rank));
    if (balancer) balancer->start(m.rank, m.stream);
    detail::bulk(m.stream, split.count(m.rank), split.offset(m.rank), f,
                 "cohort::multi_device_for_each (indices)");
    if (balancer) balancer->stop(m.rank, m.stream);
  });
}

} // namespace cohort
