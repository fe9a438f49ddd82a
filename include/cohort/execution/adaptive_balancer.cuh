// cohort/execution/adaptive_balancer.cuh — splits work by how fast each member really ran.
//
// Times each member's share of a call with events on its stream, and on a later call (once those
// events have completed; it never waits for them) moves work toward the faster members. This is
// the fix for unequal or busy GPUs, where an even split leaves the fast one idle.
//
//   cohort::adaptive_balancer balancer(group);
//   for (int step = 0; step < steps; ++step)
//     cohort::multi_device_for_each_n(group, n, f, balancer);
//   balancer.weights();   // e.g. {0.25, 0.75}
#pragma once

#include "../partitioning/adaptive_weights.cuh"
#include "../streams/event.cuh"
#include "device_group.cuh"

#include <optional>
#include <vector>

namespace cohort {

class adaptive_balancer {
public:
  explicit adaptive_balancer(const device_group& group, double smoothing = 0.5)
      : weights_(group.size(), smoothing) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      starts_.emplace_back(group.device(i), event::timing::on);
      stops_.emplace_back(group.device(i), event::timing::on);
    }
  }

  // The split for the next call over `group` (which must be the group this was made for). Folds
  // in the last timed call first, if its events have completed.
  partition next_split(const device_group& group, std::size_t n) {
    detail::require_argument(group.size() == starts_.size(), "adaptive_balancer::next_split",
                             "group", "is not the group the balancer was made for.");
    harvest();
    partition split = weights_.split(n);
    timing_ = !pending_.has_value();
    if (timing_) pending_ = split;
    return split;
  }

  // Around member `rank`'s work on `stream` (only the calls being timed record anything).
  void start(std::size_t rank, stream_ref stream) {
    if (timing_) starts_.at(rank).record(stream);
  }
  void stop(std::size_t rank, stream_ref stream) {
    if (timing_) stops_.at(rank).record(stream);
  }

  const std::vector<double>& weights() const noexcept { return weights_.weights(); }

private:
  void harvest() {
    if (!pending_) return;
    for (const event& e : stops_)
      if (!e.ready()) return; // still running: try again next call
    std::vector<double> seconds(stops_.size());
    for (std::size_t k = 0; k < stops_.size(); ++k)
      seconds[k] = pending_->count(k) == 0 ? 0.0 : elapsed(starts_[k], stops_[k]).count() / 1e3;
    weights_.record(*pending_, seconds);
    pending_.reset();
  }

  adaptive_weights weights_;
  std::vector<event> starts_, stops_;
  std::optional<partition> pending_; // the split of the call being timed
  bool timing_ = false;
};

} // namespace cohort
