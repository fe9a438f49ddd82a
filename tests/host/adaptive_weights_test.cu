// adaptive_weights: weights move toward measured speed.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

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
