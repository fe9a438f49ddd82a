// cohort/algorithms/detail/host_staging.cuh — page-locked host memory a sort stages its sorted runs
// in when its members have no peer path or too little device memory. It is mapped into every
// device's address space (unified addressing: the host pointer is the device pointer), so any
// member's kernels read it directly, and copies fill and drain it at the DMA engines' speed.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../execution/device_group.cuh"

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

namespace cohort::detail {

// What the host can still give without swapping: Linux's MemAvailable, or the free pages where
// /proc/meminfo cannot be read.
inline std::size_t available_host_bytes() {
  std::ifstream info("/proc/meminfo");
  for (std::string line; std::getline(info, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1)
      return static_cast<std::size_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : 0;
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
    check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped),
               "cudaHostAlloc (" + std::string(function) + ", " + std::to_string(bytes) +
                   " bytes of host staging)",
               group.device(0).get());
    data_ = static_cast<unsigned char*>(p);
  }
  host_staging(const host_staging&) = delete;
  host_staging& operator=(const host_staging&) = delete;
  ~host_staging() {
    if (data_ == nullptr) return;
    for (std::size_t k = 0; k < group_.size(); ++k)
      ignore_cuda_error(cudaStreamSynchronize(group_.stream(k).native_handle()));
    ignore_cuda_error(cudaFreeHost(data_));
  }
  unsigned char* data() const { return data_; }

 private:
  const device_group& group_;
  unsigned char* data_ = nullptr;
};

} // namespace cohort::detail
