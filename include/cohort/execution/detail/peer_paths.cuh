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

namespace cohort::detail {

// "members i (device d) and j (device e) have no peer path" for the first pair of members on
// different devices with no peer path between them, or empty when every pair has one.
inline std::string missing_peer_path(const device_group& group) {
  for (std::size_t i = 0; i < group.size(); ++i)
    for (std::size_t j = 0; j < group.size(); ++j) {
      if (group.device(i) == group.device(j)) continue;
      if (link_between(group.device(i), group.device(j)).kind == link_kind::peer) continue;
      return "members " + std::to_string(i) + " (device " + std::to_string(group.device(i).get()) +
             ") and " + std::to_string(j) + " (device " + std::to_string(group.device(j).get()) +
             ") have no peer path";
    }
  return {};
}

// Throws std::invalid_argument naming `function`, the first pair of members on different devices
// with no peer path between them, `why` the call needs one and what to do instead.
inline void require_peer_paths(const device_group& group, std::string_view function,
                               std::string_view why) {
  const std::string missing = missing_peer_path(group);
  if (!missing.empty())
    throw_invalid_argument(function, "group", missing + ": " + std::string(why));
}

} // namespace cohort::detail
