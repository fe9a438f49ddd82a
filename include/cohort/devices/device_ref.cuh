// cohort/devices/device_ref.cuh — a GPU named by its id, and the list of visible GPUs.
//
// `device_ref` is a plain value (it owns nothing); every cohort type that lives on a GPU answers
// `device()` with one. A machine with no driver or no GPU has zero devices, not an error:
//
//   for (cohort::device_ref d : cohort::devices())
//     std::printf("GPU %d\n", d.get());
//   if (cohort::device_count() == 0) std::puts("no GPU visible");
#pragma once

#include "../errors/argument_error.cuh"
#include "../errors/cuda_error.cuh"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace cohort {

class device_ref {
public:
  constexpr explicit device_ref(int id) noexcept : id_(id) {}
  constexpr int get() const noexcept { return id_; }
  friend constexpr bool operator==(device_ref, device_ref) noexcept = default;
  friend constexpr auto operator<=>(device_ref, device_ref) noexcept = default;

private:
  int id_;
};

// The number of visible GPUs; 0 where there is no driver or no GPU (never throws for that).
inline int device_count() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
      status == cudaErrorInitializationError) {
    ignore_cuda_error(status);
    return 0;
  }
  check_cuda(status, "cudaGetDeviceCount");
  return count;
}

// Every visible GPU, in id order.
inline std::vector<device_ref> devices() {
  std::vector<device_ref> all;
  const int count = device_count();
  all.reserve(static_cast<std::size_t>(count));
  for (int id = 0; id < count; ++id)
    all.emplace_back(id);
  return all;
}

namespace detail {

inline void require_valid_device(device_ref device, std::string_view function,
                                 std::string_view argument) {
  const int count = device_count();
  if (device.get() < 0 || device.get() >= count)
    throw_invalid_argument(function, argument,
                           "device " + std::to_string(device.get()) + " is out of range: " +
                               std::to_string(count) + " GPU(s) visible.");
}

} // namespace detail
} // namespace cohort
