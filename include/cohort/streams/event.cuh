// cohort/streams/event.cuh — an owning, move-only CUDA event on a given device.
//
// Events for ordering are made without timing (cheaper to record and wait on); ask for timing to
// measure with `elapsed`.
//
//   cohort::event start(dev, cohort::event::timing::on), stop(dev, cohort::event::timing::on);
//   start.record(s); work(s); stop.record(s);
//   stop.synchronize();
//   double ms = cohort::elapsed(start, stop).count();
#pragma once

#include "event_ref.cuh"

#include <utility>

namespace cohort {

class event : public event_ref {
public:
  enum class timing { off, on };

  explicit event(device_ref device, timing t = timing::off) : event_ref(device, create(device, t)) {}

  // Takes ownership of `handle`, which must have been created on `device`.
  static event adopt(device_ref device, cudaEvent_t handle) noexcept { return event(device, handle); }

  event(event&& other) noexcept : event_ref(other.device_, std::exchange(other.handle_, nullptr)) {}
  event& operator=(event&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
      device_ = other.device_;
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { destroy(); }

  // Gives up ownership: the caller destroys the returned handle.
  cudaEvent_t release() noexcept { return std::exchange(handle_, nullptr); }

private:
  event(device_ref device, cudaEvent_t handle) noexcept : event_ref(device, handle) {}

  static cudaEvent_t create(device_ref device, timing t) {
    detail::require_valid_device(device, "event", "device");
    scoped_device on(device);
    cudaEvent_t handle = nullptr;
    const unsigned flags = t == timing::on ? cudaEventDefault : cudaEventDisableTiming;
    check_cuda(cudaEventCreateWithFlags(&handle, flags), "cudaEventCreateWithFlags", device.get());
    return handle;
  }

  void destroy() noexcept {
    if (handle_ == nullptr) return;
    try {
      scoped_device on(device_);
      ignore_cuda_error(cudaEventDestroy(handle_));
    } catch (...) { // scoped_device can throw only when the device is gone; nothing to free then
    }
    handle_ = nullptr;
  }
};

} // namespace cohort
