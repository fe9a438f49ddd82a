// cohort/memory/device_buffer.cuh — uninitialized device memory that remembers its device and
// stream.
//
// Allocated stream-ordered on the stream it is given, from a memory resource (memory_resource.cuh:
// the device's stream-ordered pool unless another is given), and given back on that stream under
// that stream's device, whatever device is current. Move-only. The stream and the resource must
// outlive the buffer. Copies are enqueued on the buffer's stream and return at once: keep host memory alive
// and synchronize the stream before reading what a copy wrote.
//
//   cohort::stream s(cohort::device_ref{0});
//   cohort::device_buffer<float> x(n, s);
//   cohort::device_buffer<float> y(n, s, cohort::default_memory_resource());  // the same pool
//   x.copy_from_host(host_x);               // std::span<const float>, size n
//   cohort::launch(s, {.grid = g, .block = b}, my_kernel, x.data(), x.size());
//   x.copy_to_host(host_x);
//   s.synchronize();
#pragma once

#include "../detail/nvtx.cuh"
#include "../detail/peer_copy.cuh"
#include "../devices/scoped_device.cuh"
#include "../streams/event.cuh"
#include "../streams/stream_ref.cuh"
#include "bitwise_copyable.cuh"
#include "memory_resource.cuh"

#include <cuda/std/span>

#include <atomic>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace cohort {

template <class T>
class device_buffer {
  static_assert(bitwise_copyable_v<T>,
                "cohort::device_buffer<T> needs a trivially copyable T: its bytes are copied "
                "between host and devices without running constructors (specialize "
                "cohort::bitwise_copyable for a type whose bytes may be copied all the same).");
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>,
                "cohort::device_buffer<T> needs an unqualified T.");

 public:
  using value_type = T;

  // `count` uninitialized elements on `stream`'s device, allocated in `stream`'s order from
  // `resource`. Out of memory (a resource that returns null) is a cuda_error
  // (cudaErrorMemoryAllocation) with the bytes asked and free; what a resource throws propagates.
  device_buffer(std::size_t count, stream_ref stream,
                memory_resource_ref resource = default_memory_resource())
      : stream_(stream)
      , resource_(resource)
      , size_(count) {
    detail::require_stream(stream, "device_buffer");
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T))
      detail::throw_invalid_argument("device_buffer", "count",
                                     std::to_string(count) + " elements of " +
                                         std::to_string(sizeof(T)) +
                                         " bytes overflow the address space.");
    detail::require_valid_device(stream.device(), "device_buffer", "stream");
    if (count == 0) return;
    void* p = resource_.allocate(size_bytes(), alignment, stream);
    if (p == nullptr) {
      size_ = 0;
      throw_out_of_memory(count * sizeof(T), stream.device());
    }
    data_ = static_cast<T*>(p);
  }

  device_buffer(device_buffer&& other) noexcept
      : stream_(other.stream_)
      , resource_(other.resource_)
      , data_(std::exchange(other.data_, nullptr))
      , size_(std::exchange(other.size_, 0))
      , mark_(other.mark_.exchange(nullptr)) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      free();
      stream_ = other.stream_;
      resource_ = other.resource_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mark_.store(other.mark_.exchange(nullptr));
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { free(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  device_ref device() const noexcept { return stream_.device(); }
  stream_ref stream() const noexcept { return stream_; }
  // Where the memory came from, and goes back to.
  memory_resource_ref resource() const noexcept { return resource_; }

  // A span usable in device code (libcu++'s cuda::std::span).
  cuda::std::span<T> span() noexcept { return {data_, size_}; }
  cuda::std::span<const T> span() const noexcept { return {data_, size_}; }

  // Enqueues a copy of all of `source` (size() elements) into this buffer.
  void copy_from_host(std::span<const T> source) {
    const detail::nvtx_range range("copy_from_host", "%zu B to device %d", size_bytes(),
                                   device().get());
    require_same_size(source.size(), "copy_from_host", "source");
    if (empty()) return;
    scoped_device on(device());
    check_cuda(cudaMemcpyAsync(data_, source.data(), size_bytes(), cudaMemcpyHostToDevice,
                               stream_.native_handle()),
               "cudaMemcpyAsync(host to device)", device().get());
  }

  // Enqueues a copy of this buffer into all of `target` (size() elements).
  void copy_to_host(std::span<T> target) const {
    const detail::nvtx_range range("copy_to_host", "%zu B from device %d", size_bytes(),
                                   device().get());
    require_same_size(target.size(), "copy_to_host", "target");
    if (empty()) return;
    scoped_device on(device());
    check_cuda(cudaMemcpyAsync(target.data(), data_, size_bytes(), cudaMemcpyDeviceToHost,
                               stream_.native_handle()),
               "cudaMemcpyAsync(device to host)", device().get());
  }

  // Enqueues a copy of this buffer into `target`, on this or another device (a peer copy, direct
  // where peer access is enabled, staged by CUDA otherwise). The copy runs on this buffer's stream
  // after the work already on `target`'s stream, and `target`'s stream waits for it. Captured into
  // a graph, a copy between two devices must be direct: enable peer access from the copying
  // stream's device to the other before the capture (refused, naming the call, otherwise).
  // Between two GPUs each of these orderings is a cross-device dependency that the GPUs resolve in
  // a few microseconds; back-to-back copies where the caller already orders the streams (or
  // needs no order) are faster with the form below that takes a stream.
  void copy_to(device_buffer& target) const {
    const detail::nvtx_range range("copy_to", "%zu B device %d to %d, ordered", size_bytes(),
                                   device().get(), target.device().get());
    require_same_size(target.size(), "copy_to", "target");
    if (empty()) return;
    const bool other_stream = !(target.stream_ == stream_);
    // The target's stream alone being captured takes this one into its capture (order_before).
    const bool capturing =
        require_capturable(target, stream_, other_stream ? &target.stream_ : nullptr);
    if (other_stream) target.order_before(stream_);
    enqueue_copy(target, stream_, capturing);
    if (other_stream) order_before(target.stream_);
  }

  // Enqueues the copy on `stream` alone, ordered by nothing else: like cudaMemcpyPeerAsync, the
  // caller orders it after the writes to this buffer and before the uses of `target` (one stream
  // for all of them needs nothing more). `stream` is on this buffer's device or on the target's.
  void copy_to(device_buffer& target, stream_ref stream) const {
    const detail::nvtx_range range("copy_to", "%zu B device %d to %d, on a stream of device %d",
                                   size_bytes(), device().get(), target.device().get(),
                                   stream.device().get());
    detail::require_stream(stream, "device_buffer::copy_to");
    require_same_size(target.size(), "copy_to", "target");
    if (stream.device() != device() && stream.device() != target.device())
      detail::throw_invalid_argument(
          "device_buffer::copy_to", "stream",
          "is on device " + std::to_string(stream.device().get()) + ", neither the source's (" +
              std::to_string(device().get()) + ") nor the target's (" +
              std::to_string(target.device().get()) + "); pass a stream of one of them.");
    if (empty()) return;
    enqueue_copy(target, stream, require_capturable(target, stream, nullptr));
  }

  // Enqueues setting every byte to `value` (poisoning outputs in tests, zeroing accumulators).
  void fill_bytes(unsigned char value) {
    const detail::nvtx_range range("fill_bytes", "%zu B on device %d", size_bytes(),
                                   device().get());
    if (empty()) return;
    scoped_device on(device());
    check_cuda(cudaMemsetAsync(data_, value, size_bytes(), stream_.native_handle()),
               "cudaMemsetAsync", device().get());
  }

  // Gives up ownership: the caller gives the returned pointer back
  // (resource().deallocate(p, size_bytes, 256, stream()), read both before the call).
  T* release() noexcept {
    size_ = 0;
    return std::exchange(data_, nullptr);
  }

 private:
  // What cudaMalloc guarantees, and what CUB and vector loads assume.
  static constexpr std::size_t alignment = 256;

  [[noreturn]] static void throw_out_of_memory(std::size_t bytes, device_ref device) {
    std::size_t free = 0, total = 0;
    {
      scoped_device on(device);
      ignore_cuda_error(cudaMemGetInfo(&free, &total));
    }
    throw cuda_error(cudaErrorMemoryAllocation, "device_buffer (memory resource)", device.get(),
                     std::source_location::current(),
                     "Asked for " + std::to_string(bytes) + " bytes; " + std::to_string(free) +
                         " of " + std::to_string(total) + " bytes are free on the device.");
  }

  void require_same_size(std::size_t other, std::string_view function,
                         std::string_view argument) const {
    if (other != size_)
      detail::throw_invalid_argument(
          std::string("device_buffer::") + std::string(function), argument,
          "has " + std::to_string(other) + " elements but the buffer has " + std::to_string(size_) +
              "; sizes must match.");
  }

  // Whether the copy on `stream` is captured (`stream` is, or joins `joined`'s capture, when
  // given); refuses a captured copy between two devices that could not be captured (before
  // anything is enqueued). Within one device a copy is the same call captured or not: not asked.
  bool require_capturable(const device_buffer& target, stream_ref stream,
                          const stream_ref* joined) const {
    if (target.device() == device()) return false;
    if (!stream.is_capturing() && !(joined && joined->is_capturing())) return false;
    const device_ref other = stream.device() == device() ? target.device() : device();
    detail::require_capturable_copy(stream.device(), other, "device_buffer::copy_to",
                                    "a copy of " + std::to_string(size_bytes()) + " bytes");
    return true;
  }

  void enqueue_copy(device_buffer& target, stream_ref stream, bool capturing) const {
    detail::copy_between_devices(target.data_, target.device(), data_, device(), size_bytes(),
                                 stream, capturing, "device_buffer::copy_to");
  }

  // `later` waits for the work enqueued so far on this buffer's stream.
  void order_before(stream_ref later) const {
    const event_ref mark(device(), mark_event());
    mark.record(stream_);
    later.wait(mark);
  }

  // The event order_before records, made at its first use and kept: making one per copy cost
  // microseconds. Concurrent copies may record it at once; since it is only ever recorded on this
  // buffer's stream, a wait that sees a later record orders later, never too early.
  cudaEvent_t mark_event() const {
    cudaEvent_t mark = mark_.load(std::memory_order_acquire);
    if (mark != nullptr) return mark;
    cudaEvent_t made = event(device()).release();
    if (mark_.compare_exchange_strong(mark, made, std::memory_order_acq_rel)) return made;
    destroy_event(made); // another thread made one first
    return mark;
  }

  void destroy_event(cudaEvent_t e) const noexcept {
    try {
      scoped_device on(device());
      ignore_cuda_error(cudaEventDestroy(e));
    } catch (...) { // scoped_device can throw only when the device is gone; nothing to free then
    }
  }

  void free() noexcept {
    if (cudaEvent_t mark = mark_.exchange(nullptr)) destroy_event(mark);
    if (data_ == nullptr) return;
    resource_.deallocate(data_, size_bytes(), alignment, stream_); // never throws
    data_ = nullptr;
    size_ = 0;
  }

  stream_ref stream_;
  memory_resource_ref resource_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  mutable std::atomic<cudaEvent_t> mark_{nullptr};
};

} // namespace cohort
