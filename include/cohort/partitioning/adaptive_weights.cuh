// cohort/partitioning/adaptive_weights.cuh — weights that follow measured speed, and never keep a
// split that made the whole call slower.
//
// Pure host code. After each measured run, a part's speed is the items it did per second, and the
// weights step toward the measured speeds (by `smoothing` at first; 1 = jump to them), so that a
// slower or busier device gets less work next time. Speeds alone mislead where one part's time
// depends on the others' shares (a GPU that reads a peer's memory over NVLink slows as the peer
// does more of its own work; then moving work to the peer can make both slower). So each step is
// judged by what the caller waits for, the makespan: the longest part's time per item of the
// whole. A step whose makespan is worse than the best split measured so far goes back to that
// split, which is measured again (its figure is refreshed, so a stale lucky one does not stick),
// and the next step is half as long and goes the other way (away from the speeds: where members
// slow each other, the way out may be to give the slow one more); a step that is kept makes the
// next one twice as long, up to `smoothing`. The first split measured (even, unless the caller
// split otherwise) is the first best: the weights never settle on a split slower than it.
//
//   cohort::adaptive_weights w(2);                        // starts even
//   w.record(cohort::partition::even(n, 2), {0.010, 0.030}); // seconds each part took
//   auto next = w.split(n);                               // steps toward 3:1
#pragma once

#include "partition.cuh"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {
namespace detail {
// `smoothing` as `function`'s argument (adaptive_weights', or a balancer's that makes one).
inline void require_smoothing(double smoothing, std::string_view function) {
  require_argument(smoothing > 0.0 && smoothing <= 1.0, function, "smoothing",
                   "must be in (0, 1].");
}
} // namespace detail

class adaptive_weights {
 public:
  explicit adaptive_weights(std::size_t parts, double smoothing = 0.5)
      : weights_(parts, 1.0 / static_cast<double>(parts))
      , best_(weights_)
      , step_(smoothing)
      , smoothing_(smoothing) {
    detail::require_argument(parts > 0, "adaptive_weights", "parts", "must be at least 1.");
    detail::require_smoothing(smoothing, "adaptive_weights");
  }

  // Splits n items by the current weights.
  partition split(std::size_t n) const { return partition::weighted(n, weights_); }

  // Takes one measurement: `used` is the split that ran (made from weights()), `seconds[k]` how
  // long part k took. Parts that did no work or took no measurable time keep their weight; a
  // measurement with no measurable part changes nothing.
  void record(const partition& used, const std::vector<double>& seconds) {
    detail::require_argument(used.parts() == weights_.size(), "adaptive_weights::record", "used",
                             "has " + std::to_string(used.parts()) + " parts, not " +
                                 std::to_string(weights_.size()) + ".");
    detail::require_argument(seconds.size() == weights_.size(), "adaptive_weights::record",
                             "seconds", "needs one time per part.");
    // Speeds relative to the fastest part, so that their sum stays finite.
    std::vector<double> speed(weights_.size(), 0.0);
    std::vector<bool> measured(weights_.size(), false);
    double fastest = 0.0, makespan = 0.0;
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (used.count(k) == 0 || !(seconds[k] > 0.0) || !std::isfinite(seconds[k])) continue;
      measured[k] = true;
      makespan = std::max(makespan, seconds[k]);
      speed[k] = static_cast<double>(used.count(k)) / seconds[k];
      if (!std::isfinite(speed[k])) speed[k] = std::numeric_limits<double>::max();
      fastest = std::max(fastest, speed[k]);
    }
    if (fastest <= 0.0) return;
    // Per item, so that calls over different n compare.
    const double cost = makespan / static_cast<double>(used.size());
    if (!remeasuring_ && measured_once_ && cost > best_cost_) {
      // The step made the call slower: back to the best split; the next step is shorter and goes
      // the other way.
      weights_ = best_;
      step_ *= -0.5;
      remeasuring_ = true;
      return;
    }
    if (!remeasuring_) {
      if (measured_once_) step_ = std::copysign(std::min(2.0 * std::abs(step_), smoothing_), step_);
      best_ = weights_;
    }
    best_cost_ = cost; // an improvement, or the best split's fresh figure
    measured_once_ = true;
    remeasuring_ = false;
    step_toward(speed, measured, fastest);
  }

  const std::vector<double>& weights() const noexcept { return weights_; }
  // The split with the shortest makespan measured so far (refreshed each time it is measured
  // again), and that makespan per item, in seconds (infinity before the first measurement).
  const std::vector<double>& best_weights() const noexcept { return best_; }
  double best_seconds_per_item() const noexcept {
    return measured_once_ ? best_cost_ : std::numeric_limits<double>::infinity();
  }

 private:
  // Measured parts share the weight they held, in proportion to their speed; the weights move
  // `step_` of the way there.
  void step_toward(std::vector<double>& speed, const std::vector<bool>& measured, double fastest) {
    double measured_total = 0.0, measured_weight = 0.0;
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (!measured[k]) continue;
      speed[k] /= fastest; // may underflow to zero for a part far slower than the fastest
      measured_total += speed[k];
      measured_weight += weights_[k];
    }
    for (std::size_t k = 0; k < weights_.size(); ++k) {
      if (!measured[k]) continue;
      const double target = measured_weight * speed[k] / measured_total;
      // A part whose share rounds to nothing keeps a sliver, so weights stay positive.
      weights_[k] = std::max((1.0 - step_) * weights_[k] + step_ * target,
                             std::numeric_limits<double>::min());
    }
    double sum = 0.0;
    for (double w : weights_)
      sum += w;
    for (double& w : weights_)
      w /= sum;
  }

  std::vector<double> weights_; // sum to 1: the split to run next
  std::vector<double> best_;    // the weights of the best split measured
  double best_cost_ = 0.0;      // its makespan per item
  double step_;      // how far a step goes toward the measured speeds (< 0: away from them)
  double smoothing_; // the longest step
  bool measured_once_ = false;
  bool remeasuring_ = false; // weights_ went back to best_: the next record measures it again
};

} // namespace cohort
