// The peer-to-peer engine's internals and fault points that tests reach (built with
// COHORT_TEST_HOOKS=1, as every test program is): none of them is part of a user's build.
#pragma once

#include <cohort/p2p/detail/clique_access.cuh>
#include <cohort/p2p/detail/launch.cuh>
#include <cohort/p2p/p2p_clique.cuh>

#include <cstddef>
#include <cstdint>

#if !COHORT_TEST_HOOKS
#error "p2p_hooks.cuh needs COHORT_TEST_HOOKS=1 (the test programs define it)."
#endif

namespace cohort::testing::p2p {

// Bytes per rank up to which `automatic` picks one-shot.
inline std::size_t automatic_one_shot_limit(const cohort::p2p_clique& peers) {
  return cohort::detail::p2p::clique_access::automatic_one_shot_limit(peers);
}

// Whether member `rank`'s kernels order the ranks at device scope (every rank on one GPU).
inline bool meets_at_device_scope(const cohort::p2p_clique& peers, std::size_t rank) {
  return cohort::detail::p2p::clique_access::engine_for(peers, rank).one_device;
}

// Moves every member's epochs forward to `epoch` (a multiple of 4 above every epoch used so far).
inline void set_epochs(cohort::p2p_clique& peers, std::uint64_t epoch) {
  cohort::detail::p2p::clique_access::set_epochs_for_testing(peers, epoch);
}

// The launch of the next call on member `member` throws, as a failed launch would (once).
inline void fail_launch_on_member(int member) {
  cohort::detail::p2p::fail_launch_on_member_for_testing() = member;
}

// Whether `peers` made `handle`.
template <class Handle>
bool made_by(const Handle& handle, const cohort::p2p_clique& peers) {
  return cohort::detail::p2p::clique_access::made_by(handle, peers);
}

} // namespace cohort::testing::p2p
