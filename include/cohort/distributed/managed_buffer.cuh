// cohort/distributed/managed_buffer.cuh — one managed allocation spread over a group.
//
// The memory of several GPUs as one array: a single cudaMallocManaged allocation of n elements,
// shard i (the i-th range of the partition) advised to live on member i's device (preferred
// location), mapped for every other member (accessed-by) and prefetched there on member i's stream
// when the buffer is made. Every member's kernels and the host read and write all of it through
// one pointer (`span()`); the algorithms and collectives take it as they take a distributed_buffer
// (each shard on its own device). Needs devices with concurrent managed access (Linux, Pascal and
// later); a group with a member without it is refused by name when the buffer is made, and so is
// a size past what the members' devices have free.
//
//   cohort::managed_buffer<float> x(group, n);
//   float* everything = x.span().data();                     // any member, or the host
//   cohort::multi_device_for_each(group, x, [] __device__(float& v) { v *= 2; });
//   x.prefetch();                                            // shards back to their devices
#pragma once

#include "../devices/scoped_device.cuh"
#include "../errors/argument_error.cuh"
#include "../errors/cuda_error.cuh"
#include "../execution/device_group.cuh"
#include "../partitioning/partition.cuh"
#include "distributed_view.cuh"
#include "shard.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

template <class T>
class managed_buffer {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "cohort::managed_buffer<T> needs an unqualified, trivially copyable T.");

 public:
  using value_type = T;

  managed_buffer(const device_group& group, std::size_t n)
      : managed_buffer(group, partition::even(n, detail::members_of(group, "managed_buffer"))) {}

  managed_buffer(const device_group& group, partition split)
      : split_(std::move(split)) {
    const std::size_t members = detail::members_of(group, "managed_buffer");
    detail::require_argument(split_.parts() == members, "managed_buffer", "split", [&] {
      return "has " + std::to_string(split_.parts()) + " parts but the group has " +
             std::to_string(members) + " members; give one part per member.";
    });
    detail::require_argument(split_.size() <= std::numeric_limits<std::size_t>::max() / sizeof(T),
                             "managed_buffer", "split", "covers more bytes than can be addressed.");
    for (std::size_t i = 0; i < members; ++i) {
      devices_.push_back(group.device(i));
      streams_.push_back(group.stream(i));
    }
    require_managed_devices();
    if (size() == 0) return;
    require_fits();
    {
      scoped_device on(devices_[0]);
      check_cuda(cudaMallocManaged(&data_, size() * sizeof(T), cudaMemAttachGlobal),
                 "cudaMallocManaged (managed_buffer)", devices_[0].get());
    }
    try {
      advise();
      prefetch();
    } catch (...) {
      release();
      throw;
    }
  }

  managed_buffer(managed_buffer&& other) noexcept
      : split_(std::move(other.split_))
      , devices_(std::move(other.devices_))
      , streams_(std::move(other.streams_))
      , data_(std::exchange(other.data_, nullptr)) {}
  managed_buffer& operator=(managed_buffer&&) = delete;
  managed_buffer(const managed_buffer&) = delete;
  managed_buffer& operator=(const managed_buffer&) = delete;
  // Waits for the work queued on every member's stream, then frees the allocation.
  ~managed_buffer() { release(); }

  std::size_t size() const noexcept { return split_.size(); }
  std::size_t shards() const noexcept { return devices_.size(); }
  const partition& split() const noexcept { return split_; }

  // The whole array, for kernels on any member and for the host (after the work on it is done).
  cuda::std::span<T> span() noexcept { return {data_, size()}; }
  cuda::std::span<const T> span() const noexcept { return {data_, size()}; }

  cohort::shard<T> shard(std::size_t i) { return shard_at<T>(i); }
  cohort::shard<const T> shard(std::size_t i) const { return shard_at<const T>(i); }

  distributed_view<T> view() { return distributed_view<T>(split_, shards_as<T>()); }
  distributed_view<const T> view() const {
    return distributed_view<const T>(split_, shards_as<const T>());
  }
  operator distributed_view<T>() { return view(); }
  operator distributed_view<const T>() const { return view(); }

  // Enqueues moving every shard to its member's device, on the member's stream (after the host or
  // another member touched it, say).
  void prefetch() {
    for (std::size_t i = 0; i < shards(); ++i)
      prefetch(i, streams_[i]);
  }
  // Enqueues moving shard `i` to its member's device on `stream`, a stream of that device.
  void prefetch(std::size_t i, stream_ref stream) {
    detail::element_at(devices_, i, "managed_buffer::prefetch", "shards");
    detail::require_stream(stream, "managed_buffer::prefetch");
    detail::require_argument(
        stream.device() == devices_[i], "managed_buffer::prefetch", "stream", [&] {
          return "is a stream of device " + std::to_string(stream.device().get()) + " but shard " +
                 std::to_string(i) + " lives on device " + std::to_string(devices_[i].get()) +
                 "; prefetch on a stream of the shard's device.";
        });
    if (split_.count(i) == 0) return;
    scoped_device on(devices_[i]);
    check_cuda(cudaMemPrefetchAsync(data_ + split_.offset(i), split_.count(i) * sizeof(T),
                                    location(devices_[i]), 0, stream.native_handle()),
               "cudaMemPrefetchAsync (managed_buffer)", devices_[i].get());
  }

 private:
  template <class>
  friend class distributed_view;

  static cudaMemLocation location(device_ref device) noexcept {
    cudaMemLocation where{};
    where.type = cudaMemLocationTypeDevice;
    where.id = device.get();
    return where;
  }

  template <class U>
  cohort::shard<U> shard_at(std::size_t i) const {
    detail::element_at(devices_, i, "managed_buffer::shard", "shards");
    return {cuda::std::span<U>(data_ + split_.offset(i), split_.count(i)), split_.offset(i),
            devices_[i], streams_[i], i};
  }
  template <class U>
  std::vector<cohort::shard<U>> shards_as() const {
    std::vector<cohort::shard<U>> all;
    for (std::size_t i = 0; i < shards(); ++i)
      all.push_back(shard_at<U>(i));
    return all;
  }

  void require_managed_devices() const {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      int managed = 0, concurrent = 0;
      check_cuda(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, devices_[i].get()),
                 "cudaDeviceGetAttribute(cudaDevAttrManagedMemory)", devices_[i].get());
      check_cuda(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess,
                                        devices_[i].get()),
                 "cudaDeviceGetAttribute(cudaDevAttrConcurrentManagedAccess)", devices_[i].get());
      detail::require_argument(managed != 0 && concurrent != 0, "managed_buffer", "group", [&] {
        return "member " + std::to_string(i) + " (device " + std::to_string(devices_[i].get()) +
               ") has " + (managed ? "no concurrent managed access" : "no managed memory") +
               "; a managed buffer needs both on every member (use a distributed_buffer).";
      });
    }
  }

  // Never more managed memory than the members' devices have free: oversubscribed, the driver
  // evicts pages back and forth, and on some systems the GPU stops answering.
  void require_fits() const {
    std::size_t free_total = 0;
    std::vector<device_ref> seen;
    for (device_ref d : devices_) {
      bool counted = false;
      for (device_ref s : seen)
        counted = counted || s == d;
      if (counted) continue;
      seen.push_back(d);
      scoped_device on(d);
      std::size_t free = 0, total = 0;
      check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo (managed_buffer)", d.get());
      free_total += free;
    }
    const std::size_t bytes = size() * sizeof(T);
    if (bytes > free_total) [[unlikely]]
      throw cuda_error(cudaErrorMemoryAllocation, "managed_buffer", devices_[0].get(),
                       std::source_location::current(),
                       "Asked for " + std::to_string(bytes) + " bytes of managed memory; the " +
                           "members' devices have " + std::to_string(free_total) +
                           " bytes free together.");
  }

  void advise() const {
    for (std::size_t i = 0; i < shards(); ++i) {
      if (split_.count(i) == 0) continue;
      T* first = data_ + split_.offset(i);
      const std::size_t bytes = split_.count(i) * sizeof(T);
      check_cuda(
          cudaMemAdvise(first, bytes, cudaMemAdviseSetPreferredLocation, location(devices_[i])),
          "cudaMemAdvise(cudaMemAdviseSetPreferredLocation)", devices_[i].get());
      for (std::size_t j = 0; j < shards(); ++j)
        if (j != i && !(devices_[j] == devices_[i]))
          check_cuda(cudaMemAdvise(first, bytes, cudaMemAdviseSetAccessedBy, location(devices_[j])),
                     "cudaMemAdvise(cudaMemAdviseSetAccessedBy)", devices_[j].get());
    }
  }

  // Every member's stream first (bounded by the work queued there: cudaFree alone is not ordered
  // after other devices' streams), then the allocation.
  void release() noexcept {
    if (data_ == nullptr) return;
    for (std::size_t i = 0; i < streams_.size(); ++i)
      detail::on_device_quietly(devices_[i], [&] {
        ignore_cuda_error(cudaStreamSynchronize(streams_[i].native_handle()));
      });
    try {
      scoped_device on(devices_[0]);
      ignore_cuda_error(cudaFree(data_));
    } catch (...) { // the device is gone: nothing to free
    }
    data_ = nullptr;
  }

  partition split_;
  std::vector<device_ref> devices_;
  std::vector<stream_ref> streams_;
  T* data_ = nullptr;
};

} // namespace cohort
