// cohort/execution/capability.cuh — weights for splitting work by what each member can do.
//
// A member's weight is the mean of its share of compute (SMs × clock) and of memory bandwidth
// (from the datasheet figures the driver reports), each relative to the group's largest. On an
// emulated group with split SMs, a member's compute and bandwidth both scale with its SM share.
//
//   auto split = cohort::partition::weighted(n, cohort::by_capability(group));
#pragma once

#include "../devices/properties.cuh"
#include "device_group.cuh"

#include <algorithm>
#include <vector>

namespace cohort {

inline std::vector<double> by_capability(const device_group& group) {
  const std::size_t members = detail::members_of(group, "by_capability");
  std::vector<double> compute(members), bandwidth(members);
  for (std::size_t i = 0; i < group.size(); ++i) {
    const device_properties p = properties(group.device(i));
    const double sm_share = static_cast<double>(group.sm_count(i)) / p.multiprocessors;
    compute[i] = static_cast<double>(group.sm_count(i)) * p.clock_khz;
    bandwidth[i] = p.peak_memory_bandwidth_bytes_per_s() * sm_share;
  }
  const double max_compute = *std::max_element(compute.begin(), compute.end());
  const double max_bandwidth = *std::max_element(bandwidth.begin(), bandwidth.end());
  std::vector<double> weights(group.size());
  for (std::size_t i = 0; i < group.size(); ++i)
    weights[i] = 0.5 * (compute[i] / max_compute + bandwidth[i] / max_bandwidth);
  return weights;
}

} // namespace cohort
