// cohort/partitioning/adaptive_weights.cuh — weights that follow measured speed.
//
// Pure host code. After each measured run, a part's speed is the items it did per second; the new
// weights move toward the measured speeds by `smoothing` (1 = jump to the last measurement), so a
// slower or busier device gets less work next time.
//
//   cohort::adaptive_weights w(2);                        // starts even
//   w.record(cohort::partition::even(n, 2), {0.010, 0.030}); // seconds each part took
//   auto next = w.split(n);                               // now about 3:1
#pragma once

#include "partition.cuh"

#include <cmath>
#include <string>
#include <vector>

namespace cohort {

class adaptive_weights {
public:
  explicit adaptive_weights(std::size_t parts, double smoothing = 0.5)
      : weights_(parts, 1.0 / static_cast<double>(parts)), smoothing_(smoothing) {
    detail::require_argument(parts > 0, "adaptive_weights", "parts", "must be at least 1.");
    detail::require_argument(smoothing > 0.0 && smoothing <= 1.0, "adaptive_weights", "smoothing",
                             "must be in (0, 1].");
  }

  // Splits n items by the current weights.
  partition split(std::size_t n) const { return partition::weighted(n, weights_); }

  // Takes one measurement: `used` is the split that ran, `seconds[k]` how long part k took.
  // Parts that did no work or took no measurable time keep their weight.
  void record(const partition& used, const std::vector<double>& seconds) {
    detail::require_argument(used.parts() == weights_.size(), "adaptive_weights::record", "used",
                             "has " + std::to_string(used.parts()) + " parts, not " +
                                 std::to_string(weights_.size()) + ".");
    detail::require_argument(seconds.size() == weights_.size(), "adaptive_weights::record",
                             "seconds", "needs one time per part.");
    std::vector<double> speed(weights_.size(), 0.0);
    double measured_total = 0.0, measured_weight = 0.0;
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (used.count(k) == 0 || !(seconds[k] > 0.0) || !std::isfinite(seconds[k])) continue;
      speed[k] = static_cast<double>(used.count(k)) / seconds[k];
      measured_total += speed[k];
      measured_weight += weights_[k];
    }
    if (measured_total <= 0.0) return;
    // Measured parts share the weight they held, in proportion to their speed.
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (speed[k] <= 0.0) continue;
      const double target = measured_weight * speed[k] / measured_total;
      weights_[k] = (1.0 - smoothing_) * weights_[k] + smoothing_ * target;
    }
  }

  const std::vector<double>& weights() const noexcept { return weights_; }

private:
  std::vector<double> weights_; // sum to 1
  double smoothing_;
};

} // namespace cohort
