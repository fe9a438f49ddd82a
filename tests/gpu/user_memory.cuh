// The user's own device memory for the tests of views: one cudaMalloc per member, split as a
// partition says, seen as a distributed_view and filled and read with plain cudaMemcpy.
#pragma once

#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/std/span>

#include <cstddef>
#include <vector>

namespace cohort::testing {

template <class T>
class user_memory {
 public:
  user_memory(const device_group& group, const partition& split)
      : group_(group) {
    for (std::size_t k = 0; k < group.size(); ++k) {
      T* p = nullptr;
      if (split.count(k) > 0) {
        scoped_device on(group.device(k));
        REQUIRE(cudaMalloc(&p, split.count(k) * sizeof(T)) == cudaSuccess);
      }
      spans_.emplace_back(p, split.count(k));
    }
  }
  ~user_memory() {
    for (const cuda::std::span<T>& s : spans_)
      if (s.data() != nullptr) (void)cudaFree(s.data());
  }
  user_memory(const user_memory&) = delete;
  user_memory& operator=(const user_memory&) = delete;

  distributed_view<T> view() const { return distributed_view<T>(group_, spans_); }
  std::size_t size() const {
    std::size_t n = 0;
    for (const cuda::std::span<T>& s : spans_)
      n += s.size();
    return n;
  }

  const std::vector<cuda::std::span<T>>& spans() const { return spans_; }

  // Waits for the group's work, then copies and waits for the copies: cudaMemcpy runs on the
  // legacy default stream, which orders nothing with cohort's non-blocking streams, and returns
  // from pageable memory before the device has the data.
  void copy_from_host(const std::vector<T>& host) {
    group_.synchronize();
    std::size_t at = 0;
    for (std::size_t k = 0; k < spans_.size(); ++k) {
      const cuda::std::span<T> s = spans_[k];
      if (!s.empty()) {
        scoped_device on(group_.device(k));
        REQUIRE(cudaMemcpy(s.data(), host.data() + at, s.size_bytes(), cudaMemcpyHostToDevice) ==
                cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      }
      at += s.size();
    }
  }
  void poison() {
    group_.synchronize();
    for (std::size_t k = 0; k < spans_.size(); ++k) {
      if (spans_[k].empty()) continue;
      scoped_device on(group_.device(k));
      REQUIRE(cudaMemset(spans_[k].data(), poison_byte, spans_[k].size_bytes()) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
  }
  std::vector<T> to_host() const {
    group_.synchronize();
    std::vector<T> out(size());
    std::size_t at = 0;
    for (std::size_t k = 0; k < spans_.size(); ++k) {
      const cuda::std::span<T> s = spans_[k];
      if (!s.empty()) {
        scoped_device on(group_.device(k));
        REQUIRE(cudaMemcpy(out.data() + at, s.data(), s.size_bytes(), cudaMemcpyDeviceToHost) ==
                cudaSuccess);
      }
      at += s.size();
    }
    return out;
  }

 private:
  const device_group& group_;
  std::vector<cuda::std::span<T>> spans_;
};

} // namespace cohort::testing
