// cohort/algorithms/detail/scratch.cuh — the per-member scratch of scan and sort: checked against
// what each device can still hand out before any work is enqueued, then carved from one
// stream-ordered allocation per member.
#pragma once

#include "../../devices/properties.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../errors/argument_error.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/device_group.cuh"
#include "../../memory/device_buffer.cuh"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

inline constexpr std::size_t scratch_alignment = 256;

inline std::size_t align_up(std::size_t bytes) {
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

// What `device` can still allocate: cudaMemGetInfo's free bytes plus what its stream-ordered pool
// holds unused (buffers freed on a stream stay in the pool until a synchronization releases them,
// and cudaMallocAsync reuses them first).
inline std::size_t allocatable_bytes(device_ref device) {
  const free_and_total info = memory_info(device);
  scoped_device on(device);
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetMemPool(&pool, device.get()), "cudaDeviceGetMemPool", device.get());
  unsigned long long reserved = 0, used = 0;
  check_cuda(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
             "cudaMemPoolGetAttribute(ReservedMemCurrent)", device.get());
  check_cuda(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used),
             "cudaMemPoolGetAttribute(UsedMemCurrent)", device.get());
  return info.free + static_cast<std::size_t>(reserved > used ? reserved - used : 0);
}

// Why member k's `need[k]` bytes of scratch do not fit, naming the member, its device and the
// bytes (members sharing a device, as in an emulated group, add up), or "" when they all fit.
// Nothing to say while a member's stream is being captured: the scratch is allocated when the
// graph is launched, not now (and cudaMemGetInfo is no call to make inside a global-mode capture).
inline std::string scratch_shortfall(const device_group& group,
                                     const std::vector<std::size_t>& need) {
  for (std::size_t k = 0; k < group.size(); ++k)
    if (group.stream(k).is_capturing()) return {};
  std::vector<device_ref> seen;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const device_ref device = group.device(k);
    bool first = true;
    for (device_ref d : seen)
      first = first && !(d == device);
    if (!first) continue;
    seen.push_back(device);
    std::size_t total = 0, largest = 0, largest_rank = k;
    for (std::size_t j = k; j < group.size(); ++j)
      if (group.device(j) == device) {
        total += need[j];
        if (need[j] > largest) largest = need[j], largest_rank = j;
      }
    if (total == 0) continue;
    const std::size_t available = allocatable_bytes(device);
    if (total <= available) continue;
    return "member " + std::to_string(largest_rank) + " (device " + std::to_string(device.get()) +
           ") needs " + std::to_string(largest) + " bytes of scratch, and the members on device " +
           std::to_string(device.get()) + " need " + std::to_string(total) + " in all, but only " +
           std::to_string(available) + " bytes can be allocated there";
  }
  return {};
}

// Throws std::invalid_argument with scratch_shortfall's reason when the scratch does not fit.
inline void require_scratch_fits(const device_group& group, const std::vector<std::size_t>& need,
                                 std::string_view function, std::string_view argument) {
  const std::string shortfall = scratch_shortfall(group, need);
  if (!shortfall.empty())
    throw_invalid_argument(function, argument,
                           shortfall + "; free memory, or spread the data over more members.");
}

// One member's scratch: slices of one allocation, each aligned for any type.
class scratch {
 public:
  scratch(std::size_t bytes, stream_ref stream)
      : memory_(bytes, stream) {}
  template <class T>
  T* take(std::size_t count) {
    T* p = reinterpret_cast<T*>(memory_.data() + used_);
    used_ += align_up(count * sizeof(T));
    return count == 0 ? nullptr : p;
  }
  void* rest() { return memory_.data() + used_; }

 private:
  device_buffer<unsigned char> memory_;
  std::size_t used_ = 0;
};

} // namespace cohort::detail
