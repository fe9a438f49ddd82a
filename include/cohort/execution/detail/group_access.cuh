// cohort/execution/detail/group_access.cuh — what cohort's own layers reach of a device_group
// that its users do not: which resource a member allocates from (the algorithms' scratch checks),
// what it keeps for the algorithms between calls, and the group's watch (engines that register what synchronize checks).
#pragma once

#include "../device_group.cuh"
#include "group_watch.cuh"

#include <cstddef>
#include <memory>

namespace cohort::detail {

// Whether member `i` allocates from the device's own pool, whose free memory the algorithms can
// check before they enqueue anything (another resource is asked, and answers for itself).
struct group_memory_access {
  static bool uses_device_pool(const device_group& group, std::size_t i) {
    return group.memory_[i].upstream() == default_memory_resource();
  }
  // What member `i` keeps for the algorithms between calls (detail/member_cache.cuh).
  static member_cache& cache(const device_group& group, std::size_t i) { return group.cache_[i]; }
};

struct group_watch_access {
  static std::shared_ptr<group_watch> watch(const device_group& group) { return group.watch_; }
};

} // namespace cohort::detail
