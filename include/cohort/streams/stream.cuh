// cohort/streams/stream.cuh — an owning, move-only CUDA stream on a given device.
//
// Created non-blocking (it never synchronizes with the legacy default stream) and destroyed under
// its own device, whatever device is current then. A `stream` is a `stream_ref`, so it goes
// wherever one is taken.
//
//   cohort::stream s(cohort::device_ref{1});
//   my_kernel<<<g, b, 0, s.native_handle()>>>(...);
//   s.synchronize();
#pragma once

#include "stream_ref.cuh"

#include <utility>

namespace cohort {

class stream : public stream_ref {
public:
  // A new non-blocking stream on `device`; `priority` as cudaStreamCreateWithPriority (lower
  // numbers run first; 0 is the default).
  explicit stream(device_ref device, int priority = 0) : stream_ref(device, create(device, priority)) {}

  // Takes ownership of `handle`, which must belong to `device`.
  static stream adopt(device_ref device, cudaStream_t handle) noexcept { return stream(device, handle); }

  stream(stream&& other) noexcept : stream_ref(other.device_, std::exchange(other.handle_, nullptr)) {}
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() { destroy(); }

  // Gives up ownership: the caller destroys the returned handle.
  cudaStream_t release() noexcept { return std::exchange(handle_, nullptr); }

private:
  stream(device_ref device, cudaStream_t handle) noexcept : stream_ref(device, handle) {}

  static cudaStream_t create(device_ref device, int priority) {
    detail::require_valid_device(device, "stream", "device");
    scoped_device on(device);
    cudaStream_t handle = nullptr;
    check_cuda(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority),
               "cudaStreamCreateWithPriority", device.get());
    return handle;
  }

  void destroy() noexcept {
    if (handle_ == nullptr) return;
    try {
      scoped_device on(device_);
      ignore_cuda_error(cudaStreamDestroy(handle_));
    } catch (...) { // scoped_device can throw only when the device is gone; nothing to free then
    }
    handle_ = nullptr;
  }
};

} // namespace cohort
