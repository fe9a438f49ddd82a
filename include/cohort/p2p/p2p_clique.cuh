// cohort/p2p/p2p_clique.cuh — the members of a device group, ready for cohort's own
// peer-to-peer collectives (p2p/collectives.cuh): every pair has peer access, and each member
// holds, in its own memory, the engine's state (signal slots, point-to-point flags and counts for
// users' kernels (p2p/device.cuh), and per-block epochs, which the kernels advance) and a scratch
// buffer for small messages.
//
//   cohort::device_group group(cohort::devices());
//   cohort::p2p_clique peers(group);                 // throws naming a pair without a peer path
//   cohort::all_reduce(peers, data, cohort::sum);    // any type, any operator; no NCCL needed
//   cohort::p2p_clique patient(group, {.patience = cohort::p2p_clique_options::wait_forever});
//
// It works the same on an emulated group (every logical device on one GPU), where its members'
// kernels must run at the same time on one GPU: CUDA does not promise that (green contexts may
// share hardware queues), and it has always held natively, but under compute-sanitizer with other
// sanitized processes on the GPU a member's kernel has not started (run those one at a time).
// Calls are enqueued on the group's streams and never wait on the host, so back-to-back calls
// need no synchronisation, and they can be captured into CUDA graphs (cohort::group_graph) and
// replayed any number of times, mixed with direct calls.
//
// Rules, as NCCL has its own for concurrent communicators. A clique is used from one host thread at
// a time; its calls run in the order they are made, on every member; cliques of different threads
// may share GPUs (each call's launches on all members happen under one process-wide lock, so that
// every hardware queue sees the calls in the same order). Users' kernels that open a p2p_session
// (p2p/device.cuh) are calls of the clique too, ordered with the others the same way. A call's grid
// is a budget, at most half of each member's SMs (`max_blocks`), so that the kernels of two cliques
// over the same GPUs, or a user's kernel beside them, can be resident together; calls of more than
// two cliques that may run at once on the same GPUs need an order between them (the same streams,
// or events), or smaller `max_blocks`. The group (its streams) must outlive the clique; the group
// may be moved (the clique keeps the members' devices and streams, not the group), the clique
// itself is neither copied nor moved. A graph holding the clique's calls must not be launched after
// the clique is destroyed, or after a launch broke it part-way (its barriers then no longer wait).
//
// A peer that does not arrive within the patience stops the clique, not the process: every
// kernel on it leaves, and the next call that moves data, check() and the group's synchronize()
// throw a p2p_error naming the ranks, block and call; a graph replayed on it then does nothing
// and reports the same. Destroy it and make a new one (p2p_error.cuh, docs/p2p.md).
// Destroying the clique frees its memory only after every member's last call has finished
// (stream-ordered; no host wait).
#pragma once

#include "../errors/argument_error.cuh"
#include "../errors/p2p_error.cuh"
#include "../execution/detail/group_access.cuh"
#include "../execution/detail/launch_order.cuh"
#include "../execution/detail/peer_paths.cuh"
#include "../execution/device_group.cuh"
#include "../execution/launch.cuh"
#include "../memory/device_buffer.cuh"
#include "../streams/event.cuh"
#include "detail/fault_memory.cuh"
#include "detail/kernels.cuh"
#include "p2p_clique_options.cuh"
#include "p2p_progress.cuh"

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace cohort {

namespace detail::p2p {
struct clique_access;
} // namespace detail::p2p

class p2p_clique {
 public:
  static constexpr std::size_t default_one_shot_limit = p2p_clique_options{}.one_shot_limit;
  // One-shot limits above this are refused (twice the limit is allocated on every member).
  static constexpr std::size_t max_one_shot_limit = std::size_t{1} << 36;

  // Every member of `group` must reach every other's memory directly: peer access is enabled
  // here (and refused, naming the pair, where the hardware has no peer path).
  explicit p2p_clique(const device_group& group, p2p_clique_options options = {})
      : devices_(checked_devices(group))
      , emulated_(group.is_emulated())
      , faults_(devices_.front(), devices_.size())
      , options_(checked(options)) {
    detail::require_peer_paths(group, "p2p_clique",
                               "the peer-to-peer engine needs every pair to reach the other's "
                               "memory. Use the NCCL clique for this group.");
    group.enable_peer_access();
    const std::size_t n = group.size();
    watch_ = detail::group_watch_access::watch(group);
    state_.reserve(n);
    scratch_.reserve(n);
    last_call_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      streams_.push_back(group.stream(i));
      state_.emplace_back(state_words, group.stream(i));
      state_.back().fill_bytes(0);
      scratch_.emplace_back(2 * options_.one_shot_limit, group.stream(i));
      last_call_.emplace_back(group.device(i));
      rescue_.emplace_back(group.device(i)); // in the primary context: see release()
    }
    group.synchronize(); // every slot is zero before another member's kernel reads it
    unsigned budget = options_.max_blocks != 0 ? options_.max_blocks : detail::p2p::max_blocks;
    for (std::size_t i = 0; i < n; ++i) {
      budget = std::min(budget, std::max(1u, group.concurrent_sm_count(i) / 2));
    }
    blocks_ = std::min<unsigned>(budget, detail::p2p::max_blocks);
    for (std::size_t i = 0; i < n; ++i)
      engines_.push_back(make_engine(i));
    // Load the release kernel now, by a launch that releases nobody: loading it once a member's
    // kernel waits could wait for that kernel (lazy loading), which waits for the release. Loaded
    // under the launch lock, as every p2p kernel is: another thread's call half launched would
    // otherwise have a kernel waiting on this device for peers that the loading may hold back
    // (execution/detail/launch_order.cuh).
    {
      const std::lock_guard lock(detail::multi_stream_launch_lock());
      for (std::size_t i = 0; i < n; ++i)
        release(i, static_cast<int>(n), 1);
    }
    for (stream_ref s : rescue_)
      s.synchronize();
    // Last: a constructor that throws leaves nothing registered.
    watch_key_ = watch_->add([this] { check("device_group::synchronize"); });
  }
  // The one-shot limit alone (the other options at their defaults). A template, so that a braced
  // `p2p_clique(group, {})` is the options form (all defaults), not a limit of 0.
  template <std::integral I>
  p2p_clique(const device_group& group, I one_shot_limit)
      : p2p_clique(group, p2p_clique_options{.one_shot_limit = limit_in_bytes(one_shot_limit)}) {}

  p2p_clique(const p2p_clique&) = delete;
  p2p_clique& operator=(const p2p_clique&) = delete;

  // Every member's stream waits for every member's last call before the state is freed on it:
  // a member's kernel may read another member's scratch and signals until the call ends there.
  ~p2p_clique() {
    watch_->remove(watch_key_);
    try {
      for (std::size_t i = 0; i < size(); ++i)
        last_call_[i].record(streams_[i]);
      for (std::size_t j = 0; j < size(); ++j)
        for (std::size_t i = 0; i < size(); ++i)
          if (i != j) streams_[j].wait(last_call_[i]);
      faults_.retire_after(streams_[0]); // after every member's last call
    } catch (...) { // a lost context: nothing more can run on it, and freeing is all that is left
      faults_.abandon();
    }
  }

  std::size_t size() const noexcept { return devices_.size(); }
  device_ref device(std::size_t i) const {
    return detail::element_at(devices_, i, "p2p_clique::device", "members");
  }
  stream_ref stream(std::size_t i) const {
    return detail::element_at(streams_, i, "p2p_clique::stream", "members");
  }
  bool is_emulated() const noexcept { return emulated_; }
  const p2p_clique_options& options() const noexcept { return options_; }

  // The most bytes per rank the one-shot algorithm can take.
  std::size_t one_shot_limit() const noexcept { return options_.one_shot_limit; }
  // Blocks per rank a call uses at most.
  unsigned max_blocks() const noexcept { return blocks_; }
  // Whether the clique can no longer run calls: a peer did not arrive within the patience (check()
  // says which), or an earlier call's launch failed part-way, which leaves the members' epochs
  // apart for good. Every later call that moves data is refused: make a new clique.
  bool broken() const noexcept { return broken_ || faults_.any_written(); }

  // Throws the p2p_error that a peer that did not arrive left (naming `call` as the host call that
  // found it); returns where none did. The clique's calls and the group's synchronize() check.
  void check(const char* call = "p2p_clique::check") const {
    if (faults_.any_written()) [[unlikely]]
      throw p2p_error(call, faults_.waits(devices_));
  }

  // Where each rank stands: its last call started and finished, and what a block of it has waited
  // for longer than a millisecond. Safe from another host thread while a call of the clique waits
  // (it copies on streams of its own), also under wait_forever.
  std::vector<p2p_rank_progress> progress() const {
    std::vector<p2p_rank_progress> ranks;
    for (std::size_t i = 0; i < size(); ++i)
      ranks.push_back(
          detail::p2p::read_progress(static_cast<int>(i), devices_[i], state_[i].data()));
    return ranks;
  }

 private:
  // The collectives, the device API and the training layer reach what follows through
  // detail::p2p::clique_access.
  friend struct detail::p2p::clique_access;

  // Bytes per rank up to which `automatic` picks one-shot: the limit on 2 members; on n members
  // one-shot reads n/2 times the data two-shot reads, so the limit shrinks by 2/n (a traffic
  // argument, measured on 2 GPUs only so far).
  std::size_t automatic_one_shot_limit() const noexcept {
    return size() <= 2 ? one_shot_limit() : one_shot_limit() * 2 / size();
  }
  // What rank `rank`'s kernels are given: the same at every call.
  const detail::p2p::engine& engine_for(std::size_t rank) const { return engines_.at(rank); }
  // Blocks per rank for `packs` units of work each, `per_block` a block, within the budget.
  unsigned blocks_for(std::size_t packs,
                      std::size_t per_block = detail::p2p::block_threads) const noexcept {
    const std::size_t wanted = (packs + per_block - 1) / per_block;
    return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, blocks_));
  }

  // Releases member i's kernel that waits for members [first_missing, size()) at any of the
  // first `blocks` blocks, on a stream of the clique's own in the device's primary context (its
  // kernel holds the member's stream; a second stream in an emulated member's green context did
  // not run beside the waiting kernel on an H200, a primary-context stream did).
  //
  // The release comes after the work already queued on the missing members' streams: their
  // earlier calls still write their barrier values into member i's slots. Raised before those,
  // the slots let member i's earlier call pass its barrier without them, and their values then
  // overwrite the release (member i's failed call waits out its patience).
  void release(std::size_t i, int first_missing, unsigned blocks) {
    try {
      for (std::size_t j = static_cast<std::size_t>(first_missing); j < size(); ++j) {
        event queued(device(j));
        queued.record(stream(j));
        rescue_.at(i).wait(queued);
      }
    } catch (...) { // a missing member's device is lost: nothing of it is coming; release now
    }
    launch(rescue_.at(i),
           {.grid = blocks, .block = detail::p2p::max_ranks, .name = "cohort p2p release_waiting"},
           detail::p2p::release_waiting<std::uint64_t>, engines_.at(i).signals[i],
           engines_.at(i).flags[i], first_missing, static_cast<int>(size()));
  }

#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
  // Moves every member's epochs forward to `epoch` (a multiple of 4, above every epoch used so
  // far), as if that many barrier values had been used; waits for the members' streams.
  void set_epochs_for_testing(std::uint64_t epoch) {
    std::vector<std::uint64_t> values(detail::p2p::max_blocks, epoch);
    for (std::size_t i = 0; i < size(); ++i) {
      scoped_device on(devices_[i]);
      check_cuda(cudaMemcpyAsync(engines_[i].epochs, values.data(),
                                 values.size() * sizeof(std::uint64_t), cudaMemcpyHostToDevice,
                                 streams_[i].native_handle()),
                 "cudaMemcpyAsync (p2p epochs)", devices_[i].get());
      check_cuda(cudaStreamSynchronize(streams_[i].native_handle()), "cudaStreamSynchronize",
                 devices_[i].get());
    }
  }
#endif

  static constexpr std::size_t state_words = detail::p2p::state_layout::words;

  // A limit given as any integer: a negative one is refused (it would wrap to a huge one).
  template <std::integral I>
  static std::size_t limit_in_bytes(I limit) {
    if constexpr (std::is_signed_v<I>)
      detail::require_argument(limit >= 0, "p2p_clique", "one_shot_limit", [&] {
        return "must not be negative (" + std::to_string(limit) + ").";
      });
    return static_cast<std::size_t>(limit);
  }

  // The group's devices, once it is known to be one a clique can be made over: checked before
  // anything is allocated (the fault records take pinned memory, which a capture refuses).
  static std::vector<device_ref> checked_devices(const device_group& group) {
    detail::members_of(group, "p2p_clique");
    if (group.size() > static_cast<std::size_t>(detail::p2p::max_ranks))
      detail::throw_invalid_argument("p2p_clique", "group",
                                     "has " + std::to_string(group.size()) +
                                         " members; the peer-to-peer engine takes at most " +
                                         std::to_string(detail::p2p::max_ranks) +
                                         " (one NVLink domain). Use NCCL for more.");
    detail::refuse_capture(group, "p2p_clique",
                           "making a clique allocates and zeroes its state, then waits for that",
                           "Make the clique before the capture.");
    return group.devices();
  }
  static p2p_clique_options checked(p2p_clique_options options) {
    if (options.one_shot_limit > max_one_shot_limit)
      detail::throw_invalid_argument(
          "p2p_clique", "one_shot_limit",
          std::to_string(options.one_shot_limit) + " bytes is above the largest limit, " +
              std::to_string(max_one_shot_limit) +
              " (twice the limit is allocated on every member); larger messages take two-shot.");
    detail::require_argument(options.patience.count() >= 0, "p2p_clique", "patience",
                             "must not be negative (wait_forever is 0).");
    if (options.patience == p2p_clique_options::default_patience)
      if (const auto from_environment = p2p_clique_options::patience_from_environment())
        options.patience = *from_environment;
    options.one_shot_limit = (options.one_shot_limit + 255) / 256 * 256;
    return options;
  }

  detail::p2p::engine make_engine(std::size_t rank) const {
    detail::p2p::engine e{};
    for (std::size_t i = 0; i < size(); ++i) {
      e.signals[i] = const_cast<std::uint64_t*>(state_[i].data());
      e.flags[i] = e.signals[i] + detail::p2p::state_layout::flags;
      e.scratch[i] = const_cast<unsigned char*>(scratch_[i].data());
    }
    e.counts = e.signals[rank] + detail::p2p::state_layout::counts;
    e.epochs = e.signals[rank] + detail::p2p::state_layout::epochs;
    e.fault = faults_.of(rank);
    e.half_bytes = options_.one_shot_limit;
    e.patience_ns = detail::patience_nanoseconds(options_.patience);
    e.one_device = std::all_of(devices_.begin(), devices_.end(),
                               [&](device_ref d) { return d == devices_.front(); });
    e.rank = static_cast<int>(rank);
    e.ranks = static_cast<int>(size());
    return e;
  }

  std::vector<device_ref> devices_;
  std::vector<stream_ref> streams_;
  bool emulated_;
  detail::p2p::fault_memory faults_;
  std::shared_ptr<detail::group_watch> watch_;
  std::size_t watch_key_ = 0;
  p2p_clique_options options_;
  std::vector<device_buffer<std::uint64_t>> state_;
  std::vector<device_buffer<unsigned char>> scratch_;
  std::vector<event> last_call_;
  std::vector<cohort::stream> rescue_;
  std::vector<detail::p2p::engine> engines_;
  std::vector<const void*> loaded_;
  unsigned blocks_ = 1;
  bool broken_ = false;
};

} // namespace cohort
