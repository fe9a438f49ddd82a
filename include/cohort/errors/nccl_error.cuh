// cohort/errors/nccl_error.cuh — the exception every failed NCCL call becomes.
//
// Like `cuda_error`, an `nccl_error` names the call, the device and, since NCCL errors are often
// caused by another process, the rank; its message includes NCCL's own last error text:
//
//   cohort::check_nccl(ncclCommInitRank(&comm, n, id, rank), "ncclCommInitRank", device, rank);
#pragma once

#include "cuda_error.cuh"

#include <nccl.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort {

inline constexpr int no_rank = -1;

namespace detail {

inline std::string_view nccl_advice(ncclResult_t status) noexcept {
  switch (status) {
  case ncclUnhandledCudaError:
    return "A CUDA call inside NCCL failed: check the device with compute-sanitizer.";
  case ncclSystemError:
    return "A system call failed (sockets, shared memory): check NCCL_DEBUG=WARN output.";
  case ncclInternalError:
    return "NCCL hit an internal error: rerun with NCCL_DEBUG=INFO.";
  case ncclInvalidArgument:
  case ncclInvalidUsage:
    return "The call's arguments do not fit this communicator: check counts, types and ranks.";
  case ncclRemoteError:
    return "Another rank failed or left: check its output; the communicator must be aborted.";
  default:
    return {};
  }
}

inline std::string nccl_message(ncclResult_t status, std::string_view call, int device, int rank,
                                const std::source_location& where) {
  std::string text(call);
  text += " failed";
  if (device != no_device) text += " on device " + std::to_string(device);
  if (rank != no_rank) text += " (rank " + std::to_string(rank) + ")";
  text += ": ";
  text += ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    text += " [";
    text += last;
    text += "]";
  }
  text += " at " + where_text(where) + ".";
  if (auto hint = nccl_advice(status); !hint.empty()) {
    text += ' ';
    text += hint;
  }
  return text;
}

} // namespace detail

class nccl_error : public std::runtime_error {
public:
  nccl_error(ncclResult_t status, std::string_view call, int device, int rank,
             std::source_location where = std::source_location::current())
      : std::runtime_error(detail::nccl_message(status, call, device, rank, where))
      , status_(status)
      , call_(call)
      , device_(device)
      , rank_(rank)
      , where_(where) {}

  ncclResult_t status() const noexcept { return status_; }
  const std::string& call() const noexcept { return call_; }
  int device() const noexcept { return device_; }
  int rank() const noexcept { return rank_; }
  const std::source_location& where() const noexcept { return where_; }

private:
  ncclResult_t status_;
  std::string call_;
  int device_;
  int rank_;
  std::source_location where_;
};

// Throws `nccl_error` unless `status` is ncclSuccess. ncclInProgress is success for the
// non-blocking calls that return it; the caller polls for completion.
inline void check_nccl(ncclResult_t status, std::string_view call, int device = no_device,
                       int rank = no_rank,
                       std::source_location where = std::source_location::current()) {
  if (status != ncclSuccess && status != ncclInProgress) [[unlikely]]
    throw nccl_error(status, call, device, rank, where);
}

} // namespace cohort
