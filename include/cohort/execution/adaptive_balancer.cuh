// cohort/execution/adaptive_balancer.cuh — splits work by how fast each member really ran.
//
// Times each member's share of a call with events on its stream, and on a later call (once those
// events have completed; it never waits for them) moves work toward the faster members. This is
// the fix for unequal or busy GPUs, where an even split leaves the fast one idle. A move is kept
// only if the call's makespan (its slowest member's time) did not grow; otherwise the next call
// goes back to the best split measured and then tries a shorter move the other way
// (adaptive_weights), so where members slow each other (one reads the other's memory) it keeps at
// least the speed of the even split it starts from.
//
// Calls whose splits differ are ordered where they must be: when the split changes, `next_split`
// makes each member whose range changed wait (on its stream) for the previous call's members that
// owned any index of its new range, so that an index that moves to another member is read and
// written after its last owner is done with it. Indices that stay with their member are ordered by
// its stream, as always. So a loop of calls that read-modify-write the same indices needs nothing
// more; only work the loop enqueues outside these calls still needs the user's own ordering.
// Work of your own (a kernel per member) is balanced the same way: take the split from
// next_split, and put each member's part between start and stop on its stream.
//
//   cohort::adaptive_balancer balancer(group);
//   for (int step = 0; step < steps; ++step)
//     cohort::multi_device_for_each(group, cohort::indices(n, balancer), f);
//   balancer.weights();   // e.g. {0.25, 0.75}
//   const cohort::partition split = balancer.next_split(group, n);   // your own work
//   for (std::size_t m = 0; m < group.size(); ++m) {
//     balancer.start(m, group.stream(m));
//     // enqueue split.count(m) items from split.offset(m) on group.stream(m)
//     balancer.stop(m, group.stream(m));
//   }
#pragma once

#include "../partitioning/adaptive_weights.cuh"
#include "../streams/event.cuh"
#include "device_group.cuh"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

class adaptive_balancer {
 public:
  explicit adaptive_balancer(const device_group& group, double smoothing = 0.5)
      : weights_(weights_for(group, smoothing)) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      starts_.emplace_back(group.device(i), event::timing::on);
      stops_.emplace_back(group.device(i), event::timing::on);
      finished_.emplace_back(group.device(i));
      streams_.push_back(group.stream(i));
    }
  }

  // The split for the next call over `group` (which must be the group this was made for). Folds
  // in the last timed call first, if its events have completed. Where the split differs from the
  // previous call's, orders the members whose range changed after the previous owners of their
  // new indices (see above). `function` and `argument` name the caller's call and its balancer
  // argument in the error for a balancer of another group. Refused under graph capture
  // (std::logic_error): the events it reads on the host would be a graph's, never recorded when
  // the host reads them; capture a fixed split (partition::weighted(n, weights())) instead.
  partition next_split(const device_group& group, std::size_t n,
                       std::string_view function = "adaptive_balancer::next_split",
                       std::string_view argument = "group") {
    require_group(group, function, argument);
    detail::refuse_capture(group, function,
                           "the balancer times each member's part with events it reads on the "
                           "host on the next call",
                           "Capture the form that takes a partition "
                           "(partition::weighted(n, balancer.weights())).");
    harvest();
    partition split = weights_.split(n);
    if (previous_ && !(*previous_ == split)) order_moved_ranges(group, *previous_, split);
    previous_ = split;
    timing_ = !pending_.has_value();
    if (timing_) {
      pending_ = split;
      stopped_.assign(stops_.size(), false);
    }
    return split;
  }

  // Around member `rank`'s work on `stream`: the timed calls record their timing events, and
  // every call marks where member `rank`'s work ends (what a later call that moves its indices
  // waits for).
  void start(std::size_t rank, stream_ref stream) {
    if (timing_) starts_.at(rank).record(stream);
  }
  void stop(std::size_t rank, stream_ref stream) {
    if (timing_) {
      stops_.at(rank).record(stream);
      stopped_.at(rank) = true;
    }
    finished_.at(rank).record(stream);
  }

  const std::vector<double>& weights() const noexcept { return weights_.weights(); }

 private:
  // The group checked first, then the smoothing, each named as this call's argument.
  static adaptive_weights weights_for(const device_group& group, double smoothing) {
    const std::size_t members = detail::members_of(group, "adaptive_balancer");
    detail::require_smoothing(smoothing, "adaptive_balancer");
    return adaptive_weights(members, smoothing);
  }

  void require_group(const device_group& group, std::string_view function,
                     std::string_view argument) const {
    detail::members_of(group, function, argument);
    bool same = group.size() == streams_.size();
    for (std::size_t k = 0; same && k < group.size(); ++k)
      same = group.stream(k) == streams_[k];
    if (!same)
      detail::throw_invalid_argument(function, argument,
                                     "was made for another group (of " +
                                         std::to_string(streams_.size()) +
                                         " members, on other streams); make one balancer per "
                                         "group.");
  }

  // Member k's new range waits for every other member j whose previous range overlaps it.
  void order_moved_ranges(const device_group& group, const partition& before,
                          const partition& now) {
    for (std::size_t k = 0; k < now.parts(); ++k) {
      const std::size_t begin = now.offset(k), end = begin + now.count(k);
      if (now.count(k) == 0 || (begin == before.offset(k) && now.count(k) == before.count(k)))
        continue;
      for (std::size_t j = 0; j < before.parts(); ++j) {
        const std::size_t was = before.offset(j), was_end = was + before.count(j);
        if (j != k && before.count(j) != 0 && was < end && begin < was_end)
          group.stream(k).wait(finished_[j]);
      }
    }
  }

  void harvest() {
    if (!pending_) return;
    // A timed call that failed part-way (a member's work threw before its stop) left events that
    // time nothing, or an earlier call: its measure is dropped, and the next call is timed.
    for (std::size_t k = 0; k < stops_.size(); ++k)
      if (pending_->count(k) != 0 && !stopped_[k]) {
        pending_.reset();
        return;
      }
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
  std::vector<event> finished_;       // each member's last call's work done (never timed)
  std::vector<stream_ref> streams_;   // the group's, to know it again
  std::optional<partition> pending_;  // the split of the call being timed
  std::vector<bool> stopped_;         // which members of that call recorded their stop
  std::optional<partition> previous_; // the split of the last call
  bool timing_ = false;
};

} // namespace cohort
