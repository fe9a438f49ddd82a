// cohort/nccl/communicator.cuh — NCCL communicators that cannot hang you.
//
// A `communicator` is one rank of an NCCL communicator, on one device. It is always created
// non-blocking with a timeout: if a peer never joins, the creating call throws `timeout_error`
// naming the rank and the time instead of hanging. `wait` bounds a collective the same way, and an
// asynchronous NCCL error aborts the communicator and raises; a new one can be made afterwards.
// How its later calls behave is chosen at creation (`nccl_calls`): as fast as raw NCCL
// (blocking, the default) or each bounded by the time-out (bounded).
//
//   // one process per GPU (see bootstrap.cuh for the launcher's environment):
//   auto comm = cohort::communicator::create(id, world_size, rank, cohort::device_ref{local_rank});
//   // one process, one rank per member of a group:
//   std::vector<cohort::communicator> ranks = cohort::communicator::create_clique(group);
//   comm.wait(stream, std::chrono::seconds(30));   // throws instead of hanging forever
#pragma once

#include "../devices/scoped_device.cuh"
#include "../errors/argument_error.cuh"
#include "../errors/nccl_error.cuh"
#include "../execution/device_group.cuh"
#include "../streams/stream_ref.cuh"
#include "unique_id.cuh"

#include <nccl.h>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cohort {

// A communicator operation did not finish in time; the communicator was aborted.
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr std::chrono::milliseconds default_nccl_timeout{std::chrono::minutes(5)};

// How a communicator's calls behave once it exists (creation is bounded by the time-out either
// way).
enum class nccl_calls {
  // NCCL's blocking communicator, made by splitting the bounded one once every rank has joined:
  // each call costs what a raw NCCL call costs. A collective a peer never joins can block the
  // host in its first call with that peer (while NCCL connects); a stall after the call returned
  // is bounded by `communicator::wait`. A split of such a communicator blocks until every rank
  // splits.
  blocking,
  // NCCL's non-blocking communicator: every call (splits included) returns within the time-out,
  // or aborts the communicator and throws. NCCL hands each call to a helper thread, which adds
  // tens of microseconds to every call (docs/performance.md).
  bounded,
};

class communicator_ref {
 public:
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
  // How long a call may wait for NCCL to take an operation (peers included) before the
  // communicator is aborted and the call throws `timeout_error`.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 protected:
  ncclComm_t handle_;
  int rank_;
  int size_;
  device_ref device_;
  std::chrono::milliseconds timeout_;
};

namespace detail {

// Communicators aborted through a non-owning handle (a time-out inside a collective call): their
// owners must neither use nor free them again. An address leaves the set when NCCL hands it out
// anew.
class aborted_communicators {
 public:
  static void abort(ncclComm_t handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex());
    try {
      if (set().insert(handle).second) (void)ncclCommAbort(handle);
    } catch (...) { // no memory to remember it: abort anyway; the owner may abort it again
      (void)ncclCommAbort(handle);
    }
  }
  static bool contains(ncclComm_t handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex());
    return set().count(handle) != 0;
  }
  static void forget(ncclComm_t handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex());
    set().erase(handle);
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::unordered_set<ncclComm_t>& set() {
    static std::unordered_set<ncclComm_t> s;
    return s;
  }
};

// Between two polls of NCCL: yield for the first few thousand (a call NCCL hands to its helper
// thread is taken within microseconds, and a sleep would cost a whole scheduler tick), then sleep
// briefly so that a long wait does not burn a core.
inline void pause(unsigned spins) {
  if (spins < 4096)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

inline std::string rank_text(int rank, int size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// Polls a non-blocking communicator until its last operation is done. On an error or when
// `deadline` passes, aborts it and throws.
inline void wait_until_done(ncclComm_t comm, std::chrono::steady_clock::time_point deadline,
                            std::string_view what, int device, int rank, int size,
                            std::chrono::milliseconds timeout) {
  for (unsigned spins = 0;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) state = queried;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      aborted_communicators::abort(comm);
      throw nccl_error(state, what, device, rank);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      aborted_communicators::abort(comm);
      throw timeout_error(std::string(what) + " on device " + std::to_string(device) + " (" +
                          rank_text(rank, size) + ") did not finish within " +
                          std::to_string(timeout.count()) +
                          " ms: a peer rank never joined or is stuck. The communicator was "
                          "aborted; check the other ranks, then make a new one.");
    }
    pause(spins++);
  }
}

// The same for a communicator's last operation, bounded by the communicator's own time-out.
inline void wait_until_taken(communicator_ref comm, std::string_view what) {
  wait_until_done(comm.native_handle(), std::chrono::steady_clock::now() + comm.timeout(), what,
                  comm.device().get(), comm.rank(), comm.size(), comm.timeout());
}

inline ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

inline ncclConfig_t config_for(nccl_calls calls) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = calls == nccl_calls::blocking ? 1 : 0;
  return config;
}

} // namespace detail

class communicator;

namespace detail {
// Splits communicators driven from this thread together, in one NCCL group: rank i of `parents`
// joins color colors[i] at key keys[i], its calls as `calls` says. Waits until NCCL has made them,
// bounded by `deadline` where NCCL lets the wait be bounded; on failure aborts what was made.
inline std::vector<ncclComm_t> split_together(const std::vector<communicator_ref>& parents,
                                              const std::vector<int>& colors,
                                              const std::vector<int>& keys, nccl_calls calls,
                                              std::chrono::steady_clock::time_point deadline,
                                              std::string_view what) {
  std::vector<ncclComm_t> made(parents.size(), nullptr);
  std::vector<ncclConfig_t> configs(parents.size(), config_for(calls));
  auto abort_made = [&] {
    for (ncclComm_t c : made)
      if (c != nullptr) (void)ncclCommAbort(c);
  };
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t started = ncclSuccess;
  for (std::size_t i = 0;
       i < parents.size() && (started == ncclSuccess || started == ncclInProgress); ++i) {
    scoped_device on(parents[i].device());
    started = ncclCommSplit(parents[i].native_handle(), colors[i], keys[i], &made[i], &configs[i]);
  }
  const ncclResult_t ended = ncclGroupEnd();
  if ((started != ncclSuccess && started != ncclInProgress) ||
      (ended != ncclSuccess && ended != ncclInProgress)) {
    abort_made();
    throw nccl_error(started != ncclSuccess && started != ncclInProgress ? started : ended, what,
                     parents[0].device().get(), parents[0].rank());
  }
  try {
    for (std::size_t i = 0; i < parents.size(); ++i) {
      const communicator_ref& p = parents[i];
      wait_until_done(p.native_handle(), deadline, what, p.device().get(), p.rank(), p.size(),
                      p.timeout());
      if (made[i] == nullptr) throw nccl_error(ncclInternalError, what, p.device().get(), p.rank());
      wait_until_done(made[i], deadline, what, p.device().get(), p.rank(), p.size(), p.timeout());
    }
  } catch (...) {
    abort_made();
    throw;
  }
  return made;
}
} // namespace detail

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
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    scoped_device on(device);
    ncclConfig_t config = detail::nonblocking_config();
    ncclComm_t comm = nullptr;
    const ncclResult_t started = ncclCommInitRankConfig(&comm, size, id.native(), rank, &config);
    if (started != ncclSuccess && started != ncclInProgress) {
      if (comm != nullptr) (void)ncclCommAbort(comm);
      throw nccl_error(started, "ncclCommInitRankConfig", device.get(), rank);
    }
    std::vector<communicator> made;
    made.push_back(communicator(comm, rank, size, device, timeout, nccl_calls::bounded));
    detail::wait_until_done(comm, deadline, "ncclCommInitRankConfig", device.get(), rank, size,
                            timeout);
    if (calls == nccl_calls::blocking) made = blocking_twins(made, deadline);
    return std::move(made[0]);
  }

  // One rank per member of `group` (rank i on member i), made together in this process. An
  // emulated group is refused: NCCL does not allow two ranks on one GPU.
  static std::vector<communicator>
  create_clique(const device_group& group, std::chrono::milliseconds timeout = default_nccl_timeout,
                nccl_calls calls = nccl_calls::blocking) {
    if (group.is_emulated() && group.size() > 1)
      detail::throw_invalid_argument(
          "communicator::create_clique", "group",
          "is emulated: NCCL refuses two ranks on one GPU. Use cohort::p2p_clique (the "
          "peer-to-peer engine) for collectives on an emulated group, or make the clique over "
          "distinct GPUs.");
    const int size = static_cast<int>(group.size());
    const unique_id id = unique_id::create();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<ncclComm_t> handles(group.size(), nullptr);
    std::vector<ncclConfig_t> configs(group.size(), detail::nonblocking_config());
    ncclResult_t started = ncclGroupStart();
    check_nccl(started, "ncclGroupStart");
    for (int r = 0; r < size && started == ncclSuccess; ++r) {
      scoped_device on(group.device(r));
      started = ncclCommInitRankConfig(&handles[r], size, id.native(), r, &configs[r]);
      if (started == ncclInProgress) started = ncclSuccess;
    }
    ncclResult_t ended = ncclGroupEnd();
    if (started != ncclSuccess || (ended != ncclSuccess && ended != ncclInProgress)) {
      for (ncclComm_t h : handles)
        if (h != nullptr) (void)ncclCommAbort(h);
      throw nccl_error(started != ncclSuccess ? started : ended, "ncclCommInitRankConfig (clique)",
                       group.device(0).get(), 0);
    }
    std::vector<communicator> ranks;
    ranks.reserve(group.size());
    for (int r = 0; r < size; ++r)
      ranks.push_back(
          communicator(handles[r], r, size, group.device(r), timeout, nccl_calls::bounded));
    for (communicator& c : ranks)
      detail::wait_until_done(c.handle_, deadline, "ncclCommInitRankConfig (clique)",
                              c.device().get(), c.rank(), size, timeout);
    if (calls == nccl_calls::blocking) return blocking_twins(ranks, deadline);
    return ranks;
  }

  communicator(communicator&& other) noexcept
      : communicator_ref(std::exchange(other.handle_, nullptr), other.rank_, other.size_,
                         other.device_, other.timeout_)
      , calls_(other.calls_) {}
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
      rank_ = other.rank_;
      size_ = other.size_;
      device_ = other.device_;
      timeout_ = other.timeout_;
      calls_ = other.calls_;
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { destroy(); }

  // Ranks that pass the same `color` form a new communicator, ordered by `key` (then by rank),
  // whose calls behave as this one's. Every rank of this communicator must call it: for one rank
  // per process. Ranks driven from one thread split together with `nccl_clique::split`.
  communicator split(int color, int key,
                     std::chrono::milliseconds timeout = default_nccl_timeout) const {
    detail::require_argument(color >= 0, "communicator::split", "color",
                             "must be 0 or more (ranks that want no communicator are not "
                             "supported here).");
    const auto made =
        detail::split_together({*this}, {color}, {key}, calls_,
                               std::chrono::steady_clock::now() + timeout, "ncclCommSplit");
    return adopt(made[0], device_, timeout, calls_);
  }

  // How this communicator's calls behave.
  nccl_calls calls() const noexcept { return calls_; }

  // Waits until the work enqueued so far on `stream` (collectives of this communicator among it)
  // is done. If NCCL reports an error, or `timeout` passes first, aborts the communicator (which
  // ends the stuck collective) and throws.
  void wait(stream_ref stream, std::chrono::milliseconds timeout = default_nccl_timeout) {
    detail::require_argument(!empty(), "communicator::wait", "this",
                             "the communicator was aborted or moved from; make a new one.");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (unsigned spins = 0;;) {
      // A non-blocking communicator may still be handing operations to the stream
      // (ncclInProgress): the stream being idle means nothing until NCCL says ncclSuccess.
      ncclResult_t state = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(handle_, &state), "ncclCommGetAsyncError", device_.get(),
                 rank_);
      if (state == ncclSuccess && stream.ready()) return;
      if (state != ncclSuccess && state != ncclInProgress) {
        abort();
        throw nccl_error(state, "a collective (asynchronous error)", device_.get(), rank_);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        throw timeout_error("a collective on device " + std::to_string(device_.get()) + " (" +
                            detail::rank_text(rank_, size_) + ") did not finish within " +
                            std::to_string(timeout.count()) +
                            " ms: some rank never arrived. The communicator was aborted; make a "
                            "new one to go on.");
      }
      detail::pause(spins++);
    }
  }

  // Takes ownership of a communicator NCCL made (rank, size and device as NCCL says); `calls`
  // says how it was configured (it decides how its splits are made).
  static communicator adopt(ncclComm_t handle, device_ref device,
                            std::chrono::milliseconds timeout = default_nccl_timeout,
                            nccl_calls calls = nccl_calls::blocking) {
    int rank = 0, size = 0;
    check_nccl(ncclCommUserRank(handle, &rank), "ncclCommUserRank", device.get());
    check_nccl(ncclCommCount(handle, &size), "ncclCommCount", device.get(), rank);
    return communicator(handle, rank, size, device, timeout, calls);
  }

  // Ends every operation of this communicator at once and frees it; it cannot be used after.
  void abort() noexcept {
    if (handle_ == nullptr) return;
    detail::aborted_communicators::abort(handle_);
    detail::aborted_communicators::forget(handle_);
    handle_ = nullptr;
  }

  // True once aborted (by `abort` or by a time-out in a call that used it) or moved from.
  bool empty() const noexcept {
    return handle_ == nullptr || detail::aborted_communicators::contains(handle_);
  }

 private:
  communicator(ncclComm_t handle, int rank, int size, device_ref device,
               std::chrono::milliseconds timeout, nccl_calls calls) noexcept
      : communicator_ref(handle, rank, size, device, timeout)
      , calls_(calls) {
    detail::aborted_communicators::forget(handle); // a fresh communicator at a reused address
  }

  // Blocking twins of bounded communicators whose ranks have all joined: a split with one color
  // keeps every rank and peer. NCCL fixes a communicator's blocking mode when it makes it, so this
  // is how creation stays bounded while later calls cost what raw NCCL calls cost. The bounded
  // ones are freed when the caller drops them.
  static std::vector<communicator> blocking_twins(const std::vector<communicator>& bounded,
                                                  std::chrono::steady_clock::time_point deadline) {
    std::vector<communicator_ref> parents(bounded.begin(), bounded.end());
    std::vector<int> colors(bounded.size(), 0), keys;
    for (const communicator& c : bounded)
      keys.push_back(c.rank());
    const auto made = detail::split_together(parents, colors, keys, nccl_calls::blocking, deadline,
                                             "ncclCommSplit (blocking twin)");
    std::vector<communicator> twins;
    for (std::size_t i = 0; i < made.size(); ++i)
      twins.push_back(communicator(made[i], bounded[i].rank(), bounded[i].size(),
                                   bounded[i].device(), bounded[i].timeout(),
                                   nccl_calls::blocking));
    return twins;
  }

  // Finalize (flush pending work, bounded), then destroy; abort if that does not go cleanly.
  void destroy() noexcept {
    if (handle_ == nullptr) return;
    if (detail::aborted_communicators::contains(handle_)) { // NCCL has freed it already
      detail::aborted_communicators::forget(handle_);
      handle_ = nullptr;
      return;
    }
    try {
      scoped_device on(device_);
      ncclResult_t state = ncclCommFinalize(handle_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (ncclCommGetAsyncError(handle_, &state) != ncclSuccess) state = ncclSystemError;
      }
      if (state == ncclSuccess)
        (void)ncclCommDestroy(handle_);
      else
        (void)ncclCommAbort(handle_);
    } catch (...) {
      (void)ncclCommAbort(handle_);
    }
    handle_ = nullptr;
  }

  nccl_calls calls_;
};

} // namespace cohort
