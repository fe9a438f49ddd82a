// cohort/memory/detail/pinned_slots.cuh — small pinned host slots for results the GPU writes back.
//
// cudaMallocHost and cudaFreeHost cost hundreds of microseconds and cudaFreeHost synchronizes, so
// asynchronous results (`pending<T>`) take a slot from this process-wide pool instead: pinned
// memory allocated in chunks, never returned to CUDA, reused. Thread-safe.
#pragma once

#include "../../errors/cuda_error.cuh"

#include <cstddef>
#include <mutex>
#include <vector>

namespace cohort::detail {

class pinned_slots {
public:
  static constexpr std::size_t slot_bytes = 256;
  static constexpr std::size_t slots_per_chunk = 256;

  static pinned_slots& instance() {
    static pinned_slots* pool = new pinned_slots; // never destroyed: slots may outlive statics
    return *pool;
  }

  // A pinned slot of `slot_bytes`, aligned to 256 bytes.
  void* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
      void* chunk = nullptr;
      check_cuda(cudaMallocHost(&chunk, slot_bytes * slots_per_chunk), "cudaMallocHost (pinned slots)");
      for (std::size_t k = 0; k < slots_per_chunk; ++k)
        free_.push_back(static_cast<unsigned char*>(chunk) + k * slot_bytes);
    }
    void* slot = free_.back();
    free_.pop_back();
    return slot;
  }

  void give_back(void* slot) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      free_.push_back(slot);
    } catch (...) { // out of host memory: the slot is lost, never reused
    }
  }

private:
  std::mutex mutex_;
  std::vector<void*> free_;
};

} // namespace cohort::detail
