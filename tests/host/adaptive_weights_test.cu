// adaptive_weights: weights move toward measured speed.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

TEST_CASE("adaptive weights start even and follow measured speeds") {
  cohort::adaptive_weights w(2, 1.0); // no smoothing: jump to the measurement
  CHECK(w.split(10) == cohort::partition::even(10, 2));
  // Part 1 did the same work three times as fast.
  w.record(cohort::partition::even(1000, 2), {0.030, 0.010});
  CHECK(w.weights()[0] == doctest::Approx(0.25));
  CHECK(w.weights()[1] == doctest::Approx(0.75));
  CHECK(w.split(1000).counts() == std::vector<std::size_t>{250, 750});
  // At the new split both parts take the same time: the weights stay.
  w.record(w.split(1000), {0.010, 0.010});
  CHECK(w.weights()[0] == doctest::Approx(0.25));
}

TEST_CASE("adaptive weights smooth and ignore parts without a measurement") {
  cohort::adaptive_weights w(3, 0.5);
  w.record(cohort::partition::from_counts({100, 0, 100}), {0.01, 0.0, 0.02});
  // Part 1 did nothing: it keeps its third; parts 0 and 2 split their two thirds 2:1, halfway.
  CHECK(w.weights()[1] == doctest::Approx(1.0 / 3));
  CHECK(w.weights()[0] == doctest::Approx(0.5 * (1.0 / 3) + 0.5 * (2.0 / 3) * (2.0 / 3)));
  CHECK(w.weights()[2] == doctest::Approx(0.5 * (1.0 / 3) + 0.5 * (2.0 / 3) * (1.0 / 3)));
  const auto before = w.weights();
  w.record(cohort::partition::even(10, 3), {0.0, -1.0, std::nan("")}); // nothing measurable
  CHECK(w.weights() == before);
}

TEST_CASE("adaptive weights reject bad arguments") {
  CHECK_THROWS_WITH_AS(cohort::adaptive_weights(0), doctest::Contains("argument 'parts'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::adaptive_weights(2, 0.0), doctest::Contains("argument 'smoothing'"),
                       std::invalid_argument);
  cohort::adaptive_weights w(2);
  CHECK_THROWS_WITH_AS(w.record(cohort::partition::even(4, 3), {1, 1, 1}),
                       doctest::Contains("argument 'used'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(w.record(cohort::partition::even(4, 2), {1}),
                       doctest::Contains("argument 'seconds'"), std::invalid_argument);
}

TEST_CASE("adaptive weights stay finite and positive under extreme measurements") {
  cohort::adaptive_weights w(3, 1.0);
  const auto used = cohort::partition::from_counts({std::size_t{1} << 62, 1, 1});
  // An enormous part done in a denormal time (an infinite speed) and ordinary ones.
  w.record(used, {std::numeric_limits<double>::denorm_min(), 1.0, 1e300});
  double sum = 0;
  for (double x : w.weights()) {
    CHECK(std::isfinite(x));
    CHECK(x > 0.0);
    sum += x;
  }
  CHECK(sum == doctest::Approx(1.0));
  CHECK(w.weights()[0] > 0.99);
  const auto next = w.split(1000);
  CHECK(next.size() == 1000);
  CHECK(next.count(0) + next.count(1) + next.count(2) == 1000);
}

namespace {

// Seconds per part of a simulated call over `used`, and its makespan.
using cost_model = std::vector<double> (*)(const cohort::partition&);

double makespan(const std::vector<double>& seconds) {
  return *std::max_element(seconds.begin(), seconds.end());
}

// Calls split by the weights, each measured and recorded, as a balancer does; returns the
// makespan of the split the weights settle on.
double settle(cohort::adaptive_weights& w, std::size_t n, cost_model model, int calls) {
  for (int c = 0; c < calls; ++c) {
    const cohort::partition used = w.split(n);
    w.record(used, model(used));
  }
  return makespan(model(w.split(n)));
}

// Two unequal members whose times do not depend on each other: member 1 does an item in a third
// of member 0's time.
std::vector<double> independent(const cohort::partition& p) {
  return {3e-9 * static_cast<double>(p.count(0)), 1e-9 * static_cast<double>(p.count(1))};
}

// heterogeneous_split's case on two real GPUs: the data are in member 0's memory, member 1 (busy:
// slower per item) reads its part over NVLink, and those reads compete with member 0's own work,
// so member 1's time grows with member 0's share. Member 1 is slower at the even split, so its
// speed says "move work to member 0", which makes the call slower (here at any share).
std::vector<double> reads_the_peer(const cohort::partition& p) {
  const double n = static_cast<double>(p.size());
  const double s0 = static_cast<double>(p.count(0)) / n, s1 = static_cast<double>(p.count(1)) / n;
  return {1e-3 * s0, 1.5e-3 * s1 + 2e-3 * s0};
}

} // namespace

TEST_CASE("adaptive weights still converge where the members' times are independent") {
  cohort::adaptive_weights w(2);
  const std::size_t n = 1'000'000;
  const double even = makespan(independent(cohort::partition::even(n, 2)));
  const double optimum = makespan(independent(cohort::partition::from_counts({250'000, 750'000})));
  const double settled = settle(w, n, independent, 30);
  CHECK(settled <= optimum * 1.001);
  CHECK(even / settled > 1.99);
  CHECK(w.weights()[1] == doctest::Approx(0.75).epsilon(0.001));
}

TEST_CASE("adaptive weights never settle on a split slower than even when members slow each "
          "other") {
  // Before the makespan test, the speeds alone moved every item to member 0 (makespan 2 ms
  // against the even split's 1.75 ms).
  cohort::adaptive_weights w(2);
  const std::size_t n = 1'000'000;
  const double even = makespan(reads_the_peer(cohort::partition::even(n, 2)));
  const double settled = settle(w, n, reads_the_peer, 30);
  CHECK(settled <= even * (1 + 1e-4));
  // Turned back, it tried the other way, giving the slow member more, which is faster here
  // (member 1 alone: 1.5 ms).
  CHECK(settled < 0.9 * even);
}

TEST_CASE("adaptive weights go back to the best split after a slower step and measure it again") {
  cohort::adaptive_weights w(2, 1.0);
  const cohort::partition even = cohort::partition::even(1000, 2);
  w.record(even, {0.020, 0.010}); // the first best; its speeds say 1/3 : 2/3
  CHECK(w.weights()[0] == doctest::Approx(1.0 / 3));
  w.record(w.split(1000), {0.030, 0.030}); // slower than even: back to even
  CHECK(w.weights()[0] == doctest::Approx(0.5));
  CHECK(w.best_seconds_per_item() == doctest::Approx(0.020 / 1000));
  // Measured again, even is slower than it was (the machine got busier): its fresh figure counts,
  // and the next step is half as long, the other way (away from 1/3).
  w.record(w.split(1000), {0.040, 0.020});
  CHECK(w.best_seconds_per_item() == doctest::Approx(0.040 / 1000));
  CHECK(w.weights()[0] == doctest::Approx(0.5 - 0.5 * (1.0 / 3 - 0.5)));
  // That step is faster: kept, the new best.
  const std::vector<double> kept = w.weights();
  w.record(w.split(1000), {0.030, 0.030});
  CHECK(w.best_weights() == kept);
  CHECK(w.best_seconds_per_item() == doctest::Approx(0.030 / 1000));
}

TEST_CASE("adaptive weights keep the even split's speed through noisy measurements") {
  // Each member's time off by up to 5 % either way, uniformly (seeded: the same every run). The
  // figure is what a user sees: the mean makespan of 10 calls after 30 to learn from (those 10
  // still step and measure), over 20 seeds.
  const std::size_t n = 1'000'000;
  for (const cost_model model : {independent, reads_the_peer}) {
    double ratio = 0.0;
    for (unsigned seed = 1; seed <= 20; ++seed) {
      std::mt19937 engine(seed);
      auto noisy = [&](const cohort::partition& used) {
        std::vector<double> seconds = model(used);
        for (double& s : seconds)
          s *= 1.0 + 0.05 * (2.0 * static_cast<double>(engine()) / 4294967296.0 - 1.0);
        return seconds;
      };
      cohort::adaptive_weights w(2);
      double total = 0.0;
      for (int c = 0; c < 40; ++c) {
        const cohort::partition used = w.split(n);
        if (c >= 30) total += makespan(model(used));
        w.record(used, noisy(used));
      }
      ratio += total / 10 / makespan(model(cohort::partition::even(n, 2))) / 20;
    }
    CAPTURE(ratio);
    CHECK(ratio <= (model == independent ? 0.55 : 1.0));
  }
}
