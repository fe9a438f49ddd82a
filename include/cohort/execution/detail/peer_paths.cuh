// cohort/execution/detail/peer_paths.cuh — the check, shared by the calls that read other members'
// memory directly, that every pair of a group's devices has a peer path; a pair without one is
// named.
#pragma once

#include "../../devices/topology.cuh"
#include "../../errors/argument_error.cuh"
#include "../device_group.cuh"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace cohort::detail {

// The first pair of members on different devices with no peer path between them, or {0, 0}
// when every pair has one.
inline std::pair<std::size_t, std::size_t> first_pair_without_peer_path(const device_group& group) {
  for (std::size_t i = 0; i < group.size(); ++i)
    for (std::size_t j = 0; j < group.size(); ++j) {
      if (group.device(i) == group.device(j)) continue;
      if (link_between(group.device(i), group.device(j)).kind != link_kind::peer) return {i, j};
    }
  return {0, 0};
}

inline bool has_peer_paths(const device_group& group) {
  const auto [i, j] = first_pair_without_peer_path(group);
  return i == j;
}

// Throws std::invalid_argument naming `function`, the first pair of members on different devices
// with no peer path between them, `why` the call needs one and what to do instead.
inline void require_peer_paths(const device_group& group, std::string_view function,
                               std::string_view why) {
  const auto [i, j] = first_pair_without_peer_path(group);
  if (i != j)
    throw_invalid_argument(
        function, "group",
        "members " + std::to_string(i) + " (device " + std::to_string(group.device(i).get()) +
            ") and " + std::to_string(j) + " (device " + std::to_string(group.device(j).get()) +
            ") have no peer path: " + std::string(why));
}

} // namespace cohort::detail
