// cohort/p2p/p2p_clique.cuh — the members of a device group, ready for cohort's own
// peer-to-peer collectives (p2p_collectives.cuh): every pair has peer access, and each member
// holds the signal slots through which the GPUs meet and a scratch buffer for small messages.
//
//   cohort::device_group group(cohort::devices());
//   cohort::p2p_clique peers(group);                 // throws naming a pair without a peer path
//   cohort::all_reduce(peers, data, my_op);          // any type, any operator; no NCCL needed
//
// It works the same on an emulated group (every logical device on one GPU). Calls are enqueued
// on the group's streams; they never wait on the host, so back-to-back calls need no
// synchronisation. A clique is used from one host thread at a time, like its group.
#pragma once

#include "../devices/topology.cuh"
#include "../errors/argument_error.cuh"
#include "../execution/device_group.cuh"
#include "../memory/device_buffer.cuh"
#include "detail/kernels.cuh"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cohort {

class p2p_clique {
 public:
  // Largest message, in bytes per rank, that the one-shot algorithm can take (it needs twice that
  // in scratch on every member). On 2 NVLink-joined H200s one-shot was faster than two-shot up to
  // 8 MiB and slower from 16 MiB (docs/performance.md); pass another limit to the constructor.
  static constexpr std::size_t default_one_shot_limit = std::size_t{8} << 20;

  // Every member of `group` must reach every other's memory directly: peer access is enabled
  // here (and refused, naming the pair, where the hardware has no peer path). The group must
  // outlive the clique.
  explicit p2p_clique(const device_group& group,
                      std::size_t one_shot_limit = default_one_shot_limit)
      : group_(&group)
      , one_shot_limit_(round_up(one_shot_limit, 256)) {
    if (group.size() > static_cast<std::size_t>(detail::p2p::max_ranks))
      detail::throw_invalid_argument("p2p_clique", "group",
                                     "has " + std::to_string(group.size()) +
                                         " members; the peer-to-peer engine takes at most " +
                                         std::to_string(detail::p2p::max_ranks) +
                                         " (one NVLink domain). Use NCCL for more.");
    require_peer_paths(group);
    group.enable_peer_access();
    signals_.reserve(group.size());
    scratch_.reserve(group.size());
    for (std::size_t i = 0; i < group.size(); ++i) {
      signals_.emplace_back(std::size_t{detail::p2p::max_blocks} * detail::p2p::max_ranks,
                            group.stream(i));
      signals_.back().fill_bytes(0);
      scratch_.emplace_back(2 * one_shot_limit_, group.stream(i));
    }
    group.synchronize(); // every signal is zero before another member's kernel reads it
    for (std::size_t i = 0; i < group.size(); ++i) {
      unsigned sms = group.sm_count(i);
      if (group.is_emulated() && !group.splits_sms()) sms /= static_cast<unsigned>(group.size());
      co_resident_ = std::min(co_resident_, std::max(1u, sms));
    }
  }
  p2p_clique(const p2p_clique&) = delete;
  p2p_clique& operator=(const p2p_clique&) = delete;

  const device_group& group() const noexcept { return *group_; }
  std::size_t size() const noexcept { return group_->size(); }
  // The most bytes per rank the one-shot algorithm can take.
  std::size_t one_shot_limit() const noexcept { return one_shot_limit_; }
  // Bytes per rank up to which `automatic` picks one-shot: the limit on 2 members; on n members
  // one-shot reads n/2 times the data two-shot reads, so the limit shrinks by 2/n (a traffic
  // argument, measured on 2 GPUs only so far).
  std::size_t automatic_one_shot_limit() const noexcept {
    return size() <= 2 ? one_shot_limit_ : one_shot_limit_ * 2 / size();
  }

  // For the collectives: -------------------------------------------------------------------------

  // The signal arrays as rank `rank` sees them.
  detail::p2p::signals signals_for(std::size_t rank) const {
    detail::p2p::signals s{};
    for (std::size_t i = 0; i < size(); ++i)
      s.of[i] = const_cast<std::uint32_t*>(signals_[i].data());
    s.rank = static_cast<int>(rank);
    s.ranks = static_cast<int>(size());
    return s;
  }
  // The first of `n` fresh signal values (one per barrier of a call).
  std::uint32_t take_signals(std::uint32_t n) noexcept {
    const std::uint32_t first = next_signal_;
    next_signal_ += n;
    return first;
  }
  // Every rank's scratch half for the next one-shot call (the halves alternate).
  template <class T>
  detail::p2p::per_rank<T> next_scratch() {
    const std::size_t half = (one_shot_calls_++ & 1u) * one_shot_limit_;
    detail::p2p::per_rank<T> s{};
    for (std::size_t i = 0; i < size(); ++i)
      s.of[i] = reinterpret_cast<T*>(scratch_[i].data() + half);
    return s;
  }
  // Blocks per rank for `packs` units of work each: no more than every member can hold at once
  // (on an emulated group the logical devices share one GPU, and a block that waits for a peer
  // block that cannot be scheduled would wait forever).
  unsigned blocks_for(std::size_t packs) const noexcept {
    const std::size_t wanted =
        (packs + detail::p2p::block_threads - 1) / detail::p2p::block_threads;
    const std::size_t cap = std::min<std::size_t>(co_resident_, detail::p2p::max_blocks);
    return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, cap));
  }

 private:
  static std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

  static void require_peer_paths(const device_group& group) {
    for (std::size_t i = 0; i < group.size(); ++i)
      for (std::size_t j = 0; j < group.size(); ++j) {
        if (group.device(i) == group.device(j)) continue;
        if (link_between(group.device(i), group.device(j)).kind != link_kind::peer)
          detail::throw_invalid_argument(
              "p2p_clique", "group",
              "members " + std::to_string(i) + " (device " + std::to_string(group.device(i).get()) +
                  ") and " + std::to_string(j) + " (device " +
                  std::to_string(group.device(j).get()) +
                  ") have no peer path: the peer-to-peer engine needs every pair to reach the "
                  "other's memory. Use the NCCL clique for this group.");
      }
  }

  const device_group* group_;
  std::size_t one_shot_limit_;
  std::vector<device_buffer<std::uint32_t>> signals_;
  std::vector<device_buffer<unsigned char>> scratch_;
  std::uint32_t next_signal_ = 1; // the slots start at 0
  std::uint64_t one_shot_calls_ = 0;
  unsigned co_resident_ = detail::p2p::max_blocks;
};

namespace detail::p2p {

// Loads `Kernel` on every member's device before its first launch there: with lazy loading,
// loading it while a peer's copy spins on the same GPU could wait for that copy forever.
template <auto Kernel>
void ensure_loaded(const device_group& group) {
  static std::atomic<std::uint64_t> loaded{0}; // devices 0..63 where Kernel is loaded
  std::uint64_t wanted = 0;
  for (device_ref d : group.devices())
    wanted |= d.get() < 64 ? std::uint64_t{1} << d.get() : ~std::uint64_t{0};
  if ((loaded.load(std::memory_order_acquire) & wanted) == wanted) return;
  for (device_ref d : group.devices()) {
    scoped_device on(d);
    cudaFuncAttributes attributes{};
    check_cuda(cudaFuncGetAttributes(&attributes, Kernel), "cudaFuncGetAttributes (p2p kernel)",
               d.get());
    if (d.get() < 64) loaded.fetch_or(std::uint64_t{1} << d.get(), std::memory_order_release);
  }
}

// Launches `Kernel` on every member's stream with `args(member)`'s arguments.
template <auto Kernel, class Args>
void launch_on_every_member(const device_group& group, unsigned blocks, const char* name,
                            Args&& args) {
  ensure_loaded<Kernel>(group);
  scoped_device on(group.device(0));
  for (std::size_t i = 0; i < group.size(); ++i) {
    on.set(group.device(i));
    std::apply(
        [&](auto&&... a) {
          Kernel<<<blocks, block_threads, 0, group.stream(i).native_handle()>>>(a...);
        },
        args(i));
    check_launch(name, group.device(i).get());
  }
}

// The 16-byte-pack variant `Wide` where every pointer allows it (`wide`), else the one-element
// variant `Narrow`, on every member.
template <auto Wide, auto Narrow, class Args>
void launch_packed(bool wide, const device_group& group, unsigned blocks, const char* name,
                   Args&& args) {
  if (wide)
    launch_on_every_member<Wide>(group, blocks, name, args);
  else
    launch_on_every_member<Narrow>(group, blocks, name, args);
}

} // namespace detail::p2p

} // namespace cohort
