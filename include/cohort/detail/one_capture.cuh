// cohort/detail/one_capture.cuh — the check, for calls whose work on several streams
// waits across them, that the streams are all in one capture or all outside any: otherwise part
// of the call would run now and part only when a graph is launched, each waiting for the other.
#pragma once

#include "../devices/scoped_device.cuh"
#include "../errors/cuda_error.cuh"
#include "../streams/stream_ref.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// A stream's capture: whether one is active, and which.
struct capture_state {
  bool active = false;
  unsigned long long id = 0;
  friend bool operator==(const capture_state&, const capture_state&) = default;
};

inline capture_state capture_of(stream_ref stream, std::string_view function) {
  if (stream.native_handle() == cudaStreamLegacy) return {}; // never captured (stream_ref.cuh)
  scoped_device on(stream.device());
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  capture_state state;
  const cudaError_t read = cudaStreamGetCaptureInfo(stream.native_handle(), &status, &state.id);
  if (read != cudaSuccess) [[unlikely]] // the call's name is text built only for the error
    check_cuda(read, "cudaStreamGetCaptureInfo (" + std::string(function) + ")",
               stream.device().get());
  state.active = status != cudaStreamCaptureStatusNone;
  if (!state.active) state.id = 0;
  return state;
}

// A stream with its capture already read (for callers that read it to decide which stream counts).
struct stream_capture {
  stream_ref stream;
  capture_state state;
};

inline stream_capture read_capture(stream_ref stream, std::string_view function) {
  return {stream, capture_of(stream, function)};
}
inline stream_capture read_capture(const stream_capture& known, std::string_view) {
  return known;
}

// Throws std::logic_error naming `function` and the first member whose stream is not in member
// 0's capture (or is in one where member 0's is not), before anything is enqueued. Member i's
// stream is stream_of(i), for i < members (a stream_ref, or a stream_capture already read).
// Returns whether they are being captured (false for no members), so that the caller need not ask
// again.
template <class StreamOf>
bool require_one_capture(std::size_t members, StreamOf stream_of, std::string_view function) {
  bool first_capturing = false;
  unsigned long long first_id = 0;
  int first_device = 0;
  for (std::size_t i = 0; i < members; ++i) {
    const auto [stream, capture] = read_capture(stream_of(i), function);
    const auto [capturing, id] = capture;
    if (i == 0) {
      first_capturing = capturing;
      first_id = id;
      first_device = stream.device().get();
    } else if (capturing != first_capturing || (capturing && id != first_id)) {
      auto state = [](bool c) { return c ? "is being captured" : "is not being captured"; };
      throw std::logic_error(
          "cohort::" + std::string(function) + ": member 0's stream (device " +
          std::to_string(first_device) + ") " + state(first_capturing) + " and member " +
          std::to_string(i) + "'s (device " + std::to_string(stream.device().get()) + ") " +
          (capturing == first_capturing ? "is in another capture" : state(capturing)) +
          ": its members' work would wait for each other for ever. Nothing was enqueued. "
          "Capture every member's stream in one capture (group_graph::capture forks them all), "
          "or none.");
    }
  }
  return first_capturing;
}

inline bool require_one_capture(const std::vector<stream_ref>& streams, std::string_view function) {
  return require_one_capture(
      streams.size(), [&](std::size_t i) { return streams[i]; }, function);
}

} // namespace cohort::detail
