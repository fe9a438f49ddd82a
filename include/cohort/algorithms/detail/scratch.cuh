// cohort/algorithms/detail/scratch.cuh — the per-member scratch of scan and sort: checked against
// what each device can still hand out before any work is enqueued, then carved from one
// stream-ordered allocation per member. Scratch that does not fit is out of memory (a cuda_error
// with cudaErrorMemoryAllocation naming the call, the device and the bytes), as the allocation
// itself would have reported it, only before anything was enqueued.
#pragma once

#include "../../devices/properties.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "../../memory/device_buffer.cuh"

#include <cstddef>
#include <optional>
#include <source_location>
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

// A device whose members' scratch does not fit: the member that needs the most there, and the
// bytes. Members sharing a device (as in an emulated group) add up.
struct scratch_shortfall {
  std::size_t member = 0;
  int device = no_device;
  std::size_t needs = 0;     // the member's scratch
  std::size_t total = 0;     // every member's on the device
  std::size_t available = 0; // what the device can allocate

  // Made only where a shortfall was found.
  std::string text() const {
    return "member " + std::to_string(member) + " (device " + std::to_string(device) + ") needs " +
           std::to_string(needs) + " bytes of scratch, and the members on device " +
           std::to_string(device) + " need " + std::to_string(total) + " in all, but only " +
           std::to_string(available) + " bytes can be allocated there";
  }
};

// The first device whose members' `need[k]` bytes do not fit, or nothing when they all fit.
// Nothing while a member's stream is being captured: the scratch is allocated when the graph is
// launched, not now (and cudaMemGetInfo is no call to make inside a global-mode capture). Only
// members that allocate from the device's pool are checked: another memory resource (a caching
// allocator holds memory the driver counts as used) answers for itself when it is asked.
inline std::optional<scratch_shortfall>
find_scratch_shortfall(const device_group& group, const std::vector<std::size_t>& need) {
  for (std::size_t k = 0; k < group.size(); ++k)
    if (group.stream(k).is_capturing()) return std::nullopt;
  std::vector<device_ref> seen;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const device_ref device = group.device(k);
    bool first = true;
    for (device_ref d : seen)
      first = first && !(d == device);
    if (!first) continue;
    seen.push_back(device);
    scratch_shortfall s{k, device.get(), 0, 0, 0};
    for (std::size_t j = k; j < group.size(); ++j)
      if (group.device(j) == device && group_memory_access::uses_device_pool(group, j)) {
        s.total += need[j];
        if (need[j] > s.needs) s.needs = need[j], s.member = j;
      }
    if (s.total == 0) continue;
    s.available = allocatable_bytes(device);
    if (s.total > s.available) return s;
  }
  return std::nullopt;
}

// Throws the out-of-memory cuda_error for `shortfall`, naming `function`'s scratch, the device and
// the bytes; `advice` (may be empty) says what to do.
[[noreturn]] inline void
throw_scratch_shortfall(const scratch_shortfall& shortfall, std::string_view function,
                        std::string_view advice,
                        std::source_location where = std::source_location::current()) {
  std::string context = "Scratch: " + shortfall.text();
  context += advice.empty() ? "." : "; ";
  context += advice;
  throw cuda_error(cudaErrorMemoryAllocation, "cohort::" + std::string(function) + " (scratch)",
                   shortfall.device, where, context);
}

// Throws the out-of-memory cuda_error when the members' scratch does not fit.
inline void require_scratch_fits(const device_group& group, const std::vector<std::size_t>& need,
                                 std::string_view function,
                                 std::source_location where = std::source_location::current()) {
  if (const std::optional<scratch_shortfall> shortfall = find_scratch_shortfall(group, need))
      [[unlikely]]
    throw_scratch_shortfall(*shortfall, function, "spread the data over more members.", where);
}

// Slices of one member's scratch, taken in order, each aligned for any type.
class scratch_slices {
 public:
  explicit scratch_slices(unsigned char* base) noexcept
      : at_(base) {}
  template <class T>
  T* take(std::size_t count) {
    T* p = reinterpret_cast<T*>(at_);
    at_ += align_up(count * sizeof(T));
    return count == 0 ? nullptr : p;
  }
  void* rest() const noexcept { return at_; }

 private:
  unsigned char* at_;
};

// One member's scratch for one call: one allocation (from the resource given), in slices.
class scratch {
 public:
  scratch(std::size_t bytes, stream_ref stream, memory_resource_ref resource)
      : memory_(bytes, stream, resource)
      , slices_(memory_.data()) {}
  template <class T>
  T* take(std::size_t count) {
    return slices_.take<T>(count);
  }
  void* rest() { return slices_.rest(); }

 private:
  device_buffer<unsigned char> memory_;
  scratch_slices slices_;
};

// The scratch `need` bytes per member from each member's kept scratch (member_cache), outside a
// capture: only members whose kept scratch must grow are checked against what their devices can
// give (before anything is allocated), then every member's is taken.
inline std::vector<unsigned char*> kept_scratch(const device_group& group,
                                                const std::vector<std::size_t>& need,
                                                scratch_source source, std::string_view function) {
  std::vector<std::size_t> growth(group.size(), 0);
  bool grows = false;
  for (std::size_t k = 0; k < group.size(); ++k)
    if (!group_memory_access::cache(group, k).holds(source, need[k]))
      growth[k] = need[k], grows = true;
  if (grows) require_scratch_fits(group, growth, function);
  std::vector<unsigned char*> base(group.size());
  for (std::size_t k = 0; k < group.size(); ++k) {
    const memory_resource_ref resource = source == scratch_source::device_pool
                                             ? default_memory_resource()
                                             : group_memory_access::scratch_resource(group, k);
    base[k] = group_memory_access::cache(group, k).scratch(source, need[k], group.stream(k),
                                                           resource, function);
  }
  return base;
}

} // namespace cohort::detail
