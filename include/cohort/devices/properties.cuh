// cohort/devices/properties.cuh — what a GPU is: name, compute capability, size and speed.
//
//   cohort::device_properties p = cohort::properties(cohort::device_ref{0});
//   std::printf("%s sm_%d%d, %d SMs, %.0f GB/s\n", p.name.c_str(), p.major, p.minor,
//               p.multiprocessors, p.peak_memory_bandwidth_bytes_per_s() / 1e9);
//   auto [free, total] = cohort::memory_info(cohort::device_ref{0});
//   std::printf("%zu of %zu bytes free\n", free, total);
#pragma once

#include "device_ref.cuh"
#include "scoped_device.cuh"

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace cohort {

struct device_properties {
  std::string name;
  int major = 0; // compute capability
  int minor = 0;
  int multiprocessors = 0;
  int clock_khz = 0;        // peak SM clock
  int memory_clock_khz = 0; // peak memory clock
  int memory_bus_width_bits = 0;
  std::size_t total_memory = 0; // bytes
  std::string pci_bus_id;       // "0000:1b:00.0", as nvidia-smi prints it

  // Datasheet-style peak (double data rate): a lead for weighting devices, not a measurement.
  double peak_memory_bandwidth_bytes_per_s() const noexcept {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_width_bits / 8.0);
  }
};

namespace detail {

inline device_properties query_properties(device_ref device) {
  cudaDeviceProp raw{};
  check_cuda(cudaGetDeviceProperties(&raw, device.get()), "cudaGetDeviceProperties", device.get());
  device_properties p;
  p.name = raw.name;
  p.major = raw.major;
  p.minor = raw.minor;
  p.multiprocessors = raw.multiProcessorCount;
  p.total_memory = raw.totalGlobalMem;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  check_cuda(cudaDeviceGetAttribute(&p.clock_khz, cudaDevAttrClockRate, device.get()),
             "cudaDeviceGetAttribute(cudaDevAttrClockRate)", device.get());
  check_cuda(cudaDeviceGetAttribute(&p.memory_clock_khz, cudaDevAttrMemoryClockRate, device.get()),
             "cudaDeviceGetAttribute(cudaDevAttrMemoryClockRate)", device.get());
  check_cuda(cudaDeviceGetAttribute(&p.memory_bus_width_bits, cudaDevAttrGlobalMemoryBusWidth,
                                    device.get()),
             "cudaDeviceGetAttribute(cudaDevAttrGlobalMemoryBusWidth)", device.get());
  char bus_id[32] = {};
  check_cuda(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device.get()), "cudaDeviceGetPCIBusId",
             device.get());
  p.pci_bus_id = bus_id;
  return p;
}

} // namespace detail

// Read from the driver once per device and process (they do not change while it runs): calls that
// weigh members by them (by_capability) ask on every call.
inline device_properties properties(device_ref device) {
  detail::require_valid_device(device, "properties", "device");
  static std::mutex lock;
  static std::map<int, device_properties> known;
  {
    const std::lock_guard<std::mutex> hold(lock);
    if (const auto found = known.find(device.get()); found != known.end()) return found->second;
  }
  device_properties p = detail::query_properties(device); // outside the lock: it may throw
  const std::lock_guard<std::mutex> hold(lock);
  return known.emplace(device.get(), std::move(p)).first->second;
}

struct free_and_total {
  std::size_t free = 0;  // bytes
  std::size_t total = 0; // bytes
};

// Free and total memory of `device` now (other processes' use included).
inline free_and_total memory_info(device_ref device) {
  detail::require_valid_device(device, "memory_info", "device");
  scoped_device on(device);
  free_and_total info;
  check_cuda(cudaMemGetInfo(&info.free, &info.total), "cudaMemGetInfo", device.get());
  return info;
}

} // namespace cohort
