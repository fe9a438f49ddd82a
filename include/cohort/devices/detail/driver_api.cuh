// cohort/devices/detail/driver_api.cuh — the few CUDA driver functions cohort needs for its
// current-context bookkeeping, fetched at run time through the runtime
// (cudaGetDriverEntryPointByVersion), so that nothing links against libcuda.
#pragma once

#include "../../errors/cuda_error.cuh"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>

namespace cohort::detail {

// The driver's entry point for `symbol` (as of the CUDA this was compiled with), or null where
// the driver lacks it.
inline void* driver_entry_point(const char* symbol) noexcept {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(symbol, &p, CUDART_VERSION, cudaEnableDefault, &found);
  if (status != cudaSuccess) ignore_cuda_error(status);
  return status == cudaSuccess && found == cudaDriverEntryPointSuccess ? p : nullptr;
}

struct context_api {
  decltype(&::cuCtxGetCurrent) get_current = nullptr;
  decltype(&::cuCtxSetCurrent) set_current = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) primary_state = nullptr;
  bool complete = false; // all but primary_state, which only tests use

  static const context_api& get() noexcept {
    static const context_api api = [] {
      context_api a;
      a.get_current =
          reinterpret_cast<decltype(a.get_current)>(driver_entry_point("cuCtxGetCurrent"));
      a.set_current =
          reinterpret_cast<decltype(a.set_current)>(driver_entry_point("cuCtxSetCurrent"));
      a.device_get = reinterpret_cast<decltype(a.device_get)>(driver_entry_point("cuDeviceGet"));
      a.primary_retain = reinterpret_cast<decltype(a.primary_retain)>(
          driver_entry_point("cuDevicePrimaryCtxRetain"));
      a.primary_state = reinterpret_cast<decltype(a.primary_state)>(
          driver_entry_point("cuDevicePrimaryCtxGetState"));
      a.complete = a.get_current != nullptr && a.set_current != nullptr &&
                   a.device_get != nullptr && a.primary_retain != nullptr;
      return a;
    }();
    return api;
  }
};

// The calling thread's current context (null when none is), or null where the driver cannot say.
inline CUcontext current_context() noexcept {
  CUcontext context = nullptr;
  const context_api& api = context_api::get();
  if (api.get_current == nullptr || api.get_current(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

inline constexpr int primary_context_slots = 256; // devices whose primary context is cached

// `ordinal`'s primary context (the runtime's context for that device), retained once for the
// life of the process, as the runtime itself retains it: never released, so that no scope can
// drop it to a count of zero and destroy what the runtime keeps in it. Throws where the driver
// refuses it (a device in prohibited compute mode, say).
inline CUcontext primary_context(int ordinal) {
  static std::array<std::atomic<CUcontext>, primary_context_slots> known{};
  if (ordinal >= 0 && ordinal < primary_context_slots)
    if (CUcontext c = known[ordinal].load(std::memory_order_acquire)) return c;
  const context_api& api = context_api::get();
  // The driver must be initialised (cuInit) before it names devices; asking the runtime for the
  // device count does that and creates no context.
  static const bool initialised = [] {
    int count = 0;
    ignore_cuda_error(cudaGetDeviceCount(&count));
    return true;
  }();
  (void)initialised;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUresult result = api.device_get(&device, ordinal);
  if (result == CUDA_SUCCESS) result = api.primary_retain(&context, device);
  if (result != CUDA_SUCCESS)
    throw cuda_error(static_cast<cudaError_t>(result), "cuDevicePrimaryCtxRetain", ordinal);
  if (ordinal < primary_context_slots) {
    // Two threads may both retain it; the one retain that is not kept costs a count, nothing more.
    CUcontext expected = nullptr;
    known[ordinal].compare_exchange_strong(expected, context, std::memory_order_acq_rel);
  }
  return context;
}

} // namespace cohort::detail
