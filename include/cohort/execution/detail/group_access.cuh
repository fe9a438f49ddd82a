// cohort/execution/detail/group_access.cuh — what cohort's own layers reach of a device_group
// that its users do not: which resource a member allocates from (the algorithms' scratch checks),
// what it keeps for the algorithms between calls, and the group's watch (engines that register what synchronize checks).
#pragma once

#include "../device_group.cuh"
#include "group_watch.cuh"

#include <cstddef>
#include <memory>
#include <optional>

namespace cohort::detail {

struct group_memory_access {
  // Whether member `i`'s scratch comes from the device's own pool, whose free memory the
  // algorithms can check before they enqueue anything (another resource is asked, and answers for
  // itself).
  static bool uses_device_pool(const device_group& group, std::size_t i) {
    return group.cache_[i].scratch_from_device_pool(group.memory_[i].upstream());
  }
  // Where member `i`'s scratch comes from: a scoped_scratch_resource's, or the group's resource.
  static memory_resource_ref scratch_resource(const device_group& group, std::size_t i) {
    return group.cache_[i].scratch_resource(group.memory_[i]);
  }
  // Scratch from `resource` from now on (nothing: from the group's resource); returns the one
  // before. The scratch held goes back first.
  static std::optional<memory_resource_ref>
  scope_scratch(const device_group& group, std::size_t i,
                std::optional<memory_resource_ref> resource) noexcept {
    return group.cache_[i].scope_scratch(resource);
  }
  // What member `i` keeps for the algorithms between calls (detail/member_cache.cuh).
  static member_cache& cache(const device_group& group, std::size_t i) { return group.cache_[i]; }
};

struct group_watch_access {
  static std::shared_ptr<group_watch> watch(const device_group& group) { return group.watch_; }
};

} // namespace cohort::detail
