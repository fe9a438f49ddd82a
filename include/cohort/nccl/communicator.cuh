// cohort/nccl/communicator.cuh — NCCL communicators that cannot hang you.
//
// A `communicator` is one rank of an NCCL communicator, on one device. It is always created
// non-blocking with a timeout: if a peer never joins, the creating call throws `timeout_error`
// naming the rank and the time instead of hanging. `wait` bounds a collective the same way, and an
// asynchronous NCCL error aborts the communicator and raises; a new one can be made afterwards.
// Destroying it is bounded by its time-out too (ranks driven from one thread: end_together bounds
// them all by one): posted work that never finishes (a peer that died or never joined) is
// aborted. How its later calls behave is chosen at creation (`nccl_calls`): as fast as raw NCCL
// (blocking, the default) or each bounded by the time-out (bounded). The time-outs bound NCCL's
// work, not the user's: NCCL's abort ends its own kernels but waits for those already running
// on the device, a kernel of the user's that has not ended among them.
//
//   // one process per GPU (see bootstrap.cuh for the launcher's environment):
//   auto comm = cohort::communicator::create(id, world_size, rank, cohort::device_ref{local_rank});
//   // one process, one rank per member of a group:
//   std::vector<cohort::communicator> ranks = cohort::communicator::create_clique(group);
//   comm.wait(stream, std::chrono::seconds(30));   // throws instead of hanging forever
#pragma once

#include "../errors/argument_error.cuh"
#include "../errors/nccl_error.cuh"
#include "../execution/device_group.cuh"
#include "../streams/stream_ref.cuh"
#include "communicator_ref.cuh"
#include "detail/capture.cuh"
#include "detail/create.cuh"
#include "detail/poll.cuh"
#include "timeouts.cuh"
#include "unique_id.cuh"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

class nccl_clique;

class communicator : public communicator_ref {
 public:
  // This process's rank of a `size`-rank communicator identified by `id`, on `device`. Throws
  // `timeout_error` if the other ranks have not all joined within `timeout`.
  static communicator create(const unique_id& id, int size, int rank, device_ref device,
                             std::chrono::milliseconds timeout = default_nccl_timeout,
                             nccl_calls calls = nccl_calls::blocking) {
    detail::require_argument(size > 0, "communicator::create", "size", "must be at least 1.");
    detail::require_argument(rank >= 0 && rank < size, "communicator::create", "rank",
                             "must be in [0, size); got " + std::to_string(rank) + " of " +
                                 std::to_string(size) + ".");
    detail::require_valid_device(device, "communicator::create", "device");
    return std::move(
        make(id, {{nullptr, device, rank, size}}, timeout, calls, "ncclCommInitRankConfig")[0]);
  }

  // One rank per member of `group` (rank i on member i), made together in this process. An
  // emulated group is refused: NCCL does not allow two ranks on one GPU.
  static std::vector<communicator>
  create_clique(const device_group& group, std::chrono::milliseconds timeout = default_nccl_timeout,
                nccl_calls calls = nccl_calls::blocking) {
    detail::members_of(group, "communicator::create_clique");
    if (group.is_emulated() && group.size() > 1)
      detail::throw_invalid_argument(
          "communicator::create_clique", "group",
          "is emulated: NCCL refuses two ranks on one GPU. Use cohort::p2p_clique (the "
          "peer-to-peer engine) for collectives on an emulated group, or make the clique over "
          "distinct GPUs.");
    const int size = static_cast<int>(group.size());
    std::vector<detail::rank_of> ranks;
    for (int r = 0; r < size; ++r)
      ranks.push_back({nullptr, group.device(r), r, size});
    return make(unique_id::create(), ranks, timeout, calls, "ncclCommInitRankConfig (clique)");
  }

  communicator(communicator&& other) noexcept
      : communicator_ref(std::move(other))
      , calls_(other.calls_) {
    other.handle_ = nullptr;
  }
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      end();
      communicator_ref::operator=(std::move(other));
      calls_ = other.calls_;
      other.handle_ = nullptr;
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  // Waits for the communicator's posted work at most its time-out, then aborts it (the abort waits
  // for kernels of the user's still running on the device); never throws.
  ~communicator() { end(); }

  // Ranks that pass the same `color` form a new communicator, ordered by `key` (then by rank),
  // whose calls behave as this one's. Every rank of this communicator must call it: for one rank
  // per process. Ranks driven from one thread split together with `nccl_clique::split`.
  communicator split(int color, int key,
                     std::chrono::milliseconds timeout = default_nccl_timeout) const {
    detail::require_argument(color >= 0, "communicator::split", "color",
                             "must be 0 or more (ranks that want no communicator are not "
                             "supported here).");
    detail::require_argument(!empty(), "communicator::split", "this",
                             "the communicator was aborted or moved from; make a new one.");
    return std::move(split_together({this}, {color}, {key}, timeout, "ncclCommSplit")[0]);
  }

  // How this communicator's calls behave.
  nccl_calls calls() const noexcept { return calls_; }

  // Waits until the work enqueued so far on `stream` (collectives of this communicator among it)
  // is done. If NCCL reports an error, or `timeout` passes first, aborts the communicator (which
  // ends the stuck collective) and throws. Refuses (std::logic_error) a stream being captured:
  // the wait would end the capture. Where CUDA graphs still hold the communicator (or a rank made
  // with it in this process), the abort frees it only once they are destroyed, on a thread of its
  // own (see abort, docs/nccl.md).
  void wait(stream_ref stream, std::chrono::milliseconds timeout = default_nccl_timeout) {
    wait_all(
        std::span<communicator>(this, 1), [&](std::size_t) { return stream; }, timeout,
        "communicator::wait");
  }

  // Waits for every rank of `ranks` (rank i's work on `stream_of(i)`) within one `timeout`;
  // on an error or the time-out, aborts every rank and throws. `function` names the caller.
  template <class StreamOf>
  static void wait_all(std::span<communicator> ranks, StreamOf&& stream_of,
                       std::chrono::milliseconds timeout, std::string_view function) {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      detail::require_argument(!ranks[i].empty(), function, "this",
                               "the communicator was aborted or moved from; make a new one.");
      detail::require_stream(stream_of(i), function);
      detail::refuse_capture(stream_of(i), function,
                             "waiting for it would end the capture: wait after "
                             "cudaStreamEndCapture, on the stream the graph is launched on.");
    }
    const auto deadline = detail::deadline_after(timeout);
    std::vector<bool> done(ranks.size(), false);
    auto fail = [&](std::size_t i, const detail::poll_outcome& outcome) {
      for (communicator& c : ranks)
        c.abort();
      detail::throw_unfinished(outcome, "a collective", ranks[i].device_.get(), ranks[i].rank_,
                               ranks[i].size_, timeout);
    };
    for (unsigned spins = 0;; ++spins) {
      // A non-blocking communicator may still be handing operations to the stream
      // (ncclInProgress): the stream being idle means nothing until NCCL says ncclSuccess.
      std::size_t left = 0;
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (done[i]) continue;
        const ncclResult_t state = detail::async_state(ranks[i].handle_);
        if (state != ncclSuccess && state != ncclInProgress) fail(i, {state, false});
        done[i] = state == ncclSuccess && stream_of(i).ready();
        left += done[i] ? 0 : 1;
      }
      if (left == 0) return;
      if (std::chrono::steady_clock::now() > deadline) {
        std::vector<detail::unfinished_rank> unfinished;
        for (std::size_t i = 0; i < ranks.size(); ++i)
          if (!done[i]) unfinished.push_back({ranks[i].device_.get(), ranks[i].rank_});
        for (communicator& c : ranks)
          c.abort();
        detail::throw_timed_out(function, unfinished, ranks.front().size_, timeout);
      }
      detail::pause(spins);
    }
  }

  // Ends (as destruction does) ranks driven from one thread within one time-out for all, each its
  // own from the same start, where destroying them in turn could take one time-out each: what
  // ~nccl_clique does; for the ranks of create_clique, before they go. Leaves them empty.
  static void end_together(std::span<communicator> ranks) noexcept {
    const auto start = std::chrono::steady_clock::now();
    for (communicator& c : ranks) {
      const auto left =
          detail::deadline_after(c.timeout_, start) - std::chrono::steady_clock::now();
      c.end(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(left),
                     std::chrono::milliseconds(0)));
    }
  }

  // Takes ownership of a communicator NCCL made (rank, size and device as NCCL says); `calls`
  // says how it was configured. An adopted blocking communicator has no guard to bound its end:
  // its destruction waits for its work as ncclCommFinalize does; adopt non-blocking ones where
  // that matters.
  static communicator adopt(ncclComm_t handle, device_ref device,
                            std::chrono::milliseconds timeout = default_nccl_timeout,
                            nccl_calls calls = nccl_calls::blocking) {
    int rank = 0, size = 0;
    check_nccl(ncclCommUserRank(handle, &rank), "ncclCommUserRank", device.get());
    check_nccl(ncclCommCount(handle, &size), "ncclCommCount", device.get(), rank);
    return communicator({handle, nullptr}, rank, size, device, timeout, calls, nullptr);
  }

  // Ends every operation of this communicator at once and frees it; it cannot be used after.
  // Where a CUDA graph still holds it (or a rank made with it in this process), it is freed once
  // those graphs are destroyed and every such rank has been destroyed or aborted, on a thread of
  // its own (NCCL's abort waits for them), and this returns at once (unless no thread can be
  // started); otherwise it aborts here, which waits for the kernels still running on the device.
  // A graph of an aborted communicator must not be replayed: its NCCL kernels quit at once,
  // leaving their outputs unwritten.
  void abort() noexcept {
    if (state_) state_->abort();
    state_.reset();
    handle_ = nullptr;
  }

  // True once aborted (by `abort` or by a time-out in a call that used it) or moved from.
  bool empty() const noexcept { return detail::ended(*this); }

 private:
  friend class nccl_clique;

  // Splits of ranks driven from this thread, in one NCCL group (nccl_clique::split: ranks of one
  // thread split one at a time would each wait for the others): rank i of `parents` joins
  // colors[i] at keys[i]; the new communicators' calls behave as the parents'.
  static std::vector<communicator> split_together(const std::vector<const communicator*>& parents,
                                                  const std::vector<int>& colors,
                                                  const std::vector<int>& keys,
                                                  std::chrono::milliseconds timeout,
                                                  std::string_view what) {
    const nccl_calls calls = parents[0]->calls_;
    std::vector<detail::rank_of> ranks;
    for (const communicator* p : parents)
      ranks.push_back(detail::rank_info(*p));
    const auto deadline = detail::deadline_after(timeout);
    // Blocking children are twins of non-blocking guards made by this split (see with_twins).
    const auto made = detail::split_together(
        ranks, colors, keys, detail::nonblocking_config(calls == nccl_calls::blocking), deadline,
        timeout, what);
    for (std::size_t i = 0; i < made.size(); ++i) {
      int rank = 0, size = 0;
      const ncclResult_t got_rank = ncclCommUserRank(made[i], &rank);
      const ncclResult_t got_size = ncclCommCount(made[i], &size);
      if (got_rank != ncclSuccess || got_size != ncclSuccess) {
        detail::abort_all(made);
        check_nccl(got_rank != ncclSuccess ? got_rank : got_size, "ncclCommUserRank",
                   ranks[i].device.get(), ranks[i].rank);
      }
      ranks[i] = {made[i], ranks[i].device, rank, size};
    }
    return adopt_made(
        detail::with_twins(made, ranks, calls == nccl_calls::blocking, deadline, timeout, what),
        ranks, timeout, calls, colors); // a color is a communicator of its own
  }

  communicator(detail::made_rank made, int rank, int size, device_ref device,
               std::chrono::milliseconds timeout, nccl_calls calls,
               std::shared_ptr<detail::communicator_family> family)
      : communicator_ref(std::make_shared<detail::communicator_state>(made.handle, made.guard,
                                                                      calls == nccl_calls::bounded,
                                                                      device, std::move(family)),
                         rank, size, device, timeout)
      , calls_(calls) {}

  static std::vector<communicator> make(const unique_id& id,
                                        const std::vector<detail::rank_of>& ranks,
                                        std::chrono::milliseconds timeout, nccl_calls calls,
                                        std::string_view what) {
    const auto deadline = detail::deadline_after(timeout);
    const bool blocking = calls == nccl_calls::blocking;
    const auto made = detail::init_ranks(id, ranks, blocking, deadline, timeout, what);
    return adopt_made(detail::with_twins(made, ranks, blocking, deadline, timeout, what), ranks,
                      timeout, calls);
  }

  // Owners for ranks NCCL has made; on running out of memory, the ones not yet owned are aborted.
  // Ranks of one NCCL communicator made together in this process (one `families` value each; all
  // one family where it is empty) share a detail::communicator_family: NCCL frees such ranks
  // together, the last of them to end waiting for all their graphs.
  static std::vector<communicator> adopt_made(const std::vector<detail::made_rank>& made,
                                              const std::vector<detail::rank_of>& ranks,
                                              std::chrono::milliseconds timeout, nccl_calls calls,
                                              const std::vector<int>& families = {}) {
    std::vector<communicator> owners;
    try {
      owners.reserve(made.size());
      std::map<int, std::shared_ptr<detail::communicator_family>> shared;
      for (std::size_t i = 0; i < made.size(); ++i) {
        auto& family = shared[families.empty() ? 0 : families[i]];
        if (!family) family = std::make_shared<detail::communicator_family>();
        owners.push_back(communicator(made[i], ranks[i].rank, ranks[i].size, ranks[i].device,
                                      timeout, calls, family));
      }
    } catch (...) {
      for (std::size_t i = owners.size(); i < made.size(); ++i)
        detail::abort_all({made[i].handle, made[i].guard});
      throw;
    }
    return owners;
  }

  void end() noexcept { end(timeout_); }
  void end(std::chrono::milliseconds timeout) noexcept {
    if (state_) state_->end(timeout);
    state_.reset();
    handle_ = nullptr;
  }

  nccl_calls calls_;
};

} // namespace cohort
