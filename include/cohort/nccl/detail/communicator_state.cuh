// cohort/nccl/detail/communicator_state.cuh — how a communicator ends, decided once and shared by
// its owner and every ref made from it.
//
// A collective that times out aborts the communicator through a ref, while its owner lives on.
// The record of that is this object, not a process-wide set of NCCL addresses: NCCL frees an
// aborted communicator at once and may put the next one at the same address, and a new
// communicator gets a record of its own, so one can never be taken for the other.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../streams/stream_ref.cuh"
#include "poll.cuh"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

namespace cohort::detail {

class communicator_state {
 public:
  // `handle` is what the user's calls use. A blocking communicator also has a `guard`: the
  // non-blocking communicator it was split from with splitShare, so that the two share NCCL's
  // streams and abort flag. Finalizing the guard can be polled against a deadline, and aborting
  // it ends the blocking one's stuck kernels too: that is what bounds the blocking one's end.
  // `held` counts the graphs that hold this communicator or a rank made with it in this process
  // (see graphs_).
  communicator_state(
      ncclComm_t handle, ncclComm_t guard, bool bounded_calls, device_ref device,
      std::shared_ptr<std::atomic<int>> held = std::make_shared<std::atomic<int>>(0)) noexcept
      : handle_(handle)
      , guard_(guard)
      , bounded_calls_(bounded_calls)
      , device_(device)
      , graphs_(std::move(held)) {}
  communicator_state(const communicator_state&) = delete;
  communicator_state& operator=(const communicator_state&) = delete;
  ~communicator_state() { end(std::chrono::milliseconds(0)); }

  ncclComm_t handle() const noexcept { return handle_; }
  bool bounded_calls() const noexcept { return bounded_calls_; }
  // Aborted or destroyed: the handle may be NCCL's next communicator, never to be used again.
  bool ended() const noexcept { return ended_.load(std::memory_order_acquire); }

  // A call of this communicator is being captured on `stream` (being captured): the graph holds
  // the communicator, and NCCL's finalize (its abort too) waits until every such graph is
  // destroyed. Each graph is counted once, through a CUDA user object it keeps; its release runs
  // on a CUDA thread, so it only counts down.
  void captured_on(stream_ref stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    cudaGraph_t graph = nullptr;
    check_cuda(cudaStreamGetCaptureInfo(stream.native_handle(), &status, &id, &graph),
               "cudaStreamGetCaptureInfo", stream.device().get());
    if (status != cudaStreamCaptureStatusActive || graph == nullptr) return;
    std::lock_guard<std::mutex> lock(capture_mutex_);
    if (id == last_capture_) return;
    auto* held = new std::shared_ptr<std::atomic<int>>(graphs_);
    cudaUserObject_t object = nullptr;
    const cudaError_t made = cudaUserObjectCreate(
        &object, held,
        [](void* p) {
          auto* count = static_cast<std::shared_ptr<std::atomic<int>>*>(p);
          (*count)->fetch_sub(1, std::memory_order_acq_rel);
          delete count;
        },
        1, cudaUserObjectNoDestructorSync);
    if (made != cudaSuccess) delete held;
    check_cuda(made, "cudaUserObjectCreate", stream.device().get());
    graphs_->fetch_add(1, std::memory_order_acq_rel);
    check_cuda(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove),
               "cudaGraphRetainUserObject", stream.device().get());
    last_capture_ = id;
  }

  // Work was posted that may never complete (an nccl_group ended by an exception, its calls
  // posted without their partners'): ending will abort at once instead of waiting for it.
  void strand() noexcept { stranded_.store(true, std::memory_order_release); }

  // Ends every operation at once and frees the communicator. True for the call that ended it.
  //
  // NCCL's abort raises the abort flag (the stuck kernels quit) and then, in the last of the
  // process's ranks of the communicator to end, waits until every graph that captured any of them
  // is destroyed, which the calling thread may be the one to do: while graphs hold it or such a
  // rank, the abort runs on a thread of its own, which frees the communicator once they are gone
  // and every such rank has ended (or never, if they never go).
  bool abort() noexcept {
    if (ended_.exchange(true, std::memory_order_acq_rel)) return false;
    if (graphs_->load(std::memory_order_acquire) > 0 && abort_apart()) return true;
    abort_handles();
    return true;
  }

  // Frees the communicator once its posted work is done, within `timeout`; aborts it where the
  // work does not finish in time (a peer that never comes) or NCCL reports an error. Never
  // throws.
  //
  // A communicator that graphs still hold (it, or a rank made with it in this process) when the
  // time-out has passed is left to them, neither finalized nor aborted (either could wait for the
  // graphs): it stays usable by their replays and is never freed.
  void end(std::chrono::milliseconds timeout) noexcept {
    if (ended_.exchange(true, std::memory_order_acq_rel)) return;
    const auto deadline = deadline_after(timeout);
    while (graphs_->load(std::memory_order_acquire) > 0) {
      if (std::chrono::steady_clock::now() > deadline) return; // left to the graphs
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    try {
      scoped_device on(device_);
      if (stranded_.load(std::memory_order_acquire) || !finish(deadline)) abort_handles();
    } catch (...) {
      abort_handles();
    }
  }

 private:
  void abort_handles() noexcept {
    abort_pair(handle_, guard_);
    handle_ = guard_ = nullptr;
  }
  static void abort_pair(ncclComm_t handle, ncclComm_t guard) noexcept {
    if (handle != nullptr) (void)ncclCommAbort(handle); // the shared flag ends the guard's work
    if (guard != nullptr) (void)ncclCommAbort(guard);
  }

  // abort_handles on a detached thread, with the communicator's device current there (a thread
  // with none would make device 0's primary context). False where no thread could be started.
  bool abort_apart() noexcept {
    try {
      std::thread([handle = handle_, guard = guard_, device = device_] {
        try {
          scoped_device on(device);
          abort_pair(handle, guard);
        } catch (...) { // the device could not be made current: NCCL makes its own current
          abort_pair(handle, guard);
        }
      }).detach();
    } catch (...) {
      return false;
    }
    handle_ = guard_ = nullptr;
    return true;
  }

  // Finalize (flush posted work) and destroy; false, with nothing freed that abort_handles would
  // free twice, where that cannot be done before the deadline.
  bool finish(std::chrono::steady_clock::time_point deadline) {
    // Only a non-blocking communicator's finalize returns at once: poll that one (the guard
    // drains the streams it shares with the blocking one, and so waits for the latter's kernels).
    ncclComm_t pollable = guard_ != nullptr ? guard_ : handle_;
    if (!bounded_calls_ && guard_ == nullptr) return finish_unguarded();
    const ncclResult_t started = ncclCommFinalize(pollable);
    if (started != ncclSuccess && started != ncclInProgress) return false;
    if (!poll_until(pollable, deadline).done()) return false;
    if (guard_ != nullptr) {
      // Nothing of the blocking one is left running, so its own (blocking) finalize does not wait.
      if (ncclCommFinalize(handle_) != ncclSuccess) return false;
      (void)ncclCommDestroy(handle_);
      handle_ = nullptr;
    }
    (void)ncclCommDestroy(pollable);
    handle_ = guard_ = nullptr;
    return true;
  }

  // A blocking communicator adopted from the user has no guard: NCCL's own finalize and destroy,
  // which wait for its work without a bound (documented at communicator::adopt).
  bool finish_unguarded() {
    if (ncclCommFinalize(handle_) != ncclSuccess) return false;
    (void)ncclCommDestroy(handle_);
    handle_ = nullptr;
    return true;
  }

  ncclComm_t handle_;
  ncclComm_t guard_;
  bool bounded_calls_;
  device_ref device_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> stranded_{false};
  std::mutex capture_mutex_;
  unsigned long long last_capture_ = 0; // capture ids start at 1
  // Live graphs holding the communicator or a rank made with it in this process (NCCL frees those
  // ranks together, the last to end waiting for every one's graphs); shared with those ranks and
  // with the graphs' user objects, which may outlive this.
  std::shared_ptr<std::atomic<int>> graphs_;
};

} // namespace cohort::detail
