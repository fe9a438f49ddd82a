// cohort/devices/scoped_device.cuh — make a device current for a scope, then restore the old one.
//
// cohort never leaves the calling thread's current device changed: every call that needs a
// current device (allocation, stream creation, launches) holds one of these.
//
//   {
//     cohort::scoped_device on(cohort::device_ref{1});
//     my_kernel<<<grid, block, 0, stream>>>(...);
//   } // the previous current device is back
#pragma once

#include "device_ref.cuh"

namespace cohort {

class scoped_device {
public:
  explicit scoped_device(device_ref device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice", device.get());
    if (previous_ != device.get()) check_cuda(cudaSetDevice(device.get()), "cudaSetDevice", device.get());
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
};

} // namespace cohort
