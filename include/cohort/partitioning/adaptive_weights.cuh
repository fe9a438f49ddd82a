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

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace cohort {

class adaptive_weights {
 public:
  explicit adaptive_weights(std::size_t parts, double smoothing = 0.5)
      : weights_(parts, 1.0 / static_cast<double>(parts))
      , smoothing_(smoothing) {
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
    // Speeds relative to the fastest part, so that their sum stays finite.
    std::vector<double> speed(weights_.size(), 0.0);
    std::vector<bool> measured(weights_.size(), false);
    double fastest = 0.0;
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (used.count(k) == 0 || !(seconds[k] > 0.0) || !std::isfinite(seconds[k])) continue;
      measured[k] = true;
      speed[k] = static_cast<double>(used.count(k)) / seconds[k];
      if (!std::isfinite(speed[k])) speed[k] = std::numeric_limits<double>::max();
      fastest = std::max(fastest, speed[k]);
    }
    if (fastest <= 0.0) return;
    double measured_total = 0.0, measured_weight = 0.0;
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (!measured[k]) continue;
      speed[k] /= fastest; // may underflow to zero for a part far slower than the fastest
      measured_total += speed[k];
      measured_weight += weights_[k];
    }
    // Measured parts share the weight they held, in proportion to their speed.
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (!measured[k]) continue;
      const double target = measured_weight * speed[k] / measured_total;
      // A part whose share rounds to nothing keeps a sliver, so weights stay positive.
      weights_[k] = std::max((1.0 - smoothing_) * weights_[k] + smoothing_ * target,
                             std::numeric_limits<double>::min());
    }
    double sum = 0.0;
    for (double w : weights_)
      sum += w;
    for (double& w : weights_)
      w /= sum;
  }

  const std::vector<double>& weights() const noexcept { return weights_; }

 private:
  std::vector<double> weights_; // sum to 1
  double smoothing_;
};

} // namespace cohort
