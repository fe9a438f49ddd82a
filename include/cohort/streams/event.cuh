// cohort/streams/event.cuh — an owning, move-only CUDA event on a given device.
//
// Events for ordering are made without timing (cheaper to record and wait on); ask for timing to
// measure with `elapsed`.
//
//   cohort::event start(dev, cohort::event::timing::on), stop(dev, cohort::event::timing::on);
//   start.record(s); work(s); stop.record(s);
//   stop.synchronize();
//   double ms = cohort::elapsed(start, stop).count();
#pragma once

#include "detail/owner.cuh"
#include "event_ref.cuh"

#include <atomic>
#include <cstddef>
#include <utility>

namespace cohort {

#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
namespace detail {
// For tests: the events this process has made (a loop of algorithm calls makes none once warm).
inline std::atomic<std::size_t> events_made_for_tests{0};
} // namespace detail
#endif

class event : public detail::owner<event, event_ref> {
 public:
  enum class timing { off, on };

  explicit event(device_ref device, timing t = timing::off)
      : owner(device, create(device, t)) {}

  // `adopt(device, handle)` takes ownership of a handle, `release()` gives it up.

 private:
  friend class detail::owner<event, event_ref>;

  event(device_ref device, cudaEvent_t handle) noexcept
      : owner(device, handle) {}

  static cudaEvent_t create(device_ref device, timing t) {
    detail::require_valid_device(device, "event", "device");
    scoped_device on(device);
    cudaEvent_t handle = nullptr;
    const unsigned flags = t == timing::on ? cudaEventDefault : cudaEventDisableTiming;
    check_cuda(cudaEventCreateWithFlags(&handle, flags), "cudaEventCreateWithFlags", device.get());
#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
    detail::events_made_for_tests.fetch_add(1, std::memory_order_relaxed);
#endif
    return handle;
  }

  static void destroy_handle(cudaEvent_t handle) noexcept {
    ignore_cuda_error(cudaEventDestroy(handle));
  }
};

} // namespace cohort
