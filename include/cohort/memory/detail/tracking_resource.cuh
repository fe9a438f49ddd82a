// cohort/memory/detail/tracking_resource.cuh — a resource that counts what passes through it.
//
// A device group keeps one per member in front of the resource its allocations come from, so that
// it can say how much device memory cohort holds on each member, now and at its peak; another, in
// front of a scoped scratch resource, counts in the first's totals. Counting is atomic: buffers of
// one group may be made and freed on several host threads.
#pragma once

#include "../memory_resource.cuh"

#include <atomic>
#include <cstddef>

namespace cohort::detail {

class tracking_resource {
 public:
  tracking_resource() noexcept
      : upstream_(default_memory_resource()) {}

  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream) {
    void* p = upstream_.allocate(bytes, alignment, stream_of(stream));
    if (p == nullptr) return nullptr;
    const std::size_t now = totals_->bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = totals_->peak_.load(std::memory_order_relaxed);
    while (now > peak &&
           !totals_->peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return p;
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment,
                        cuda::stream_ref stream) noexcept {
    upstream_.deallocate(p, bytes, alignment, stream_of(stream));
    totals_->bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  memory_usage usage() const noexcept {
    return {bytes_.load(std::memory_order_relaxed), peak_.load(std::memory_order_relaxed)};
  }
  memory_resource_ref upstream() const noexcept { return upstream_; }
  // Only while nothing is held: what is held goes back to the resource it came from.
  void set_upstream(memory_resource_ref upstream) noexcept { upstream_ = upstream; }

  void bind(device_ref device) noexcept { device_ = device; }
  // What passes through this one counts in `totals`' usage (which must outlive it) instead.
  void count_in(tracking_resource& totals) noexcept { totals_ = &totals; }

 private:
  // The upstream ref takes cohort's stream_ref (it makes the stream's device current).
  stream_ref stream_of(cuda::stream_ref stream) const noexcept { return {device_, stream.get()}; }

  memory_resource_ref upstream_;
  device_ref device_{0};
  tracking_resource* totals_ = this;
  std::atomic<std::size_t> bytes_{0};
  std::atomic<std::size_t> peak_{0};
};

} // namespace cohort::detail
