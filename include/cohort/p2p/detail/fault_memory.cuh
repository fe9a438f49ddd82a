// cohort/p2p/detail/fault_memory.cuh — the host's side of fault.cuh: a clique's fault records in
// host-mapped memory, read without a CUDA call, and its ranks' progress, copied on streams of
// their own.
//
// The records go back to the process's pinned slots once the clique's last kernels have ended: a
// host function enqueued after them gives them back (a destructor never waits without a bound).
// Where it cannot be enqueued, they are left: never reused while a kernel may still write them.
#pragma once

#include "../../devices/device_ref.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../errors/p2p_error.cuh"
#include "../../memory/detail/pinned_slots.cuh"
#include "../../streams/stream_ref.cuh"
#include "../p2p_progress.cuh"
#include "engine.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cohort::detail::p2p {

// One record per rank, each a slot of the process's pinned slots (memory/detail/pinned_slots.cuh:
// pinned host memory the GPUs reach through the same address).
class fault_memory {
 public:
  static_assert(sizeof(fault_record) <= pinned_slots::slot_bytes);

  // Taken, where it must be, with `device` current: no other device's context is made.
  fault_memory(device_ref device, std::size_t ranks) {
    scoped_device on(device);
    records_.reserve(ranks);
    try {
      for (std::size_t r = 0; r < ranks; ++r) {
        records_.push_back(static_cast<fault_record*>(pinned_slots::instance().take()));
        std::memset(static_cast<void*>(records_.back()), 0, sizeof(fault_record));
      }
    } catch (...) {
      give_back_now();
      throw;
    }
  }
  fault_memory(const fault_memory&) = delete;
  fault_memory& operator=(const fault_memory&) = delete;
  // Not retired (a clique whose construction failed before any kernel ran): given back now.
  ~fault_memory() { give_back_now(); }

  // Rank r's record, which only rank r's kernels write.
  fault_record* of(std::size_t rank) const noexcept { return records_[rank]; }

  // Given back once the work now on `s` has ended (every call of the clique, where the caller made
  // `s` wait for them), by host functions: no record is reused while a kernel may write it.
  void retire_after(stream_ref s) noexcept {
    try {
      scoped_device on(s.device());
      while (!records_.empty()) {
        const cudaError_t status =
            cudaLaunchHostFunc(s.native_handle(), &give_back_callback, records_.back());
        if (status != cudaSuccess) {
          ignore_cuda_error(status);
          break;
        }
        records_.pop_back();
      }
    } catch (...) {
    }
    records_.clear(); // where a host function could not be enqueued: left, never reused
  }
  // Left for good: a kernel of the clique may still write them (its context is lost, say).
  void abandon() noexcept { records_.clear(); }

  // The records written so far, as p2p_error's waits, the first to give up first.
  std::vector<p2p_wait> waits(const std::vector<device_ref>& devices) const {
    std::vector<p2p_wait> all;
    std::vector<std::uint64_t> at;
    for (std::size_t r = 0; r < records_.size(); ++r) {
      if (!written(r)) continue;
      const fault_record& f = *records_[r];
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
  bool any_written() const noexcept {
    for (std::size_t r = 0; r < records_.size(); ++r)
      if (written(r)) return true;
    return false;
  }

 private:
  bool written(std::size_t r) const noexcept {
    return std::atomic_ref<unsigned>(records_[r]->written).load(std::memory_order_acquire) != 0;
  }
  void give_back_now() noexcept {
    for (fault_record* record : records_)
      pinned_slots::instance().give_back(record);
    records_.clear();
  }
  static void CUDART_CB give_back_callback(void* record) {
    pinned_slots::instance().give_back(record);
  }

  std::vector<fault_record*> records_;
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
