// cohort/execution/detail/group_arguments.cuh — the checks of a device group's devices, borrowed
// streams and SM weights, before anything is made; and the SM count a group reads once.
#pragma once

#include "../../devices/device_ref.cuh"
#include "../../errors/argument_error.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../streams/stream_ref.cuh"

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

// Rejects an empty list, a device out of range and a device listed twice; `argument` names the
// list in the error.
inline void require_distinct(const std::vector<device_ref>& devices, std::string_view argument) {
  require_argument(!devices.empty(), "device_group", argument,
                   "the list is empty; a group needs at least one device.");
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      require_argument(!(devices[j] == devices[i]), "device_group", argument, [&] {
        return "device " + std::to_string(devices[i].get()) + " is listed twice (positions " +
               std::to_string(j) + " and " + std::to_string(i) +
               "). Use cohort::device_group::emulated(device, n) to run several logical "
               "devices on one GPU.";
      });
  for (device_ref d : devices)
    require_valid_device(d, "device_group", argument);
}

inline std::vector<device_ref> devices_of(const std::vector<stream_ref>& streams) {
  std::vector<device_ref> devices;
  devices.reserve(streams.size());
  for (std::size_t i = 0; i < streams.size(); ++i) {
    require_argument(
        !stream_ref::is_empty(streams[i].native_handle()), "device_group", "streams", [&] {
          return "stream " + std::to_string(i) + " " + std::string(stream_ref::empty_problem);
        });
    devices.push_back(streams[i].device());
  }
  return devices;
}

// A borrowed stream must be on the device it was named with: work enqueued on it runs there,
// whatever device cohort makes current. (The default streams belong to the device named.)
inline void require_on_its_device(stream_ref stream, std::size_t i) {
  if (stream.is_default()) return;
  int actual = 0;
  check_cuda(cudaStreamGetDevice(stream.native_handle(), &actual),
             "cudaStreamGetDevice (device_group streams)", stream.device().get());
  require_argument(actual == stream.device().get(), "device_group", "streams", [&] {
    return "stream " + std::to_string(i) + " was named with device " +
           std::to_string(stream.device().get()) + " but is a stream of device " +
           std::to_string(actual) + "; name each stream with its own device.";
  });
}

// An emulated group's SM weights: at least one, each finite and above zero; and a valid device.
inline void require_sm_weights(device_ref device, const std::vector<double>& sm_weights) {
  require_argument(!sm_weights.empty(), "device_group::emulated", "sm_weights",
                   "a group needs at least one logical device.");
  for (std::size_t k = 0; k < sm_weights.size(); ++k)
    if (!std::isfinite(sm_weights[k]) || !(sm_weights[k] > 0.0))
      throw_invalid_argument("device_group::emulated", "sm_weights",
                             "weight " + std::to_string(k) + " is " +
                                 std::to_string(sm_weights[k]) +
                                 "; every weight must be finite and greater than zero.");
  require_valid_device(device, "device_group::emulated", "device");
}

// The SMs of `device`: one attribute, not properties() (cudaGetDeviceProperties costs about a
// millisecond).
inline unsigned multiprocessors(device_ref device) {
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.get()),
             "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)", device.get());
  return static_cast<unsigned>(sms);
}

// A group moved from has no members (a group made has at least one): the calls that take a group
// check this first, so that the error names them, not a partition or a vector's index.
template <class Group>
std::size_t members_of(const Group& group, std::string_view function,
                       std::string_view argument = "group") {
  if (group.size() == 0)
    throw_invalid_argument(function, argument,
                           "has no members: it was moved from. Use the group it was moved into.");
  return group.size();
}

// Refuses, naming `function`, work that cannot be captured when any member's stream is being
// captured into a graph; nothing is enqueued. `instead` says what to use.
template <class Group>
void refuse_capture(const Group& group, std::string_view function, std::string_view why,
                    std::string_view instead) {
  for (std::size_t i = 0; i < group.size(); ++i)
    if (group.stream(i).is_capturing())
      throw std::logic_error("cohort::" + std::string(function) + ": member " + std::to_string(i) +
                             "'s stream (device " + std::to_string(group.device(i).get()) +
                             ") is being captured into a CUDA graph, and " + std::string(why) +
                             ". Nothing was enqueued. " + std::string(instead));
}

} // namespace cohort::detail
