// cohort/nccl/detail/poll.cuh — the one polling loop behind every bounded NCCL wait.
#pragma once

#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

namespace cohort::detail {

// Between two polls of NCCL: yield for the first few thousand (a call NCCL hands to its helper
// thread is taken within microseconds, and a sleep would cost a whole scheduler tick), then sleep
// briefly so that a long wait does not burn a core.
inline void pause(unsigned spins) {
  if (spins < 4096)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// now + timeout, saturated: std::chrono::milliseconds::max() ("wait as NCCL does") overflowed
// steady_clock's nanoseconds and put the deadline in the past, so a wait gave up at once (a
// healthy communicator was aborted). A time-out of 0 or less is now.
inline std::chrono::steady_clock::time_point
deadline_after(std::chrono::milliseconds timeout,
               std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
  using clock = std::chrono::steady_clock;
  if (timeout <= std::chrono::milliseconds::zero()) return now;
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - now);
  return timeout >= room ? clock::time_point::max() : now + timeout;
}

inline std::string rank_text(int rank, int size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// How a poll ended: NCCL done (and the caller's own condition met), an NCCL error, or the deadline.
struct poll_outcome {
  ncclResult_t state = ncclSuccess;
  bool timed_out = false;
  bool done() const noexcept { return state == ncclSuccess && !timed_out; }
};

// NCCL's state of `comm`: ncclInProgress while a non-blocking operation is under way, else its
// (asynchronous) result. A failed query counts as the communicator's error.
inline ncclResult_t async_state(ncclComm_t comm) noexcept {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
  return queried != ncclSuccess ? queried : state;
}

// Polls a non-blocking communicator until its last operation is done and `ready()` holds, until
// NCCL reports an error, or until `deadline` passes. Never aborts: the caller decides.
template <class Ready>
poll_outcome poll_until(ncclComm_t comm, std::chrono::steady_clock::time_point deadline,
                        Ready&& ready) {
  for (unsigned spins = 0;; ++spins) {
    const ncclResult_t state = async_state(comm);
    if (state != ncclSuccess && state != ncclInProgress) return {state, false};
    if (state == ncclSuccess && ready()) return {};
    if (std::chrono::steady_clock::now() > deadline) return {ncclInProgress, true};
    pause(spins);
  }
}
inline poll_outcome poll_until(ncclComm_t comm, std::chrono::steady_clock::time_point deadline) {
  return poll_until(comm, deadline, [] { return true; });
}

} // namespace cohort::detail
