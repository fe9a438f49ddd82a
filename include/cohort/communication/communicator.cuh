// cohort/communication/communicator.cuh — NCCL communicators that cannot hang you.
//
// A `communicator` is one rank of an NCCL communicator, on one device. It is created
// non-blocking with a timeout: if a peer never joins, the creating call throws `timeout_error`
// naming the rank and the time instead of hanging. `wait` bounds a collective the same way, and an
// asynchronous NCCL error aborts the communicator and raises; a new one can be made afterwards.
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

class communicator_ref {
public:
  communicator_ref(ncclComm_t handle, int rank, int size, device_ref device,
                   std::chrono::milliseconds timeout = default_nccl_timeout) noexcept
      : handle_(handle), rank_(rank), size_(size), device_(device), timeout_(timeout) {}
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

inline std::string rank_text(int rank, int size) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// Polls a non-blocking communicator until its last operation is done. On an error or when
// `deadline` passes, aborts it and throws.
inline void wait_until_done(ncclComm_t comm, std::chrono::steady_clock::time_point deadline,
                            std::string_view what, int device, int rank, int size,
                            std::chrono::milliseconds timeout) {
  while (true) {
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
    std::this_thread::sleep_for(std::chrono::microseconds(200));
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

} // namespace detail

class communicator : public communicator_ref {
public:
  // This process's rank of a `size`-rank communicator identified by `id`, on `device`. Throws
  // `timeout_error` if the other ranks have not all joined within `timeout`.
  static communicator create(const unique_id& id, int size, int rank, device_ref device,
                             std::chrono::milliseconds timeout = default_nccl_timeout) {
    detail::require_argument(size > 0, "communicator::create", "size", "must be at least 1.");
    detail::require_argument(rank >= 0 && rank < size, "communicator::create", "rank",
                             "must be in [0, size); got " + std::to_string(rank) + " of " +
                                 std::to_string(size) + ".");
    detail::require_valid_device(device, "communicator::create", "device");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    scoped_device on(device);
    ncclConfig_t config = detail::nonblocking_config();
    ncclComm_t comm = nullptr;
    const ncclResult_t started =
        ncclCommInitRankConfig(&comm, size, id.native(), rank, &config);
    if (started != ncclSuccess && started != ncclInProgress) {
      if (comm != nullptr) (void)ncclCommAbort(comm);
      throw nccl_error(started, "ncclCommInitRankConfig", device.get(), rank);
    }
    detail::wait_until_done(comm, deadline, "ncclCommInitRankConfig", device.get(), rank, size,
                            timeout);
    return communicator(comm, rank, size, device, timeout);
  }

  // One rank per member of `group` (rank i on member i), made together in this process. An
  // emulated group is refused: NCCL does not allow two ranks on one GPU.
  static std::vector<communicator>
  create_clique(const device_group& group, std::chrono::milliseconds timeout = default_nccl_timeout) {
    if (group.is_emulated() && group.size() > 1)
      detail::throw_invalid_argument(
          "communicator::create_clique", "group",
          "is emulated: NCCL refuses two ranks on one GPU. Make the clique over a group of "
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
      ranks.push_back(communicator(handles[r], r, size, group.device(r), timeout));
    for (communicator& c : ranks)
      detail::wait_until_done(c.handle_, deadline, "ncclCommInitRankConfig (clique)",
                              c.device().get(), c.rank(), size, timeout);
    return ranks;
  }

  communicator(communicator&& other) noexcept
      : communicator_ref(std::exchange(other.handle_, nullptr), other.rank_, other.size_,
                         other.device_, other.timeout_) {}
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
      rank_ = other.rank_;
      size_ = other.size_;
      device_ = other.device_;
      timeout_ = other.timeout_;
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { destroy(); }

  // Ranks that pass the same `color` form a new communicator, ordered by `key` (then by rank).
  // Every rank of this communicator must call it: for one rank per process. Ranks driven from
  // one thread split together with `clique::split`.
  communicator split(int color, int key,
                     std::chrono::milliseconds timeout = default_nccl_timeout) const {
    detail::require_argument(color >= 0, "communicator::split", "color",
                             "must be 0 or more (ranks that want no communicator are not "
                             "supported here).");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    scoped_device on(device_);
    ncclConfig_t config = detail::nonblocking_config();
    ncclComm_t made = nullptr;
    const ncclResult_t started = ncclCommSplit(handle_, color, key, &made, &config);
    if (started != ncclSuccess && started != ncclInProgress)
      throw nccl_error(started, "ncclCommSplit", device_.get(), rank_);
    detail::wait_until_done(handle_, deadline, "ncclCommSplit", device_.get(), rank_, size_, timeout);
    detail::wait_until_done(made, deadline, "ncclCommSplit", device_.get(), rank_, size_, timeout);
    return adopt(made, device_, timeout);
  }

  // Waits until the work enqueued so far on `stream` (collectives of this communicator among it)
  // is done. If NCCL reports an error, or `timeout` passes first, aborts the communicator (which
  // ends the stuck collective) and throws.
  void wait(stream_ref stream, std::chrono::milliseconds timeout = default_nccl_timeout) {
    detail::require_argument(!empty(), "communicator::wait", "this",
                             "the communicator was aborted or moved from; make a new one.");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      // A non-blocking communicator may still be handing operations to the stream
      // (ncclInProgress): the stream being idle means nothing until NCCL says ncclSuccess.
      ncclResult_t state = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(handle_, &state), "ncclCommGetAsyncError", device_.get(), rank_);
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
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // Takes ownership of a communicator NCCL made (rank, size and device as NCCL says).
  static communicator adopt(ncclComm_t handle, device_ref device,
                            std::chrono::milliseconds timeout = default_nccl_timeout) {
    int rank = 0, size = 0;
    check_nccl(ncclCommUserRank(handle, &rank), "ncclCommUserRank", device.get());
    check_nccl(ncclCommCount(handle, &size), "ncclCommCount", device.get(), rank);
    return communicator(handle, rank, size, device, timeout);
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
               std::chrono::milliseconds timeout) noexcept
      : communicator_ref(handle, rank, size, device, timeout) {
    detail::aborted_communicators::forget(handle); // a fresh communicator at a reused address
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
};

} // namespace cohort
