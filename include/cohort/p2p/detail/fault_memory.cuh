// cohort/p2p/detail/fault_memory.cuh — the host's side of fault.cuh: a clique's fault records in
// host-mapped memory, read without a CUDA call, and its ranks' progress, copied on streams of
// their own.
//
// The records are recycled through a process-wide list once the clique's last kernels have ended:
// a host function enqueued after them returns them (cudaFreeHost would wait for the device, and
// a destructor never waits without a bound). Where it cannot be enqueued, they are left: a few
// hundred bytes, never reused while a kernel may still write them.
#pragma once

#include "../../devices/device_ref.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../errors/p2p_error.cuh"
#include "../../streams/stream_ref.cuh"
#include "../p2p_progress.cuh"
#include "engine.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace cohort::detail::p2p {

class fault_memory {
 public:
  static constexpr std::size_t bytes = sizeof(fault_record) * max_ranks;

  // Allocated, where it must be, with `device` current: no other device's context is made.
  explicit fault_memory(device_ref device) {
    scoped_device on(device);
    {
      const std::lock_guard lock(list_mutex());
      if (!free_list().empty()) {
        records_ = free_list().back();
        free_list().pop_back();
      }
    }
    if (records_ == nullptr) {
      void* p = nullptr;
      check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                 "cudaHostAlloc (p2p fault records)", no_device);
      records_ = static_cast<fault_record*>(p);
    }
    std::memset(static_cast<void*>(records_), 0, bytes);
    void* on_device = nullptr;
    if (const cudaError_t status = cudaHostGetDevicePointer(&on_device, records_, 0);
        status != cudaSuccess) {
      recycle(records_);
      check_cuda(status, "cudaHostGetDevicePointer (p2p fault records)", no_device);
    }
    device_ = static_cast<fault_record*>(on_device);
  }
  fault_memory(const fault_memory&) = delete;
  fault_memory& operator=(const fault_memory&) = delete;
  // Not retired (a clique whose construction failed before any kernel ran): back to the list now.
  ~fault_memory() {
    if (records_ != nullptr) recycle(records_);
  }

  fault_record* on_device() const noexcept { return device_; }

  // Back to the list once the work now on `s` has ended (every call of the clique, where the
  // caller made `s` wait for them).
  void retire_after(stream_ref s) noexcept {
    fault_record* records = std::exchange(records_, nullptr);
    try {
      scoped_device on(s.device());
      ignore_cuda_error(cudaLaunchHostFunc(s.native_handle(), &recycle_callback, records));
    } catch (...) { // left, never reused
    }
  }

  // Left for good: a kernel of the clique may still write them (its context is lost, say).
  void abandon() noexcept { records_ = nullptr; }

  // The records written so far, as p2p_error's waits, the first to give up first.
  std::vector<p2p_wait> waits(const std::vector<device_ref>& devices) const {
    std::vector<p2p_wait> all;
    std::vector<std::uint64_t> at;
    for (std::size_t r = 0; r < devices.size(); ++r) {
      const fault_record& f = records_[r];
      if (std::atomic_ref<unsigned>(const_cast<unsigned&>(f.written))
              .load(std::memory_order_acquire) == 0)
        continue;
      p2p_wait w;
      w.rank = f.rank;
      w.device = devices[r].get();
      w.peer = f.peer;
      w.block = f.block;
      w.call = call_name(static_cast<call_kind>(f.call));
      w.point_to_point = f.point_to_point != 0;
      w.value = f.value;
      w.seen = f.seen;
      w.waited = std::chrono::nanoseconds(f.waited_ns);
      w.reached.assign(f.reached, f.reached + devices.size());
      const auto place = std::upper_bound(at.begin(), at.end(), f.at_ns);
      all.insert(all.begin() + (place - at.begin()), std::move(w));
      at.insert(place, f.at_ns);
    }
    return all;
  }
  bool any_written(std::size_t ranks) const noexcept {
    for (std::size_t r = 0; r < ranks; ++r)
      if (std::atomic_ref<unsigned>(const_cast<unsigned&>(records_[r].written))
              .load(std::memory_order_acquire) != 0)
        return true;
    return false;
  }

 private:
  static std::mutex& list_mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<fault_record*>& free_list() {
    static std::vector<fault_record*> list;
    return list;
  }
  static void recycle(fault_record* records) noexcept {
    try {
      const std::lock_guard lock(list_mutex());
      free_list().push_back(records);
    } catch (...) { // left, never reused
    }
  }
  static void CUDART_CB recycle_callback(void* records) {
    recycle(static_cast<fault_record*>(records));
  }

  fault_record* records_ = nullptr;
  fault_record* device_ = nullptr;
};

// Rank r's progress, copied from its state (`state` is the start of the rank's state) on a stream
// made for it in the device's primary context: the clique's own streams may be held by the very
// calls that wait.
inline p2p_rank_progress read_progress(int rank, device_ref device, const std::uint64_t* state) {
  constexpr std::size_t first = state_layout::stop, words = state_layout::words - first;
  std::uint64_t copy[words] = {};
  scoped_device on(device);
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
             device.get());
  cudaError_t status = cudaMemcpyAsync(copy, state + first, sizeof copy, cudaMemcpyDeviceToHost, s);
  if (status == cudaSuccess) status = cudaStreamSynchronize(s);
  ignore_cuda_error(cudaStreamDestroy(s));
  check_cuda(status, "p2p_clique::progress (copying a rank's progress)", device.get());
  progress_words p;
  std::memcpy(&p, copy + (state_layout::progress - first), sizeof p);
  const auto name = [](std::uint64_t call) {
    return call == 0 ? std::string() : std::string(call_name(static_cast<call_kind>(call)));
  };
  p2p_rank_progress r;
  r.rank = rank;
  r.device = device.get();
  r.started_call = name(p.started_call);
  r.started_epoch = p.started_epoch;
  r.finished_call = name(p.finished_call);
  r.finished_epoch = p.finished_epoch;
  r.waiting = p.waiting_call != 0;
  r.waiting_call = name(p.waiting_call);
  r.waiting_block = static_cast<unsigned>(p.waiting_block);
  r.waiting_peer = static_cast<int>(p.waiting_peer);
  r.waiting_value = p.waiting_value;
  r.stopped = copy[0] != running;
  return r;
}

} // namespace cohort::detail::p2p
