// cohort/p2p/detail/launch.cuh — how the engine's calls reach the GPUs: one launch of the same
// kernel, with the same grid, on every member's stream, after the kernel is loaded everywhere.
#pragma once

#include "../../detail/one_capture.cuh"
#include "../../execution/detail/launch_order.cuh"
#include "../../execution/launch.cuh"
#include "../p2p_clique.cuh"
#include "clique_access.cuh"
#include "kernels.cuh"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace cohort::detail::p2p {

#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
// Testing: the launch on this member throws, as a failed launch would, after the members
// before it launched (once; -1: never).
inline std::atomic<int>& fail_launch_on_member_for_testing() {
  static std::atomic<int> member{-1};
  return member;
}
#endif

// Under capture the members "launched" were only captured: nothing waits, and a release would
// raise the slots under the direct calls still running (the clique is broken either way).
inline void release_after_partial_launch(p2p_clique& peers, std::size_t launched,
                                         unsigned blocks) noexcept {
  try {
    if (peers.stream(0).is_capturing()) return;
  } catch (...) { // the query failed: release (a wrong release beats a hang)
  }
  for (std::size_t i = 0; i < launched; ++i) {
    try {
      clique_access::release(peers, i, static_cast<int>(launched), blocks);
    } catch (...) { // the member's context is gone too: nothing waits there any more
    }
  }
}

// Refuses a call whose members' streams are not all in one capture, or all outside any: a rank
// recorded into a graph and another run now would wait for each other for ever. (Named by the
// launch's name; a user's p2p_launch without one as "p2p_launch".)
inline void require_one_capture(p2p_clique& peers, const launch_config& config) {
  detail::require_one_capture(
      peers.size(), [&](std::size_t i) { return peers.stream(i); },
      config.name != nullptr ? config.name : "p2p_launch");
}

// Every member's arguments, made before anything is launched: an argument that cannot be made
// (args throws) then leaves the clique as it was.
template <class Args>
auto arguments_of_every_member(p2p_clique& peers, Args& args, bool no_op) {
  std::vector<decltype(args(std::size_t{0}, no_op))> all;
  all.reserve(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i)
    all.push_back(args(i, no_op));
  return all;
}

// Loads `kernel` on every member before its first launch there, by a launch with ranks == 0 (an
// engine kernel returns at once; a user's kernel ends where it opens its session). A launch loads
// the kernel into the context of the member's stream (a green context on an emulated group),
// where querying its attributes would load it only into the current one. Under capture the no-op
// launch is left out: instantiating the graph loads.
template <class... Params, class Args>
void ensure_loaded(p2p_clique& peers, const launch_config& config, void (*kernel)(Params...),
                   Args& args) {
  auto& loaded = clique_access::loaded_kernels(peers);
  const void* key = reinterpret_cast<const void*>(kernel);
  if (std::find(loaded.begin(), loaded.end(), key) != loaded.end()) return;
  if (peers.stream(0).is_capturing()) return; // loaded at instantiation; again next time
  const auto no_op_args = arguments_of_every_member(peers, args, /*no_op=*/true);
  launch_config no_op = config;
  no_op.cooperative = false; // every thread leaves at once, so the grid need not be resident
  // Loaded only while no thread is half way through launching a call's kernels: every p2p kernel
  // already running then has its peers launched, and ends (execution/detail/launch_order.cuh).
  const std::lock_guard lock(multi_stream_launch_lock());
  for (std::size_t i = 0; i < peers.size(); ++i)
    std::apply([&](auto&&... a) { launch(peers.stream(i), no_op, kernel, a...); }, no_op_args[i]);
  loaded.push_back(key);
}

// Launches `kernel` on every member's stream with `args(member, false)`'s arguments (the engine
// or a p2p_handle among them), all made before the first launch. Refused, before anything is
// enqueued, on a broken clique (p2p_error where a peer did not arrive) and where the members'
// streams are not in one capture (or none).
// A launch that fails after earlier members launched releases their kernels and leaves the
// clique broken: its members' epochs now differ, so no later call could meet.
template <class... Params, class Args>
void launch_kernel_on_every_member(p2p_clique& peers, const launch_config& config,
                                   void (*kernel)(Params...), Args&& args) {
  peers.check(config.name != nullptr ? config.name : "p2p_launch"); // a peer that did not arrive
  if (peers.broken())
    throw_invalid_argument(kernel_name(config, reinterpret_cast<const void*>(kernel)), "peers",
                           "an earlier call's launch failed part-way, so the members' engine "
                           "states differ for good: make a new p2p_clique.");
  require_one_capture(peers, config);
  ensure_loaded(peers, config, kernel, args);
  const auto member_args = arguments_of_every_member(peers, args, /*no_op=*/false);
  const unsigned blocks = config.grid.x * config.grid.y * config.grid.z;
  // Every member's launch of this call before any other thread's call: one order on every queue.
  const std::lock_guard lock(multi_stream_launch_lock());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    try {
#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
      if (fail_launch_on_member_for_testing().load() == static_cast<int>(i)) {
        fail_launch_on_member_for_testing() = -1;
        throw cuda_error(cudaErrorLaunchFailure,
                         "launch of " + kernel_name(config, reinterpret_cast<const void*>(kernel)) +
                             " (injected)",
                         peers.device(i).get());
      }
#endif
      std::apply([&](auto&&... a) { launch(peers.stream(i), config, kernel, a...); },
                 member_args[i]);
    } catch (...) {
      if (i > 0) {
        clique_access::mark_broken(peers);
        release_after_partial_launch(peers, i,
                                     std::min<unsigned>(blocks, static_cast<unsigned>(max_blocks)));
      }
      throw;
    }
  }
}

// An engine kernel: `blocks` blocks of `threads`.
template <auto Kernel, class Args>
void launch_on_every_member(p2p_clique& peers, unsigned blocks, const char* name, Args&& args,
                            unsigned threads = block_threads) {
  launch_kernel_on_every_member(peers, {.grid = blocks, .block = threads, .name = name}, Kernel,
                                args);
}

// The 16-byte-pack variant `Wide` where every pointer allows it (`wide`), else the one-element
// variant `Narrow`, on every member.
template <auto Wide, auto Narrow, class Args>
void launch_packed(bool wide, p2p_clique& peers, unsigned blocks, const char* name, Args&& args) {
  if (wide)
    launch_on_every_member<Wide>(peers, blocks, name, args);
  else
    launch_on_every_member<Narrow>(peers, blocks, name, args);
}

} // namespace cohort::detail::p2p
