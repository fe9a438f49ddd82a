// cohort/streams/stream_ref.cuh — a non-owning view of a CUDA stream that knows its device.
//
// Functions that enqueue work take a `stream_ref`; `stream` (stream.cuh) owns one. A null handle
// is refused by every call that takes the stream, before it enqueues anything: it is what a
// moved-from or released `stream` holds, and CUDA would silently take it for the legacy default
// stream. The default streams are taken where they are named with their device: the legacy one
// synchronizes with every blocking stream of its device (cudaStreamNonBlocking streams, such as
// cohort's own, excepted); the per-thread one only orders the calling thread's work, and means
// the calling thread's stream wherever the ref is used: use it from the thread that named it.
//
//   void scale(cohort::stream_ref s, float* x, std::size_t n) {
//     cohort::launch(s, {.grid = blocks, .block = 256}, scale_kernel, x, n);
//   }
//
//   auto legacy = cohort::stream_ref::legacy_default(cohort::device_ref{0});
//   auto mine = cohort::stream_ref::per_thread_default(cohort::device_ref{0});
//   // A handle from another library, where null means the legacy default stream (PyTorch's
//   // current stream outside `torch.cuda.stream(...)`):
//   auto torch_current = cohort::stream_ref::borrow(cohort::device_ref{0}, handle);
#pragma once

#include "../devices/device_ref.cuh"
#include "../devices/scoped_device.cuh"
#include "../errors/argument_error.cuh"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort {

class event_ref;

class stream_ref {
 public:
  stream_ref(device_ref device, cudaStream_t handle) noexcept
      : handle_(handle)
      , device_(device) {}
  // Asks CUDA which device the stream belongs to (CUDA 12.8 and later). Not for the default
  // streams, which belong to whichever device is current: name their device (below).
  explicit stream_ref(cudaStream_t handle)
      : handle_(handle)
      , device_(0) {
    if (is_empty(handle)) detail::throw_invalid_argument("stream_ref", "handle", empty_problem);
    if (is_default(handle))
      detail::throw_invalid_argument("stream_ref", "handle",
                                     "is a default stream, which has no device of its own; use "
                                     "stream_ref::legacy_default(device) or "
                                     "stream_ref::per_thread_default(device).");
    int id = 0;
    check_cuda(cudaStreamGetDevice(handle, &id), "cudaStreamGetDevice");
    device_ = device_ref(id);
  }
  // The default streams of `device`, named.
  static stream_ref legacy_default(device_ref device) noexcept {
    return {device, cudaStreamLegacy};
  }
  static stream_ref per_thread_default(device_ref device) noexcept {
    return {device, cudaStreamPerThread};
  }
  // A stream handle from another library, where null means the legacy default stream.
  static stream_ref borrow(device_ref device, cudaStream_t handle) noexcept {
    return {device, handle == nullptr ? cudaStreamLegacy : handle};
  }

  // A literal 0 or nullptr is refused at compile time: name the default stream instead.
  stream_ref(int) = delete;
  stream_ref(std::nullptr_t) = delete;
  stream_ref(device_ref, int) = delete;
  stream_ref(device_ref, std::nullptr_t) = delete;

  cudaStream_t native_handle() const noexcept {
    return handle_;
  }
  device_ref device() const noexcept {
    return device_;
  }

  // Blocks the host until all work enqueued so far is done.
  // (Each call holds its device current: a runtime call made with no context current would make,
  // and create, the runtime's current device's primary context, not this stream's.)
  // Refused while the stream is being captured into a graph (nothing runs until a replay).
  void synchronize() const {
    refuse_empty("stream_ref::synchronize");
    scoped_device on(device_);
    if (is_capturing())
      throw std::logic_error("cohort::stream_ref::synchronize: the stream (device " +
                             std::to_string(device_.get()) +
                             ") is being captured into a CUDA graph: nothing runs until the "
                             "graph is launched. Synchronize after the capture ends.");
    check_cuda(cudaStreamSynchronize(handle_), "cudaStreamSynchronize", device_.get());
  }
  // True when all work enqueued so far is done; never blocks.
  bool ready() const {
    refuse_empty("stream_ref::ready");
    scoped_device on(device_);
    cudaError_t status = cudaStreamQuery(handle_);
    if (status == cudaErrorNotReady) {
      ignore_cuda_error(status);
      return false;
    }
    check_cuda(status, "cudaStreamQuery", device_.get());
    return true;
  }
  // True while the stream is being captured into a CUDA graph (its work is recorded, not run).
  // The legacy default stream never is (CUDA refuses to capture it), and asking about it while a
  // blocking stream of its device is captured is itself an error, so it is not asked.
  bool is_capturing() const {
    refuse_empty("stream_ref::is_capturing");
    if (handle_ == cudaStreamLegacy) return false;
    scoped_device on(device_);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(handle_, &status), "cudaStreamIsCapturing", device_.get());
    return status != cudaStreamCaptureStatusNone;
  }
  // Work enqueued after this waits for `event`'s last record, which may be on another device.
  // (A template so that this header needs no event_ref.cuh: event_ref.cuh includes this one.)
  template <class Event>
  requires std::is_base_of_v<event_ref, Event>
  void wait(const Event& event) const {
    refuse_empty("stream_ref::wait");
    scoped_device on(device_);
    check_cuda(cudaStreamWaitEvent(handle_, event.native_handle(), 0), "cudaStreamWaitEvent",
               device_.get());
  }

  // True for the legacy or the per-thread default stream.
  bool is_default() const noexcept {
    return is_default(handle_);
  }

  friend bool operator==(stream_ref a, stream_ref b) noexcept {
    return a.handle_ == b.handle_ && a.device_ == b.device_;
  }

  // What a stream with no handle is refused with: to CUDA a null stream is the legacy default
  // stream, which a moved-from cohort stream must not silently become.
  static constexpr std::string_view empty_problem =
      "has no CUDA stream (a moved-from or released cohort::stream, or a null cudaStream_t), which "
      "CUDA would take for the legacy default stream; pass the stream it was moved into, a stream "
      "of your own, or name the default stream: stream_ref::legacy_default(device).";
  static bool is_empty(cudaStream_t handle) noexcept {
    return handle == nullptr;
  }
  static bool is_default(cudaStream_t handle) noexcept {
    return handle == cudaStreamLegacy || handle == cudaStreamPerThread;
  }

 protected:
  void refuse_empty(std::string_view function) const {
    if (is_empty(handle_)) [[unlikely]]
      throw std::logic_error("cohort::" + std::string(function) + ": this stream (device " +
                             std::to_string(device_.get()) + ") " + std::string(empty_problem));
  }

  cudaStream_t handle_;
  device_ref device_;
};

namespace detail {

// Every call that takes a stream from its caller checks it first: a null handle would enqueue on
// the legacy default stream, which the caller did not name.
inline void require_stream(stream_ref stream, std::string_view function,
                           std::string_view argument = "stream") {
  if (stream_ref::is_empty(stream.native_handle())) [[unlikely]]
    throw_invalid_argument(function, argument, stream_ref::empty_problem);
}

} // namespace detail

} // namespace cohort
