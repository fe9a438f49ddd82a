// cohort/errors/cuda_error.cuh — the exception every failed CUDA runtime call becomes.
//
// A `cuda_error` carries the status, the call that failed, the device it ran on and where in the
// source it was checked, and its message ends with what the user can do about it:
//
//   cohort::check_cuda(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync", device_id);
//   // throws cohort::cuda_error:
//   //   "cudaMallocAsync failed on device 1: out of memory (cudaErrorMemoryAllocation)
//   //    at buffer.cu:42. Free memory on that device or ask for less."
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort {

// The device of an error that is not tied to one device (cudaGetDeviceCount, say).
inline constexpr int no_device = -1;

namespace detail {

inline std::string where_text(const std::source_location& where) {
  std::string_view file = where.file_name();
  if (auto slash = file.find_last_of("/\\"); slash != std::string_view::npos)
    file.remove_prefix(slash + 1);
  return std::string(file) + ":" + std::to_string(where.line());
}

// Errors after which the CUDA context of the device is unusable: every later call on it fails.
constexpr bool is_sticky(cudaError_t status) noexcept {
  switch (status) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchTimeout:
  case cudaErrorECCUncorrectable:
    return true;
  default:
    return false;
  }
}

inline std::string_view advice(cudaError_t status) noexcept {
  if (is_sticky(status))
    return "The device's CUDA context is lost: every later call on it fails. Run the program "
           "under compute-sanitizer to find the faulting kernel, then restart the process.";
  switch (status) {
  case cudaErrorMemoryAllocation:
    return "Free memory on that device or ask for less.";
  case cudaErrorNoDevice:
  case cudaErrorInsufficientDriver:
    return "No usable GPU is visible: check the driver and CUDA_VISIBLE_DEVICES.";
  case cudaErrorInvalidDevice:
    return "The device id is out of range: cohort::device_count() says how many are visible.";
  case cudaErrorPeerAccessUnsupported:
    return "These two GPUs cannot access each other's memory: check cohort::link_between(a, b) "
           "or cohort::topology::of(devices).";
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorUnsupportedPtxVersion:
    return "The program has no code for this GPU: build with CMAKE_CUDA_ARCHITECTURES that "
           "include its compute capability.";
  case cudaErrorLaunchOutOfResources:
    return "The kernel asks for more registers or shared memory than a block may have.";
  default:
    return {};
  }
}

inline std::string cuda_message(cudaError_t status, std::string_view call, int device,
                                const std::source_location& where, std::string_view context) {
  std::string text(call);
  text += " failed";
  if (device != no_device) text += " on device " + std::to_string(device);
  text += ": ";
  text += cudaGetErrorString(status);
  text += " (";
  text += cudaGetErrorName(status);
  text += ") at " + where_text(where) + ".";
  if (auto hint = advice(status); !hint.empty()) {
    text += ' ';
    text += hint;
  }
  // Appended in place: gcc 12 at -O3 took `" " + std::string(context)` for an overlapping copy
  // (-Wrestrict), which failed users' -Werror builds.
  if (!context.empty()) {
    text += ' ';
    text += context;
  }
  return text;
}

} // namespace detail

class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t status, std::string_view call, int device,
             std::source_location where = std::source_location::current(),
             std::string_view context = {})
      : std::runtime_error(detail::cuda_message(status, call, device, where, context))
      , status_(status)
      , call_(call)
      , device_(device)
      , where_(where) {}

  cudaError_t status() const noexcept { return status_; }
  const std::string& call() const noexcept { return call_; }
  int device() const noexcept { return device_; }
  const std::source_location& where() const noexcept { return where_; }
  // True when the device's context is lost and the process must restart to use it again.
  bool context_lost() const noexcept { return detail::is_sticky(status_); }

 private:
  cudaError_t status_;
  std::string call_;
  int device_;
  std::source_location where_;
};

// The one checking function: throws `cuda_error` unless `status` is cudaSuccess.
inline void check_cuda(cudaError_t status, std::string_view call, int device = no_device,
                       std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) [[unlikely]] {
    // A non-sticky error stays recorded in the runtime and would be reported again by the next
    // cudaGetLastError: clear it so it surfaces once, here.
    if (!detail::is_sticky(status)) (void)cudaGetLastError();
    throw cuda_error(status, call, device, where);
  }
}

// Checks a kernel launch just made on the calling thread (launch errors are reported only through
// cudaGetLastError). `kernel` names the kernel for the message.
inline void check_launch(std::string_view kernel, int device,
                         std::source_location where = std::source_location::current()) {
  if (cudaError_t status = cudaGetLastError(); status != cudaSuccess) [[unlikely]]
    throw cuda_error(status, std::string("launch of ") + std::string(kernel), device, where);
}

// For destructors, which never throw: the status is dropped (and a non-sticky one cleared).
inline void ignore_cuda_error(cudaError_t status) noexcept {
  if (status != cudaSuccess && !detail::is_sticky(status)) (void)cudaGetLastError();
}

namespace detail {

// Before a call that launches through CUB on several members: CUB reports the thread's recorded
// error (cudaPeekAtLastError) as its launch's, so an error an earlier call left recorded would
// stop the call after its first members were enqueued. Reported here, before anything is
// enqueued, and cleared (a non-sticky one) so that it surfaces once.
inline void refuse_recorded_error(std::string_view function, int device,
                                  std::source_location where = std::source_location::current()) {
  const cudaError_t recorded = cudaPeekAtLastError();
  if (recorded == cudaSuccess) [[likely]]
    return;
  if (!detail::is_sticky(recorded)) (void)cudaGetLastError();
  throw cuda_error(recorded, std::string(function) + " (an error an earlier call left recorded)",
                   device, where,
                   "A CUDA call before this one failed and its error was never read with "
                   "cudaGetLastError; nothing of this call was enqueued. Check the return value "
                   "of every CUDA call, and read launch errors right after the launch.");
}

} // namespace detail

} // namespace cohort
