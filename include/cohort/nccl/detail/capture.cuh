// cohort/nccl/detail/capture.cuh — refusing, by name and before anything is enqueued, what a CUDA
// graph capture cannot hold.
#pragma once

#include "../../errors/cuda_error.cuh"
#include "../../streams/stream_ref.cuh"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort::detail {

// cudaStreamIsCapturing is allowed during a capture in every mode (it does not invalidate it).
inline bool capturing(stream_ref stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream.native_handle(), &status), "cudaStreamIsCapturing",
             stream.device().get());
  return status != cudaStreamCaptureStatusNone;
}

// Throws std::logic_error naming `function`: `stream` is being captured, and `why` says what
// cannot be captured and what to do instead.
[[noreturn]] inline void throw_capture_refused(stream_ref stream, std::string_view function,
                                               std::string_view why) {
  throw std::logic_error("cohort::" + std::string(function) + ": the stream on device " +
                         std::to_string(stream.device().get()) +
                         " is being captured into a CUDA graph, and " + std::string(why));
}

inline void refuse_capture(stream_ref stream, std::string_view function, std::string_view why) {
  if (capturing(stream)) throw_capture_refused(stream, function, why);
}

} // namespace cohort::detail
