// cohort/execution/chunk_pipeline.cuh — overlap work with communication: each member computes its
// work chunk by chunk on a compute stream of its own, and each chunk's collective runs on the
// member's stream (where cohort's collectives run) as soon as that chunk is done, while the next
// chunk computes. Only the last chunk's collective is left in the open.
//
//   cohort::chunk_pipeline overlap(group);          // one compute stream per member
//   overlap.run(
//       chunks,                                      // chunk k of member m, on m.stream:
//       [&](const cohort::member& m, std::size_t k) { my_compute(m.stream, m.rank, k); },
//       [&](std::size_t k) { cohort::all_reduce(peers, chunk_spans[k], cohort::sum); });
//
// Ordering: each member's compute stream first waits for the work already on the member's stream
// (the inputs, an earlier collective still reading the outputs), and the member's stream waits
// for chunk k's computation before chunk k's collective, so after `run` the member's streams are
// ordered after everything it enqueued, as after any other call over the group. The collectives
// must leave room for the computation beside them: cohort's peer-to-peer collectives use at most
// half of a member's SMs (p2p_clique_options::max_blocks makes that less). Chunks must not share
// memory that one chunk's computation writes and another's collective reads or writes.
//
// Load the computation's kernels first (run it once, alone): with CUDA's lazy loading, a kernel's
// first launch may wait for the kernels running on its GPU, and a collective that waits there for
// a peer whose chunk is that launch never ends (an emulated group is one GPU).
// For the same reason the computation must not make the host wait for its GPU (cudaFree,
// cudaDeviceSynchronize, a library that allocates as it goes): a collective may be waiting there
// for the chunk the host has not enqueued yet.
//
// The group (its streams) must outlive the pipeline; it is used from the group's host thread.
#pragma once

#include "../detail/nvtx.cuh"
#include "../devices/scoped_device.cuh"
#include "../errors/argument_error.cuh"
#include "../streams/event.cuh"
#include "../streams/stream.cuh"
#include "device_group.cuh"
#include "on_each.cuh"

#include <cstddef>
#include <vector>

namespace cohort {

class chunk_pipeline {
 public:
  explicit chunk_pipeline(const device_group& group) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      members_.push_back(group.stream(i));
      devices_.push_back(group.device(i));
      compute_.push_back(group.new_stream(i));
      ready_.emplace_back(group.device(i));
    }
  }

  std::size_t size() const noexcept { return members_.size(); }
  // Member i's compute stream (in its SM share on an emulated group that splits them).
  stream_ref compute_stream(std::size_t i) const {
    return detail::element_at(compute_, i, "chunk_pipeline::compute_stream", "members");
  }

  // Enqueues `compute(member, k)` for every member (given its compute stream, with its device
  // current) and then `communicate(k)` (which enqueues on the members' streams), for k = 0 ..
  // chunks - 1. Enqueues only; nothing waits on the host.
  template <class Compute, class Communicate>
  void run(std::size_t chunks, Compute&& compute, Communicate&& communicate) {
    if (chunks == 0) return;
    const detail::nvtx_range range("chunk_pipeline::run", "%zu chunks, %zu members", chunks,
                                   size());
    handoff(members_, compute_); // the compute streams start after the members' earlier work
    try {
      for (std::size_t k = 0; k < chunks; ++k) {
        for (std::size_t i = 0; i < size(); ++i) {
          scoped_device on(devices_[i]);
          compute(member{i, devices_[i], compute_[i]}, k);
        }
        // One event per member is enough: a wait takes the record current at the call.
        handoff(compute_, members_);
        communicate(k);
      }
    } catch (...) {
      // A computation that threw part-way may have left kernels on some compute streams (the
      // members before it, or its own before it threw): the members' streams still wait for
      // them, so that what is freed or read on those streams afterwards is not in use (and a
      // capture is joined again).
      rejoin_quietly();
      throw;
    }
  }

 private:
  // handoff(compute_, members_) for every member that can still take it (one failing does not
  // leave the others unjoined).
  void rejoin_quietly() noexcept {
    for (std::size_t i = 0; i < size(); ++i) {
      try {
        ready_[i].record(compute_[i]);
        members_[i].wait(ready_[i]);
      } catch (...) { // nothing more can be done for this member
      }
    }
  }

  template <class From, class To>
  void handoff(const std::vector<From>& from, const std::vector<To>& to) {
    for (std::size_t i = 0; i < size(); ++i) {
      ready_[i].record(from[i]);
      to[i].wait(ready_[i]);
    }
  }

  std::vector<stream_ref> members_; // the group's streams
  std::vector<device_ref> devices_;
  std::vector<cohort::stream> compute_;
  std::vector<event> ready_;
};

} // namespace cohort
