// cohort/devices/scoped_device.cuh — make a device current for a scope, then restore what was
// current before.
//
// cohort never leaves the calling thread's current device changed: every call that needs a
// current device (allocation, stream creation, launches) holds one of these.
//
//   {
//     cohort::scoped_device on(cohort::device_ref{1});
//     my_kernel<<<grid, block, 0, stream>>>(x, n); // (cohort::launch does this for you)
//   } // the previous current context is back
//
// It works on the thread's current *context* through the driver (entry points fetched at run
// time, no link against libcuda): it makes the device's primary context (the runtime's) current
// with cuCtxSetCurrent, and at the end makes current again whatever was, a caller's own
// non-primary context or none at all. cudaSetDevice is not called (but where a driver lacks those
// entry points, as none since CUDA 12 does): since CUDA 12 it creates the device's primary
// context, so restoring with it would give a process that works on GPU 1 only a context, and
// memory, on GPU 0; and it changes the runtime's current device, which the next runtime call of
// the caller would use where no context is current.
#pragma once

#include "detail/driver_api.cuh"
#include "device_ref.cuh"

namespace cohort {

class scoped_device {
 public:
  explicit scoped_device(device_ref device) {
    const detail::context_api& api = detail::context_api::get();
    if (api.complete) {
      // Before the driver is initialised no context can be current.
      if (const CUresult r = api.get_current(&previous_context_); r != CUDA_ERROR_NOT_INITIALIZED)
        check_driver_call(r, "cuCtxGetCurrent", device.get());
    } else {
      check_cuda(cudaGetDevice(&previous_device_), "cudaGetDevice", device.get());
    }
    set(device);
  }
  // Makes `device` current for the rest of the scope (what was current before the scope still
  // comes back at its end): one scope for a loop over devices instead of one per device. It skips
  // the switch when this scope made `device` current last, so code in the scope that changes the
  // current device must change it back (as a nested scoped_device does).
  void set(device_ref device) {
    if (current_ == device.get()) return;
    const detail::context_api& api = detail::context_api::get();
    if (api.complete)
      check_driver_call(api.set_current(detail::primary_context(device.get())), "cuCtxSetCurrent",
                        device.get());
    else
      check_cuda(cudaSetDevice(device.get()), "cudaSetDevice", device.get());
    current_ = device.get();
  }
  ~scoped_device() {
    if (current_ < 0) return; // never switched
    const detail::context_api& api = detail::context_api::get();
    if (api.complete) {
      (void)api.set_current(previous_context_);
      return;
    }
    int now = previous_device_;
    ignore_cuda_error(cudaGetDevice(&now));
    if (now != previous_device_) ignore_cuda_error(cudaSetDevice(previous_device_));
  }
  scoped_device(const scoped_device&) = delete;
  scoped_device& operator=(const scoped_device&) = delete;

 private:
  static void check_driver_call(CUresult result, const char* call, int device) {
    if (result != CUDA_SUCCESS) throw cuda_error(static_cast<cudaError_t>(result), call, device);
  }

  CUcontext previous_context_ = nullptr; // where the driver's context functions exist
  int previous_device_ = 0;              // elsewhere
  int current_ = -1;                     // as this scope last set it; -1 before the first set
};

namespace detail {

// What on_device_quietly does where the device cannot be made current (its context is gone).
enum class if_not_current { skip, run_anyway };

// Runs `call()` with `device` current, then makes current again what was: for destructors and
// unwinding, which must neither throw nor, with no context current, let the runtime make (and
// create) GPU 0's primary context. Where `device` cannot be made current, `call()` is skipped or,
// for what must happen all the same (freeing host memory, ending an NCCL group), run anyway.
// `call` reports its own errors (it ignores them or keeps them): one that throws is ignored.
template <class Call>
void on_device_quietly(device_ref device, Call&& call,
                       if_not_current otherwise = if_not_current::skip) noexcept {
  bool current = false;
  try {
    scoped_device on(device);
    current = true;
    call();
  } catch (...) {
  }
  if (!current && otherwise == if_not_current::run_anyway) try {
      call();
    } catch (...) {
    }
}

} // namespace detail

} // namespace cohort
