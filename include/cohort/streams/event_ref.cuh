// cohort/streams/event_ref.cuh — a non-owning view of a CUDA event that knows its device.
//
// Events order work across streams and across devices: record on one stream, make another stream
// (on any device) wait for it. `event` (event.cuh) owns one; `event_ref` is the cheap value that
// functions take.
//
//   cohort::event done(device);
//   done.record(producer);   // producer: a stream on `device`
//   consumer.wait(done);     // consumer may be on another device
#pragma once

#include "../devices/device_ref.cuh"
#include "../devices/scoped_device.cuh"
#include "stream_ref.cuh"

#include <chrono>
#include <cstddef>

namespace cohort {

class event_ref {
public:
  event_ref(device_ref device, cudaEvent_t handle) noexcept : handle_(handle), device_(device) {}
  // An event handle is never null: refuse the literal that would make one.
  event_ref(device_ref, std::nullptr_t) = delete;
  event_ref(device_ref, int) = delete;

  cudaEvent_t native_handle() const noexcept { return handle_; }
  device_ref device() const noexcept { return device_; }

  // Captures the work enqueued so far on `stream`, which must be on this event's device.
  void record(stream_ref stream) const {
    detail::require_stream(stream, "event_ref::record");
    if (stream.device() != device_)
      detail::throw_invalid_argument(
          "event_ref::record", "stream",
          "the stream is on device " + std::to_string(stream.device().get()) +
              " but the event is on device " + std::to_string(device_.get()) +
              "; record on a stream of the event's device, then wait on it from any device.");
    // Each call holds its device current (see stream_ref::synchronize).
    scoped_device on(device_);
    check_cuda(cudaEventRecord(handle_, stream.native_handle()), "cudaEventRecord", device_.get());
  }

  // Blocks the host until the recorded work is done.
  void synchronize() const {
    scoped_device on(device_);
    check_cuda(cudaEventSynchronize(handle_), "cudaEventSynchronize", device_.get());
  }
  // True when the recorded work is done (or nothing was recorded); never blocks.
  bool ready() const {
    scoped_device on(device_);
    cudaError_t status = cudaEventQuery(handle_);
    if (status == cudaErrorNotReady) {
      ignore_cuda_error(status);
      return false;
    }
    check_cuda(status, "cudaEventQuery", device_.get());
    return true;
  }

  friend bool operator==(event_ref a, event_ref b) noexcept { return a.handle_ == b.handle_; }

protected:
  cudaEvent_t handle_;
  device_ref device_;
};

// Time between two completed records of events made with timing (`event::timing::on`).
inline std::chrono::duration<double, std::milli> elapsed(event_ref start, event_ref end) {
  float ms = 0.0f;
  scoped_device on(end.device());
  check_cuda(cudaEventElapsedTime(&ms, start.native_handle(), end.native_handle()),
             "cudaEventElapsedTime", end.device().get());
  return std::chrono::duration<double, std::milli>(ms);
}

} // namespace cohort
