// cohort/nccl/communicator_ref.cuh — a non-owning view of one rank of an NCCL communicator: what
// cohort's collectives take, whether the communicator is cohort's `communicator` or made outside.
//
//   cohort::communicator_ref rank0 = comm;                        // a view of an owner
//   cohort::communicator_ref theirs(handle, rank, size, cohort::device_ref{0});
//   cohort::all_reduce(theirs, stream, data, cohort::sum);
#pragma once

#include "../devices/device_ref.cuh"
#include "detail/communicator_state.cuh"
#include "detail/create.cuh"
#include "detail/poll.cuh"
#include "timeouts.cuh"

#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>

namespace cohort {

namespace detail {
struct state_access;
}

class communicator_ref {
 public:
  // A ref to a communicator made outside cohort: cohort's calls use it as it is, and a time-out in
  // one of them aborts it (its owner must then neither use nor free it).
  communicator_ref(ncclComm_t handle, int rank, int size, device_ref device,
                   std::chrono::milliseconds timeout = default_nccl_timeout) noexcept
      : handle_(handle)
      , rank_(rank)
      , size_(size)
      , device_(device)
      , timeout_(timeout) {}
  communicator_ref(std::nullptr_t, int, int, device_ref) = delete;

  ncclComm_t native_handle() const noexcept { return handle_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  device_ref device() const noexcept { return device_; }
  // The bound on a non-blocking (bounded or raw) communicator's calls, before the communicator is
  // aborted and the call throws `timeout_error`, and on this communicator's end. Calls of a
  // blocking communicator (the default) are not bounded by it (timeouts.cuh).
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 protected:
  friend struct detail::state_access;

  communicator_ref(std::shared_ptr<detail::communicator_state> state, int rank, int size,
                   device_ref device, std::chrono::milliseconds timeout) noexcept
      : handle_(state->handle())
      , rank_(rank)
      , size_(size)
      , device_(device)
      , timeout_(timeout)
      , state_(std::move(state)) {}

  ncclComm_t handle_;
  int rank_;
  int size_;
  device_ref device_;
  std::chrono::milliseconds timeout_;
  // Shared with the owner (null for a ref made from a raw handle): how the communicator ended.
  std::shared_ptr<detail::communicator_state> state_;
};

namespace detail {

struct state_access {
  static communicator_state* of(const communicator_ref& comm) noexcept { return comm.state_.get(); }
};

// Aborts the communicator behind `comm` (once, whoever asks first).
inline void abort(communicator_ref comm) noexcept {
  if (communicator_state* state = state_access::of(comm))
    state->abort();
  else
    (void)ncclCommAbort(comm.native_handle());
}

// Its calls were posted without their partners: its end aborts instead of waiting.
inline void strand(communicator_ref comm) noexcept {
  if (communicator_state* state = state_access::of(comm)) state->strand();
}

inline bool ended(communicator_ref comm) noexcept {
  const communicator_state* state = state_access::of(comm);
  return comm.native_handle() == nullptr || (state != nullptr && state->ended());
}

// A non-blocking communicator's calls are taken by NCCL's helper thread, which a capture cannot
// follow (a ref made from a raw handle is taken as the user says nothing of it: not checked).
inline bool bounded_calls(communicator_ref comm) noexcept {
  const communicator_state* state = state_access::of(comm);
  return state != nullptr && state->bounded_calls();
}

// Polls a non-blocking communicator's last operation, bounded by its own time-out; aborts it and
// throws on an error or a time-out.
inline void wait_until_taken(communicator_ref comm, std::string_view what) {
  const poll_outcome outcome = poll_until(comm.native_handle(), deadline_after(comm.timeout()));
  if (outcome.done()) return;
  abort(comm);
  throw_unfinished(outcome, what, comm.device().get(), comm.rank(), comm.size(), comm.timeout());
}

inline rank_of rank_info(communicator_ref comm) {
  return {comm.native_handle(), comm.device(), comm.rank(), comm.size()};
}

} // namespace detail

} // namespace cohort
