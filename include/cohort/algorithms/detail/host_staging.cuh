// cohort/algorithms/detail/host_staging.cuh — page-locked host memory a sort stages its sorted runs
// in when its members have no peer path or too little device memory. It is mapped into every
// device's address space (unified addressing: the host pointer is the device pointer), so any
// member's kernels read it directly, and copies fill and drain it at the DMA engines' speed.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/device_group.cuh"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>

namespace cohort::detail {

// A number from a one-line file (cgroup v2's memory.max reads "max" when unlimited), or 0.
inline std::size_t number_in_file(const char* path) {
  std::ifstream in(path);
  unsigned long long value = 0;
  return in >> value ? static_cast<std::size_t>(value) : 0;
}

// What the host can still give without swapping: Linux's MemAvailable (or the free pages where
// /proc/meminfo cannot be read), and no more than this process's cgroup (v2) leaves under its
// limit, as in a container.
inline std::size_t available_host_bytes() {
  std::size_t available = 0;
  std::ifstream info("/proc/meminfo");
  for (std::string line; std::getline(info, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      available = static_cast<std::size_t>(kib) * 1024;
      break;
    }
  }
  if (available == 0) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    available = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : 0;
  }
  const std::size_t limit = number_in_file("/sys/fs/cgroup/memory.max");
  if (limit > 0) {
    const std::size_t used = number_in_file("/sys/fs/cgroup/memory.current");
    available = std::min(available, limit > used ? limit - used : 0);
  }
  return available;
}

// Staging that the host cannot give is out of memory, as the device scratch's shortfall is: a
// cuda_error with cudaErrorMemoryAllocation naming the call, member 0's device (whose context
// allocates the staging) and the bytes; `available` is what the host had, or unknown when
// cudaHostAlloc itself failed; `reason` (may be empty) says why the runs are staged.
[[noreturn]] inline void throw_host_staging_shortfall(
    std::string_view function, std::size_t bytes, std::optional<std::size_t> available, int device,
    std::string_view reason = {}, std::source_location where = std::source_location::current()) {
  std::string context(reason);
  context += reason.empty() ? "Staging" : "; staging";
  context += " the sorted runs in host memory needs " + std::to_string(bytes) +
             " bytes of page-locked host memory, and ";
  context += available ? "the host has " + std::to_string(*available) + " available"
                       : std::string("cudaHostAlloc could not get them");
  context += "; free host memory, raise the locked-memory limit, or spread the data over more "
             "members or machines.";
  throw cuda_error(cudaErrorMemoryAllocation,
                   "cohort::" + std::string(function) + " (page-locked host staging)", device,
                   where, context);
}

// `bytes` of page-locked host memory, portable to and mapped into every device. Freed only after
// every member's stream has finished what was enqueued on it: copies and kernels read and write
// it asynchronously, and nothing else says when they are done. That wait is bounded by the
// group's own queued work.
class host_staging {
 public:
  host_staging(std::size_t bytes, const device_group& group, std::string_view function)
      : group_(group) {
    if (bytes == 0) return;
    scoped_device on(group.device(0)); // cudaHostAlloc needs a context: member 0's
    void* p = nullptr;
    const cudaError_t status =
        cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (status != cudaSuccess) [[unlikely]] {
      // Out of page-locked memory reads as the precheck's shortfall would have.
      if (status == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw_host_staging_shortfall(function, bytes, std::nullopt, group.device(0).get());
      }
      check_cuda(status,
                 "cudaHostAlloc (" + std::string(function) + ", " + std::to_string(bytes) +
                     " bytes of host staging)",
                 group.device(0).get());
    }
    data_ = static_cast<unsigned char*>(p);
  }
  host_staging(const host_staging&) = delete;
  host_staging& operator=(const host_staging&) = delete;
  ~host_staging() {
    if (data_ == nullptr) return;
    // Each call with a member's device current (see on_device_quietly); the memory is freed even
    // where no device can be made current.
    for (std::size_t k = 0; k < group_.size(); ++k)
      on_device_quietly(group_.device(k), [&] {
        ignore_cuda_error(cudaStreamSynchronize(group_.stream(k).native_handle()));
      });
    on_device_quietly(
        group_.device(0), [&] { ignore_cuda_error(cudaFreeHost(data_)); },
        if_not_current::run_anyway);
  }
  unsigned char* data() const { return data_; }

 private:
  const device_group& group_;
  unsigned char* data_ = nullptr;
};

} // namespace cohort::detail
