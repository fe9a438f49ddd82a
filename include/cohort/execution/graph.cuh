// cohort/execution/graph.cuh — a device group's work captured once into one CUDA graph, and
// replayed with one host call.
//
//   cohort::device_group group(cohort::devices());
//   cohort::p2p_clique peers(group);
//   cohort::distributed_buffer<float> x(group,
//                                       cohort::partition::replicated(1 << 20, group.size()));
//   cohort::group_graph step = cohort::group_graph::capture(group, [&] {
//     cohort::multi_device_for_each(group, x, [] __device__(float& v) { v *= 0.5f; });
//     cohort::all_reduce(peers, x, cohort::sum);
//   });
//   for (int i = 0; i < 100; ++i) step.launch();   // ordered with the group's other work
//
// `capture` begins capture on an origin stream of its own (on member 0's device), forks every
// member's stream from it, runs `work` (which enqueues on the members' streams as usual), joins
// them back and instantiates the result. `launch()` orders the replay after everything already on
// the members' streams and their later work after it, so replays and direct calls mix freely;
// `launch(stream)` is the single cudaGraphLaunch, ordered only by `stream`.
//
// What cannot be captured is refused by name before it enqueues anything (a `pending` reduction,
// `device_group::synchronize`, NCCL's bounded calls); anything else that breaks the capture ends
// it with a cuda_error naming `group_graph::capture`. The group, and whatever the work uses (its
// buffers, cliques), must outlive the graph; the graph may be destroyed while a replay runs.
#pragma once

#include "../detail/nvtx.cuh"
#include "../devices/scoped_device.cuh"
#include "../errors/argument_error.cuh"
#include "../errors/cuda_error.cuh"
#include "../streams/event.cuh"
#include "../streams/stream.cuh"
#include "detail/launch_order.cuh"
#include "device_group.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

// How capture treats other threads' calls that are unsafe during capture (cudaStreamCaptureMode).
enum class capture_mode {
  global = cudaStreamCaptureModeGlobal,           // refused in every thread (CUDA's default)
  this_thread = cudaStreamCaptureModeThreadLocal, // refused in the capturing thread only
  relaxed = cudaStreamCaptureModeRelaxed,         // never refused
};

class group_graph {
 public:
  template <class Work>
  static group_graph capture(const device_group& group, Work&& work,
                             capture_mode mode = capture_mode::global) {
    const detail::nvtx_range range("group_graph::capture", "%zu members", group.size());
    detail::members_of(group, "group_graph::capture");
    for (std::size_t i = 0; i < group.size(); ++i)
      if (group.stream(i).is_capturing())
        detail::throw_invalid_argument("group_graph::capture", "group",
                                       "member " + std::to_string(i) + " (device " +
                                           std::to_string(group.device(i).get()) +
                                           ")'s stream is already being captured; captures do "
                                           "not nest. End that capture first.");
    group_graph g(group);
    const int device = g.origin_.device().get();
    // The runtime calls on the graph run with the origin's device current: with none current,
    // the runtime would make (and create) device 0's primary context. The work itself runs with
    // the caller's current device.
    {
      scoped_device on(g.origin_.device());
      check_cuda(cudaStreamBeginCapture(g.origin_.native_handle(),
                                        static_cast<cudaStreamCaptureMode>(mode)),
                 "cudaStreamBeginCapture (group_graph::capture)", device);
    }
    cudaGraph_t graph = nullptr;
    try {
      g.fork();
      work();
      g.join();
    } catch (...) {
      // End the capture so that no stream is left capturing, and drop what it made.
      (void)g.join_quietly();
      try {
        scoped_device on(g.origin_.device());
        if (cudaStreamEndCapture(g.origin_.native_handle(), &graph) == cudaSuccess && graph)
          ignore_cuda_error(cudaGraphDestroy(graph));
        (void)cudaGetLastError();
      } catch (...) { // the device could not be made current: the work's own error goes on
      }
      throw;
    }
    scoped_device on(g.origin_.device());
    const cudaError_t ended = cudaStreamEndCapture(g.origin_.native_handle(), &graph);
    if (ended != cudaSuccess) {
      ignore_cuda_error(ended);
      throw cuda_error(ended, "cudaStreamEndCapture (group_graph::capture)", device,
                       std::source_location::current(),
                       "The captured work enqueued something that cannot be captured (a host "
                       "synchronisation, a call on a stream outside the group), or forked a "
                       "stream it did not join back.");
    }
    cudaError_t made = cudaSuccess;
    {
      // Instantiating loads the graph's kernels, which with lazy loading can wait for the kernels
      // running on the device: in the launch order's lock, as every other load (launch_order.cuh).
      const std::lock_guard lock(detail::multi_stream_launch_lock());
      made = cudaGraphInstantiate(&g.exec_, graph, 0);
    }
    ignore_cuda_error(cudaGraphDestroy(graph));
    check_cuda(made, "cudaGraphInstantiate (group_graph::capture)", device);
    return g;
  }

  // The graph replays on the group's streams: a temporary group would be gone before the replay.
  template <class Work>
  static group_graph capture(device_group&&, Work&&, capture_mode = capture_mode::global) = delete;

  group_graph(group_graph&& other) noexcept
      : origin_(std::move(other.origin_))
      , streams_(std::move(other.streams_))
      , origin_done_(std::move(other.origin_done_))
      , member_done_(std::move(other.member_done_))
      , exec_(std::exchange(other.exec_, nullptr)) {}
  group_graph& operator=(group_graph&& other) noexcept {
    if (this != &other) {
      destroy();
      origin_ = std::move(other.origin_);
      streams_ = std::move(other.streams_);
      origin_done_ = std::move(other.origin_done_);
      member_done_ = std::move(other.member_done_);
      exec_ = std::exchange(other.exec_, nullptr);
    }
    return *this;
  }
  group_graph(const group_graph&) = delete;
  group_graph& operator=(const group_graph&) = delete;
  // A replay still running frees the graph when it ends (cudaGraphExecDestroy).
  ~group_graph() { destroy(); }

  // Replays the graph after all work already enqueued on the members' streams; work enqueued on
  // them afterwards runs after the replay.
  void launch() {
    const detail::nvtx_range range("group_graph::launch", "after the members' work");
    require_graph("group_graph::launch");
    join();
    launch(origin_);
    fork();
  }
  // Replays the graph on `stream`, ordered only by it (the caller orders the members' streams).
  void launch(stream_ref stream) {
    const detail::nvtx_range range("group_graph::launch", "on device %d", stream.device().get());
    detail::require_stream(stream, "group_graph::launch");
    require_graph("group_graph::launch");
    scoped_device on(stream.device());
    // A graph may hold p2p calls, whose kernels wait for each other across the members' streams:
    // its launch takes its place in the same order as every direct call's launches.
    const std::lock_guard lock(detail::multi_stream_launch_lock());
    check_cuda(cudaGraphLaunch(exec_, stream.native_handle()), "cudaGraphLaunch (group_graph)",
               stream.device().get());
  }

  cudaGraphExec_t native_handle() const noexcept { return exec_; }
  // The stream `launch()` replays on (on member 0's device).
  stream_ref origin() const noexcept { return origin_; }

 private:
  explicit group_graph(const device_group& group)
      : origin_(group.device(0))
      , origin_done_(group.device(0)) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      streams_.push_back(group.stream(i));
      member_done_.emplace_back(group.device(i));
    }
  }

  void require_graph(std::string_view function) const {
    if (exec_ == nullptr)
      detail::throw_invalid_argument(function, "this", "the graph was moved away.");
  }

  // The members' streams wait for the origin's work so far (the events are reused: a wait takes
  // the record current when it is enqueued).
  void fork() {
    origin_done_.record(origin_);
    for (stream_ref s : streams_)
      s.wait(origin_done_);
  }
  void join() {
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      member_done_[i].record(streams_[i]);
      origin_.wait(member_done_[i]);
    }
  }
  bool join_quietly() noexcept {
    try {
      join();
      return true;
    } catch (...) {
      return false;
    }
  }

  void destroy() noexcept {
    if (exec_ == nullptr) return;
    try {
      scoped_device on(origin_.device());
      ignore_cuda_error(cudaGraphExecDestroy(exec_));
    } catch (...) { // the device could not be made current: the graph is left to the process
    }
    exec_ = nullptr;
  }

  stream origin_;
  std::vector<stream_ref> streams_;
  event origin_done_;
  std::vector<event> member_done_;
  cudaGraphExec_t exec_ = nullptr;
};

} // namespace cohort
