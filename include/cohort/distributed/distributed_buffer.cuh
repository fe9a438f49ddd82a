// cohort/distributed/distributed_buffer.cuh — one array of n elements spread over a device group.
//
// Member i of the group holds the contiguous shard [offset(i), offset(i) + count(i)) of the global
// index space, as a `device_buffer` allocated on the member's stream from the group's memory
// resource (device_group::set_memory_resource). The split is a `partition`
// (even by default). Each shard's pointer can be used by the other members' kernels once peer
// access is enabled between them (`device_group::enable_peer_access`). The buffer must not
// outlive its group: each shard is freed on its member's stream. Copies to and from ordinary
// (pageable) host memory follow CUDA's rules: they may wait for the member's earlier work, and a
// copy to pageable memory returns only when it is done, so the next member's copy is enqueued
// after it; use pinned memory (cudaMallocHost) for copies that return at once.
//
//   cohort::device_group group(cohort::devices());
//   cohort::distributed_buffer<float> x(group, n);          // even split
//   x.copy_from_host(host_x);                                // enqueued on every member's stream
//   for (std::size_t i = 0; i < x.shards(); ++i) {
//     cohort::shard<float> s = x.shard(i);                   // span, offset, device, stream
//     cohort::launch(s.stream, {.grid = g, .block = b}, scale, s.data.data(), s.data.size());
//   }
//   x.copy_to_host(host_x);
//   group.synchronize();
#pragma once

#include "../errors/argument_error.cuh"
#include "../execution/device_group.cuh"
#include "../memory/device_buffer.cuh"
#include "../partitioning/partition.cuh"
#include "distributed_view.cuh"
#include "shard.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace cohort {

template <class T>
class distributed_buffer {
 public:
  using value_type = T;

  // `n` uninitialized elements split evenly over `group`.
  distributed_buffer(const device_group& group, std::size_t n)
      : distributed_buffer(group,
                           partition::even(n, detail::members_of(group, "distributed_buffer"))) {}

  // Elements split over `group` as `split` says; it must have one part per member.
  distributed_buffer(const device_group& group, partition split)
      : split_(std::move(split)) {
    detail::members_of(group, "distributed_buffer");
    if (split_.parts() != group.size())
      detail::throw_invalid_argument(
          "distributed_buffer", "split",
          "has " + std::to_string(split_.parts()) + " parts but the group has " +
              std::to_string(group.size()) + " members; give one part per member.");
    shards_.reserve(group.size());
    // If a later shard fails to allocate, the vector's destructor frees the earlier ones.
    for (std::size_t i = 0; i < group.size(); ++i)
      shards_.emplace_back(split_.count(i), group.stream(i), group.memory_resource(i));
  }

  std::size_t size() const noexcept { return split_.size(); }
  std::size_t shards() const noexcept { return shards_.size(); }
  const partition& split() const noexcept { return split_; }

  cohort::shard<T> shard(std::size_t i) { return shard_at<T>(i); }
  cohort::shard<const T> shard(std::size_t i) const { return shard_at<const T>(i); }

  // A non-owning view of the shards (what a buffer converts to where a view is taken).
  distributed_view<T> view() { return make_view<T>(); }
  distributed_view<const T> view() const { return make_view<const T>(); }
  operator distributed_view<T>() { return view(); }
  operator distributed_view<const T>() const { return view(); }

  // The buffer of member i (to pass to code that takes a device_buffer).
  device_buffer<T>& local(std::size_t i) {
    return detail::element_at(shards_, i, "distributed_buffer::local", "shards");
  }
  const device_buffer<T>& local(std::size_t i) const {
    return detail::element_at(shards_, i, "distributed_buffer::local", "shards");
  }

  // Enqueues, on every member's stream, the copy of its slice of `source` (size() elements).
  void copy_from_host(std::span<const T> source) {
    const detail::nvtx_range range("copy_from_host", "%zu items over %zu shards", size(), shards());
    require_whole(source.size(), "copy_from_host", "source");
    for (std::size_t i = 0; i < shards(); ++i)
      shards_[i].copy_from_host(source.subspan(split_.offset(i), split_.count(i)));
  }

  // Enqueues, on every member's stream, the copy of its shard into its slice of `target`.
  void copy_to_host(std::span<T> target) const {
    const detail::nvtx_range range("copy_to_host", "%zu items over %zu shards", size(), shards());
    require_whole(target.size(), "copy_to_host", "target");
    for (std::size_t i = 0; i < shards(); ++i)
      shards_[i].copy_to_host(target.subspan(split_.offset(i), split_.count(i)));
  }

  // Enqueues setting every byte of every shard to `value`.
  void fill_bytes(unsigned char value) {
    const detail::nvtx_range range("fill_bytes", "%zu items over %zu shards", size(), shards());
    for (device_buffer<T>& b : shards_)
      b.fill_bytes(value);
  }

 private:
  template <class U>
  distributed_view<U> make_view() const {
    std::vector<cohort::shard<U>> shards;
    shards.reserve(shards_.size());
    for (std::size_t i = 0; i < shards_.size(); ++i)
      shards.push_back(shard_at<U>(i));
    return distributed_view<U>(split_, std::move(shards));
  }

  template <class U>
  cohort::shard<U> shard_at(std::size_t i) const {
    const device_buffer<T>& b =
        detail::element_at(shards_, i, "distributed_buffer::shard", "shards");
    return cohort::shard<U>{cuda::std::span<U>(const_cast<T*>(b.data()), b.size()),
                            split_.offset(i), b.device(), b.stream(), i};
  }

  void require_whole(std::size_t other, std::string_view function,
                     std::string_view argument) const {
    if (other != size())
      detail::throw_invalid_argument(
          std::string("distributed_buffer::") + std::string(function), argument,
          "has " + std::to_string(other) + " elements but the buffer has " +
              std::to_string(size()) + "; sizes must match.");
  }

  partition split_;
  std::vector<device_buffer<T>> shards_;
};

} // namespace cohort
