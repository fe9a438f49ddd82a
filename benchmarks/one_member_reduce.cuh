// for_each_bench's reductions on a group of one against cub::DeviceReduce, 2^20 to 2^30 elements
// (the sizes that fit in 80% of GPU 0's free memory), three tables:
//   1. sums, minima and maxima to the host (cohort hands these to CUB): cohort's pending form,
//      multi_device_reduce(...).wait(), against CUB's reduction into device memory, a copy of
//      the value to pinned host memory and a wait for the stream; host-timed, each call to its
//      value (the goal: >= 1, what CUB costs);
//   2. the same into device memory: a device_result against CUB's output in device memory, event-
//      timed over batches of back-to-back calls, so that each side's host work overlaps the GPU's
//      as it would in a loop;
//   3. operators cohort keeps in order (the minimum and maximum of floating types, whose signed
//      zeros tie by position, and a user's operator it does not know) into device memory, against
//      cub::DeviceReduce::Reduce with the same operator.
// The group borrows the benchmark's stream, so there is no fork or join in the figures; both sides
// read the same memory, timed in turns (bench::paired_time_ms and its host-timed twin).
#pragma once

#include "timing.cuh"

#include <cub/device/device_reduce.cuh>
#include <cuda/functional>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace one_member {

// A sum cohort does not know (it keeps the order for it), for the third table.
struct user_sum {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};

template <class T>
struct fill_values {
  T* out;
  __device__ void operator()(std::size_t i) const {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    if constexpr (std::is_floating_point_v<T>)
      out[i] = T(double(h >> 11) * 0x1.0p-53);
    else
      out[i] = T(h % 1000);
  }
};

inline void check(cudaError_t e, const char* what) {
  cohort::check_cuda(e, what, 0);
}

// Median host microseconds of `a` and of `b` per call, each to its value: 61 calls of each in
// turns (bench::medians_in_turns) after 3 warm-ups.
inline std::pair<double, double> paired_host_us(const std::function<void()>& a,
                                                const std::function<void()>& b) {
  const auto us = bench::medians_in_turns(
      [](const std::function<void()>& call) {
        const auto t0 = std::chrono::steady_clock::now();
        call();
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
            .count();
      },
      {a, b}, 3, 61);
  return {us[0], us[1]};
}

enum class operation { sum, min, max, user_sum };

inline const char* name_of(operation op) {
  switch (op) {
  case operation::sum:
    return "sum";
  case operation::min:
    return "min";
  case operation::max:
    return "max";
  case operation::user_sum:
    return "a user's sum";
  }
  return "?";
}

// CUB's operator for `op`, and the init both sides use.
template <class T, operation Op>
auto cub_operator() {
  if constexpr (Op == operation::sum)
    return cuda::std::plus<>{};
  else if constexpr (Op == operation::min)
    return cuda::minimum<>{};
  else if constexpr (Op == operation::max)
    return cuda::maximum<>{};
  else
    return user_sum{};
}
template <class T, operation Op>
T init_of() {
  if constexpr (Op == operation::min) return std::numeric_limits<T>::max();
  if constexpr (Op == operation::max) return std::numeric_limits<T>::lowest();
  return T{};
}

// One row of each kind for T and `op` at n elements: cub us, cohort us, cub / cohort.
template <class T, operation Op>
void row(cohort::stream_ref s, std::size_t n, const char* type, int table) {
  cohort::device_buffer<T> x(n, s), out(1, s);
  cohort::for_each_n(s, n, fill_values<T>{x.data()});
  const auto op = cub_operator<T, Op>();
  const T init = init_of<T, Op>();
  std::size_t bytes = 0;
  auto cub_call = [&](void* temp) {
    if constexpr (Op == operation::sum)
      return cub::DeviceReduce::Sum(temp, bytes, x.data(), out.data(), n, s.native_handle());
    else if constexpr (Op == operation::min)
      return cub::DeviceReduce::Min(temp, bytes, x.data(), out.data(), n, s.native_handle());
    else if constexpr (Op == operation::max)
      return cub::DeviceReduce::Max(temp, bytes, x.data(), out.data(), n, s.native_handle());
    else
      return cub::DeviceReduce::Reduce(temp, bytes, x.data(), out.data(), n, op, init,
                                       s.native_handle());
  };
  check(cub_call(nullptr), "cub::DeviceReduce (size query)");
  cohort::device_buffer<unsigned char> temp(bytes, s);
  cohort::device_group one({s}); // borrows the stream: no fork or join
  const cohort::distributed_view<const T> xv(
      one, {cuda::std::span<const T>(static_cast<const T*>(x.data()), n)});
  cohort::device_result<T> into(one);
  T* pinned = nullptr;
  check(cudaMallocHost(&pinned, sizeof(T)), "cudaMallocHost");
  volatile T sink{};
  s.synchronize();
  double cub_us = 0, cohort_us = 0;
  if (table == 1) {
    std::tie(cub_us, cohort_us) = paired_host_us(
        [&] {
          check(cub_call(temp.data()), "cub::DeviceReduce");
          check(cudaMemcpyAsync(pinned, out.data(), sizeof(T), cudaMemcpyDeviceToHost,
                                s.native_handle()),
                "cudaMemcpyAsync");
          s.synchronize();
          sink = *pinned;
        },
        [&] { sink = cohort::multi_device_reduce(one, xv, init, op).wait(); });
  } else {
    constexpr int batch = 10;
    const auto [cub_ms, cohort_ms] = bench::paired_time_ms(
        s,
        [&] {
          for (int i = 0; i < batch; ++i)
            check(cub_call(temp.data()), "cub::DeviceReduce");
        },
        [&] {
          for (int i = 0; i < batch; ++i)
            cohort::multi_device_reduce(one, xv, init, op, into);
        });
    cub_us = 1e3 * cub_ms / batch, cohort_us = 1e3 * cohort_ms / batch;
  }
  s.synchronize();
  check(cudaFreeHost(pinned), "cudaFreeHost");
  std::printf("| %zu | %s | %s | %.1f | %.1f | %.3f |\n", n, type, name_of(Op), cub_us, cohort_us,
              cub_us / cohort_us);
}

// Every row of table `table` at n elements, where they fit.
inline void rows(cohort::stream_ref s, int table, std::size_t n, bool fits) {
  if (!fits) {
    std::printf("| %zu | skipped: does not fit | | | | |\n", n);
    return;
  }
  if (table == 3) {
    row<float, operation::min>(s, n, "float", table);
    row<float, operation::max>(s, n, "float", table);
    row<double, operation::min>(s, n, "double", table);
    row<float, operation::user_sum>(s, n, "float", table);
    return;
  }
  row<float, operation::sum>(s, n, "float", table);
  row<double, operation::sum>(s, n, "double", table);
  row<std::uint32_t, operation::sum>(s, n, "uint32", table);
  row<std::uint64_t, operation::sum>(s, n, "uint64", table);
  row<std::uint32_t, operation::min>(s, n, "uint32", table);
  row<std::uint64_t, operation::max>(s, n, "uint64", table);
}

// The three tables, 2^20 to 2^top elements.
inline void tables(cohort::stream_ref s, int top) {
  const char* titles[] = {
      "sums, minima and maxima to the host (pending::wait) against cub::DeviceReduce, a copy to "
      "pinned memory and a wait",
      "sums, minima and maxima into device memory (device_result) against cub::DeviceReduce, in "
      "batches of 10 calls",
      "other operators, kept in order, into device memory against cub::DeviceReduce::Reduce with "
      "the same operator, in batches of 10 calls"};
  for (int table = 1; table <= 3; ++table) {
    std::printf("\n## group of one: %s, GPU 0\n\n", titles[table - 1]);
    std::printf("| n | type | operation | cub us | cohort us | cub / cohort |\n"
                "| --- | --- | --- | --- | --- | --- |\n");
    for (int lg = 20; lg <= top; lg += 2) {
      const std::size_t n = std::size_t(1) << lg;
      rows(s, table, n,
           1.2 * 8.0 * double(n) <= 0.8 * double(cohort::memory_info(s.device()).free));
    }
  }
}

} // namespace one_member
