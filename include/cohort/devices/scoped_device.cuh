// cohort/devices/scoped_device.cuh — make a device current for a scope, then restore the old one.
//
// cohort never leaves the calling thread's current device changed: every call that needs a
// current device (allocation, stream creation, launches) holds one of these.
//
//   {
//     cohort::scoped_device on(cohort::device_ref{1});
//     my_kernel<<<grid, block, 0, stream>>>(x, n); // (cohort::launch does this for you)
//   } // the previous current device is back
#pragma once

#include "device_ref.cuh"

namespace cohort {

class scoped_device {
public:
  explicit scoped_device(device_ref device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice", device.get());
    current_ = previous_;
    set(device);
  }
  // Makes `device` current for the rest of the scope (the one before the scope still comes back
  // at its end): one scope for a loop over devices instead of one per device. It skips the switch
  // when this scope made `device` current last, so code in the scope that changes the current
  // device must change it back (as a nested scoped_device does).
  void set(device_ref device) {
    if (current_ == device.get()) return;
    check_cuda(cudaSetDevice(device.get()), "cudaSetDevice", device.get());
    current_ = device.get();
  }
  ~scoped_device() {
    int now = previous_;
    ignore_cuda_error(cudaGetDevice(&now));
    if (now != previous_) ignore_cuda_error(cudaSetDevice(previous_));
  }
  scoped_device(const scoped_device&) = delete;
  scoped_device& operator=(const scoped_device&) = delete;

private:
  int previous_ = 0;
  int current_ = 0; // as this scope last set it
};

} // namespace cohort
