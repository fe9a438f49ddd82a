// cohort/algorithms/pending.cuh — a value the GPUs are still computing.
//
// Returned by reductions so that they need not block: the host waits only when it asks for the
// value (`ready()` says, without blocking, whether it would have to). Destroying a pending value
// that was never waited for waits for it (its memory is in use until the GPU is done). A pending
// value belongs to one call, so the reductions that return one refuse to be captured into a CUDA
// graph; their forms that take a `device_result<T>&` (device_result.cuh) leave the value in device
// memory instead. A pending value must not outlive its group: the event that says its value is
// ready is one of the group's, given back when the pending value goes. Only the reductions make
// one.
//
//   cohort::pending<double> sum = cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{});
//   more_work();             // more work, still asynchronous
//   if (!sum.ready()) more_work();     // ready() never blocks
//   double s = sum.wait();   // blocks here, once
#pragma once

#include "../errors/argument_error.cuh"
#include "../execution/detail/member_cache.cuh"
#include "../memory/detail/pinned_slots.cuh"

#include <utility>

namespace cohort {

namespace detail {
struct pending_access;
} // namespace detail

template <class T>
class pending {
  static_assert(sizeof(T) <= detail::pinned_slots::slot_bytes,
                "cohort::pending<T> holds values of at most 256 bytes.");

 public:
  pending(pending&& other) noexcept
      : host_(std::exchange(other.host_, nullptr))
      , done_(std::move(other.done_)) {}
  pending& operator=(pending&&) = delete;
  pending(const pending&) = delete;
  pending& operator=(const pending&) = delete;

  ~pending() {
    if (host_ == nullptr) return;
    try {
      done_.get().synchronize();
    } catch (...) { // a failed computation: nothing to report from a destructor. The GPU may
      return;       // still write the slot: it is not handed to another result (a leak of 256 B).
    }
    detail::pinned_slots::instance().give_back(host_);
  }

  // True when the value is ready; never blocks.
  bool ready() const {
    detail::require_argument(host_ != nullptr, "pending::ready", "this",
                             "the value was moved away.");
    return done_.get().ready();
  }

  // Blocks until the value is computed and returns it.
  T wait() {
    detail::require_argument(host_ != nullptr, "pending::wait", "this",
                             "the value was moved away.");
    done_.get().synchronize();
    return *host_;
  }

 private:
  friend struct detail::pending_access;

  // `host` is a pinned slot (detail::pinned_slots) the GPU writes the value to before `done`
  // completes. (The device memory the computation uses is the group's, kept between calls.)
  pending(T* host, detail::pooled_event done)
      : host_(host)
      , done_(std::move(done)) {}

  T* host_;
  detail::pooled_event done_;
};

namespace detail {

// How the reductions make a pending value from the pinned slot they enqueued a write to.
struct pending_access {
  template <class T>
  static pending<T> make(T* host, pooled_event done) {
    return pending<T>(host, std::move(done));
  }
};

} // namespace detail

} // namespace cohort
