// cohort/nccl/timeouts.cuh — what cohort's bounded NCCL waits promise: the error a wait that ran
// out of time throws (creation's and a bootstrap's wait for the id file too), the default
// time-out, and how a communicator's calls behave (`nccl_calls`).
//
//   try { comm.wait(stream, std::chrono::seconds(30)); }
//   catch (const cohort::timeout_error& e) { /* the communicator was aborted: make a new one */ }
#pragma once

#include "../errors/nccl_error.cuh"
#include "detail/poll.cuh"

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// A communicator operation did not finish in time, and the communicator was aborted; or a
// communicator was never made in time (a rank that did not join, an id file that did not appear).
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Any time-out may be std::chrono::milliseconds::max(): the wait then lasts as long as it takes.
inline constexpr std::chrono::milliseconds default_nccl_timeout{std::chrono::minutes(5)};

// How a communicator's calls behave once it exists (creation and destruction are bounded by the
// time-out either way, as far as NCCL's work goes: see communicator.cuh).
enum class nccl_calls {
  // NCCL's blocking communicator, made by splitting the bounded one once every rank has joined:
  // each call costs what a raw NCCL call costs. A collective a peer never joins can block the
  // host in its first call with that peer (while NCCL connects); a stall after the call returned
  // is bounded by `communicator::wait` and by the communicator's destruction. A split of such a
  // communicator blocks until every rank splits. Its collectives can be captured into CUDA graphs.
  blocking,
  // NCCL's non-blocking communicator: every call (splits included) returns within the time-out,
  // or aborts the communicator and throws. NCCL hands each call to a helper thread, which adds
  // tens of microseconds to every call (docs/performance.md), and which a CUDA graph capture
  // cannot follow: its collectives refuse capture.
  bounded,
};

namespace detail {

// The error for a poll that did not end in ncclSuccess: NCCL's own, or a time-out. The caller
// has aborted the communicator already.
[[noreturn]] inline void throw_unfinished(const poll_outcome& outcome, std::string_view what,
                                          int device, int rank, int size,
                                          std::chrono::milliseconds timeout) {
  if (!outcome.timed_out) throw nccl_error(outcome.state, what, device, rank);
  throw timeout_error(std::string(what) + " on device " + std::to_string(device) + " (" +
                      rank_text(rank, size) + ") did not finish within " +
                      std::to_string(timeout.count()) +
                      " ms: a peer rank never joined or is stuck. The communicator was aborted; "
                      "check the other ranks, then make a new one.");
}

struct unfinished_rank {
  int device;
  int rank;
};

// The error for ranks of one wait whose work did not finish within `timeout`, each named (with a
// communicator per process, the one rank this process waited for). The caller has aborted them.
[[noreturn]] inline void throw_timed_out(std::string_view what,
                                         const std::vector<unfinished_rank>& unfinished, int size,
                                         std::chrono::milliseconds timeout) {
  std::string ranks;
  for (const unfinished_rank& r : unfinished)
    ranks += (ranks.empty() ? "" : ", ") + rank_text(r.rank, size) + " (device " +
             std::to_string(r.device) + ")";
  throw timeout_error(std::string(what) + ": the work of " + ranks + " did not finish within " +
                      std::to_string(timeout.count()) +
                      " ms: a peer rank never joined or is stuck. The communicator was aborted (" +
                      "every rank of this wait); check those ranks, then make a new one.");
}

} // namespace detail
} // namespace cohort
