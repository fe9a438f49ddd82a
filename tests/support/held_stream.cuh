// A stream held busy until the test lets it go: what a test needs to see that a call returned (or
// refused) without waiting for the GPU, as a state rather than a time. A time bound ("returned
// within 200 ms") fails on a loaded machine; a held stream is still busy when the call returns, or
// the call waited for it, whatever the machine's speed.
#pragma once

#include "kernels.cuh"

#include <cohort/cohort.cuh>

#include <stdexcept>

namespace cohort::testing {

// Spins until `*release` is set, or `limit_ns` passes (then sets `*timed_out`): the limit only
// keeps a wrong implementation that waits for the stream from hanging the run. (A template, so
// that the tests that include this header share one definition.)
template <int = 0>
__global__ void hold_until_released(const volatile int* release, volatile int* timed_out,
                                    unsigned long long limit_ns) {
  const unsigned long long start = global_nanoseconds();
  while (*release == 0) {
    if (global_nanoseconds() - start > limit_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

// Holds `s` from construction until release() (or the end of the scope) with a kernel that waits
// for a flag in mapped pinned memory, 30 s at most. Work enqueued on `s` afterwards runs after
// the release. Load any kernel that is to run while the stream is held before holding it:
// loading a kernel can wait for the device's running ones.
class held_stream {
 public:
  explicit held_stream(stream_ref s, unsigned long long limit_ns = 30'000'000'000ull)
      : stream_(s) {
    scoped_device on(s.device());
    void* flags = nullptr;
    if (cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable) !=
        cudaSuccess)
      throw std::runtime_error("held_stream: cudaHostAlloc failed");
    flags_ = static_cast<volatile int*>(flags);
    flags_[0] = 0; // release
    flags_[1] = 0; // timed out
    void* on_device = nullptr;
    if (cudaHostGetDevicePointer(&on_device, flags, 0) != cudaSuccess) {
      (void)cudaFreeHost(flags);
      throw std::runtime_error("held_stream: cudaHostGetDevicePointer failed");
    }
    auto* device_flags = static_cast<int*>(on_device);
    launch(s, {.grid = 1, .block = 1}, hold_until_released<>, device_flags, device_flags + 1,
           limit_ns);
  }
  // Still held: the kernel has neither been released nor timed out.
  bool busy() const { return !stream_.ready() && flags_[1] == 0; }
  // The kernel gave up waiting: whatever the test did before release() waited for the stream.
  bool timed_out() const { return flags_[1] != 0; }
  // Lets the kernel end; does not wait for it (work queued behind it may wait for other streams).
  void release() { flags_[0] = 1; }
  ~held_stream() {
    release();
    try {
      stream_.synchronize();
    } catch (...) {
    }
    (void)cudaFreeHost(const_cast<int*>(flags_));
  }
  held_stream(const held_stream&) = delete;
  held_stream& operator=(const held_stream&) = delete;

 private:
  stream_ref stream_;
  volatile int* flags_ = nullptr;
};

} // namespace cohort::testing
