// cohort/p2p/detail/clique_access.cuh — the internals of a p2p_clique that cohort's own layers
// use (the collectives, the device API's launches, the training layer), kept out of its public
// surface.
#pragma once

#include "../p2p_clique.cuh"
#include "engine.cuh"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cohort::detail::p2p {

// What the collectives (p2p/collectives.cuh), the device API (p2p/device.cuh), the launches
// (p2p/detail/launch.cuh) and the training layer use of a clique, which users do not call.
struct clique_access {
  static const engine& engine_for(const p2p_clique& peers, std::size_t rank) {
    return peers.engine_for(rank);
  }
  static unsigned blocks_for(const p2p_clique& peers, std::size_t packs,
                             std::size_t per_block = block_threads) noexcept {
    return peers.blocks_for(packs, per_block);
  }
  static std::size_t automatic_one_shot_limit(const p2p_clique& peers) noexcept {
    return peers.automatic_one_shot_limit();
  }
  // Kernels already loaded on every member (ensure_loaded).
  static std::vector<const void*>& loaded_kernels(p2p_clique& peers) noexcept {
    return peers.loaded_;
  }
  static void mark_broken(p2p_clique& peers) noexcept { peers.broken_ = true; }
  static void release(p2p_clique& peers, std::size_t i, int first_missing, unsigned blocks) {
    peers.release(i, first_missing, blocks);
  }
  // A p2p_handle's: whether `peers` made it, and its copy for p2p_launch's loading launch (the
  // kernel ends where it opens the handle's session).
  template <class Handle>
  static bool made_by(const Handle& handle, const p2p_clique& peers) {
    return handle.made_by(peers);
  }
  template <class Handle>
  static Handle for_loading(const Handle& handle) {
    return handle.for_loading();
  }
#if defined(COHORT_TEST_HOOKS) && COHORT_TEST_HOOKS
  static void set_epochs_for_testing(p2p_clique& peers, std::uint64_t epoch) {
    peers.set_epochs_for_testing(epoch);
  }
#endif
};

} // namespace cohort::detail::p2p
