// cohort/streams/stream.cuh — an owning, move-only CUDA stream on a given device.
//
// Created non-blocking (it never synchronizes with the legacy default stream) and destroyed under
// its own device, whatever device is current then. A `stream` is a `stream_ref`, so it goes
// wherever one is taken. A moved-from (or released) stream holds no handle, which CUDA would take
// for the legacy default stream: every call refuses it (stream_ref.cuh).
//
//   cohort::stream s(cohort::device_ref{1});
//   cohort::launch(s, {.grid = g, .block = b}, my_kernel, x, n);
//   s.synchronize();
#pragma once

#include "detail/owner.cuh"
#include "stream_ref.cuh"

#include <utility>

namespace cohort {

class stream : public detail::owner<stream, stream_ref> {
 public:
  // A new non-blocking stream on `device`; `priority` as cudaStreamCreateWithPriority (lower
  // numbers run first; 0 is the default).
  explicit stream(device_ref device, int priority = 0)
      : owner(device, create(device, priority)) {}

  // `adopt(device, handle)` takes ownership of a handle, `release()` gives it up.

 private:
  friend class detail::owner<stream, stream_ref>;

  stream(device_ref device, cudaStream_t handle) noexcept
      : owner(device, handle) {}

  static cudaStream_t create(device_ref device, int priority) {
    detail::require_valid_device(device, "stream", "device");
    scoped_device on(device);
    cudaStream_t handle = nullptr;
    check_cuda(cudaStreamCreateWithPriority(&handle, cudaStreamNonBlocking, priority),
               "cudaStreamCreateWithPriority", device.get());
    return handle;
  }

  static void destroy_handle(cudaStream_t handle) noexcept {
    ignore_cuda_error(cudaStreamDestroy(handle));
  }
};

} // namespace cohort
