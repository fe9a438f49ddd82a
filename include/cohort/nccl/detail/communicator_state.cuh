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
#include <new>
#include <thread>

namespace cohort::detail {

// The ranks of one NCCL communicator made together in this process. NCCL frees them together:
// the last of them destroyed or aborted waits for every graph that holds any of them. So a rank is
// freed on the caller's thread only where no graph holds the family, and the lock makes that check
// and the NCCL call one step: a sibling's capture (which counts its graph before its NCCL call is
// captured) waits for it, so no graph can come to hold the family in between.
class communicator_family {
 public:
  // A graph being captured holds one of the ranks. Throws std::system_error where the lock fails.
  void hold() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.fetch_add(1, std::memory_order_acq_rel);
  }
  // That graph was destroyed. Called on a CUDA thread: only counts down, never waits.
  void let_go() noexcept { held_.fetch_sub(1, std::memory_order_acq_rel); }
  bool held() const noexcept { return held_.load(std::memory_order_acquire) > 0; }

  // Frees a rank: `apart()` where graphs hold the family (it starts a thread of its own and says
  // whether it could), else, or where it could not, `here()`. Both run under the lock.
  template <class Here, class Apart>
  void release(Here here, Apart apart) noexcept {
    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    try {
      lock.lock();
    } catch (...) { // the lock failed: free the rank without it (the window it closes is open)
    }
    if (!(held() && apart())) here();
  }

 private:
  std::mutex mutex_;
  std::atomic<int> held_{0};
};

// Counts of the live CUDA graphs that hold a communicator: its own (NCCL's finalize of it waits
// for those), and its family's (see communicator_family). The graphs' user objects share them,
// and may outlive the communicator.
struct graph_holds {
  std::shared_ptr<std::atomic<int>> own;
  std::shared_ptr<communicator_family> family;
};

class communicator_state {
 public:
  // `handle` is what the user's calls use. A blocking communicator also has a `guard`: the
  // non-blocking communicator it was split from with splitShare, so that the two share NCCL's
  // streams and abort flag. Finalizing the guard can be polled against a deadline, and aborting
  // it ends the blocking one's stuck kernels too: that is what bounds the blocking one's end.
  // `family` is shared by the ranks made together with this one (see communicator_family); null:
  // a family of its own.
  // Throws std::bad_alloc (the caller aborts what it has not handed to an owner yet).
  communicator_state(ncclComm_t handle, ncclComm_t guard, bool bounded_calls, device_ref device,
                     std::shared_ptr<communicator_family> family = nullptr)
      : handle_(handle)
      , guard_(guard)
      , bounded_calls_(bounded_calls)
      , device_(device)
      , holds_{std::make_shared<std::atomic<int>>(0),
               family ? std::move(family) : std::make_shared<communicator_family>()} {}
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
    const int device = stream.device().get();
    check_cuda(cudaStreamGetCaptureInfo(stream.native_handle(), &status, &id, &graph),
               "cudaStreamGetCaptureInfo", device);
    if (status != cudaStreamCaptureStatusActive || graph == nullptr) return;
    std::lock_guard<std::mutex> lock(capture_mutex_);
    if (id == last_capture_) return;
    // Counted up first: where the user object cannot be made, they are counted down here; once it
    // exists, its release counts them down.
    holds_.family->hold();
    holds_.own->fetch_add(1, std::memory_order_acq_rel);
    auto* held = new (std::nothrow) graph_holds(holds_);
    cudaUserObject_t object = nullptr;
    const cudaError_t made = held == nullptr ? cudaErrorMemoryAllocation
                                             : cudaUserObjectCreate(&object, held, &let_go_of, 1,
                                                                    cudaUserObjectNoDestructorSync);
    if (made != cudaSuccess) {
      delete held;
      holds_.own->fetch_sub(1, std::memory_order_acq_rel);
      holds_.family->let_go();
    }
    check_cuda(made, "cudaUserObjectCreate", device);
    const cudaError_t retained =
        cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
    if (retained != cudaSuccess) (void)cudaUserObjectRelease(object, 1); // counts down again
    check_cuda(retained, "cudaGraphRetainUserObject", device);
    last_capture_ = id;
  }

  // Work was posted that may never complete (an nccl_group ended by an exception, its calls
  // posted without their partners'): ending will abort at once instead of waiting for it.
  void strand() noexcept { stranded_.store(true, std::memory_order_release); }

  // Ends every operation at once and frees the communicator. True for the call that ended it.
  //
  // NCCL's abort raises the abort flag (the stuck kernels quit) and then, in the last of its
  // family to be destroyed or aborted, waits until every graph that holds one of them is
  // destroyed, which the calling thread may be the one to do: while such graphs live, the abort
  // runs on a thread of its own, which frees the family once they are gone and each of its ranks
  // has been destroyed or aborted (or never, if the graphs never go).
  bool abort() noexcept {
    if (ended_.exchange(true, std::memory_order_acq_rel)) return false;
    release(&abort_pair);
    return true;
  }

  // Frees the communicator once its posted work is done, within `timeout`; aborts it where the
  // work does not finish in time (a peer that never comes) or NCCL reports an error. Never
  // throws, and never waits past `timeout` for NCCL's work (but for a blocking communicator
  // adopted from the user, which has no guard: see finalize); NCCL's abort waits for the kernels
  // already running on the device, so a kernel of the user's that does not end holds it.
  //
  // A communicator that graphs still hold when the time-out has passed is left to them, neither
  // finalized nor aborted (either would wait for the graphs): it stays usable by their replays
  // and is never freed (nor, then, is its family: NCCL frees those ranks together). Where only
  // graphs of its family hold them, it is finalized here and destroyed (or aborted) on a thread
  // of its own, as NCCL's last destroy waits for those graphs.
  void end(std::chrono::milliseconds timeout) noexcept {
    if (ended_.exchange(true, std::memory_order_acq_rel)) return;
    const auto deadline = deadline_after(timeout);
    while (holds_.own->load(std::memory_order_acquire) > 0) {
      if (std::chrono::steady_clock::now() > deadline) return; // left to the graphs
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    bool finalized = false;
    try {
      scoped_device on(device_);
      finalized = !stranded_.load(std::memory_order_acquire) && finalize(deadline);
    } catch (...) { // the device could not be made current, or NCCL's poll threw: abort
    }
    release(finalized ? &destroy_pair : &abort_pair);
  }

 private:
  // Frees the handles with `how` (destroy or abort): on a thread of its own while graphs hold the
  // family, else here. Whether they do is read right before the NCCL call, under the family's lock
  // (communicator_family::release): finalizing can take the whole time-out, in which another
  // thread may capture a sibling and abort it apart, leaving this rank the last of the family.
  void release(void (*how)(ncclComm_t, ncclComm_t)) noexcept {
    holds_.family->release([&] { release_on(device_, how, handle_, guard_); },
                           [&] { return run_apart(how); });
    handle_ = guard_ = nullptr;
  }

  // A graph that held the communicator was destroyed (the release of its user object, on a CUDA
  // thread).
  static void let_go_of(void* counts) noexcept {
    auto* holds = static_cast<graph_holds*>(counts);
    holds->own->fetch_sub(1, std::memory_order_acq_rel);
    holds->family->let_go();
    delete holds;
  }

  static void abort_pair(ncclComm_t handle, ncclComm_t guard) noexcept {
    if (handle != nullptr) (void)ncclCommAbort(handle); // the shared flag ends the guard's work
    if (guard != nullptr) (void)ncclCommAbort(guard);
  }
  static void destroy_pair(ncclComm_t handle, ncclComm_t guard) noexcept {
    if (handle != nullptr) (void)ncclCommDestroy(handle);
    if (guard != nullptr) (void)ncclCommDestroy(guard);
  }

  // release(handle, guard) with `device` current, and what was current before made current again:
  // NCCL's last destroy or abort sets the device and then restores the one it found, which, with
  // no context current, makes device 0's primary context.
  static void release_on(device_ref device, void (*release)(ncclComm_t, ncclComm_t),
                         ncclComm_t handle, ncclComm_t guard) noexcept {
    on_device_quietly(
        device, [&] { release(handle, guard); }, if_not_current::run_anyway);
  }

  // release_on on a detached thread. False where no thread could be started.
  bool run_apart(void (*release)(ncclComm_t, ncclComm_t)) const noexcept {
    try {
      std::thread([release, handle = handle_, guard = guard_, device = device_] {
        release_on(device, release, handle, guard);
      }).detach();
    } catch (...) {
      return false;
    }
    return true;
  }

  // Finalizes (flushes posted work) before the deadline, or says it could not: what is left is
  // then aborted, finalized or not. The caller destroys what was finalized.
  bool finalize(std::chrono::steady_clock::time_point deadline) {
    // A blocking communicator adopted from the user has no guard: NCCL's own finalize, which
    // waits for its work without a bound (documented at communicator::adopt).
    if (!bounded_calls_ && guard_ == nullptr) return ncclCommFinalize(handle_) == ncclSuccess;
    // Only a non-blocking communicator's finalize returns at once: poll that one (the guard
    // drains the streams it shares with the blocking one, and so waits for the latter's kernels).
    const ncclComm_t pollable = guard_ != nullptr ? guard_ : handle_;
    const ncclResult_t started = ncclCommFinalize(pollable);
    if (started != ncclSuccess && started != ncclInProgress) return false;
    if (!poll_until(pollable, deadline).done()) return false;
    // Nothing of the blocking one is left running, so its own (blocking) finalize does not wait
    // (its graphs are gone: end waited for them).
    return guard_ == nullptr || ncclCommFinalize(handle_) == ncclSuccess;
  }

  ncclComm_t handle_;
  ncclComm_t guard_;
  bool bounded_calls_;
  device_ref device_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> stranded_{false};
  std::mutex capture_mutex_;
  unsigned long long last_capture_ = 0; // capture ids start at 1
  graph_holds holds_;
};

} // namespace cohort::detail
