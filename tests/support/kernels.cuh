// Small kernels the GPU tests use to make ordering observable.
#pragma once

#include <cohort/cohort.cuh>

#include <cstdint>

namespace cohort::testing {

__device__ inline unsigned long long global_nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins ~`nanoseconds`, then writes `value` to every element: a late writer that a missing
// wait would let a reader overtake.
template <class T>
__global__ void write_after_delay(T* out, std::size_t n, T value, unsigned long long nanoseconds) {
  // %globaltimer counts real nanoseconds (__nanosleep alone may sleep less than asked).
  const unsigned long long start = global_nanoseconds();
  while (global_nanoseconds() - start < nanoseconds)
    __nanosleep(1000);
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = value;
}

// out[i] = in[i] + 1 over n elements.
template <class T>
__global__ void add_one(const T* in, T* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = in[i] + T(1);
}

template <class T>
void launch_write_after_delay(stream_ref s, T* out, std::size_t n, T value,
                              unsigned long long nanoseconds) {
  launch(s, {.grid = 64, .block = 256}, write_after_delay<T>, out, n, value, nanoseconds);
}

template <class T>
void launch_add_one(stream_ref s, const T* in, T* out, std::size_t n) {
  launch(s, {.grid = 128, .block = 256}, add_one<T>, in, out, n);
}

} // namespace cohort::testing
