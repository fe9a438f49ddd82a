// Partition math against an independent count.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace {

void check_covers(const cohort::partition& p, std::size_t n, std::size_t parts) {
  REQUIRE(p.parts() == parts);
  CHECK(p.size() == n);
  std::size_t next = 0;
  for (std::size_t d = 0; d < parts; ++d) {
    CHECK(p.offset(d) == next);
    next += p.count(d);
  }
  CHECK(next == n);
}

} // namespace

TEST_CASE("even partition over sizes 0 1 primes and fewer items than parts") {
  for (std::size_t parts : {1u, 2u, 3u, 4u, 7u, 8u})
    for (std::size_t n : {0ul, 1ul, 2ul, 3ul, 7ul, 13ul, 97ul, 1000003ul, (1ul << 31) + 11}) {
      CAPTURE(parts);
      CAPTURE(n);
      auto p = cohort::partition::even(n, parts);
      check_covers(p, n, parts);
      for (std::size_t d = 0; d < parts; ++d) {
        // The first n % parts parts get one item more than the rest.
        CHECK(p.count(d) == n / parts + (d < n % parts ? 1 : 0));
      }
    }
}

TEST_CASE("weighted partition follows the weights within one item") {
  // Quarters, so that each exact share n * w / total is a fraction of integers: compared without
  // rounding, "within one item" holds exactly (the largest remainder gives a share's floor or the
  // item above it, and a whole share exactly), at 2^33 and up to the largest size_t as at 3.
  const std::vector<double> weights{1.0, 3.0, 0.5, 2.25};
  const unsigned quarters[] = {4, 12, 2, 9};
  const unsigned total = 27; // of the quarters
  for (std::size_t d = 0; d < weights.size(); ++d)
    REQUIRE(weights[d] * 4 == quarters[d]);
  for (std::size_t n :
       {0ul, 1ul, 3ul, 11ul, 27ul, 1009ul, (1ul << 33) + 5, (1ul << 53) + 1,
        std::numeric_limits<std::size_t>::max() - 26, std::numeric_limits<std::size_t>::max()}) {
    CAPTURE(n);
    auto p = cohort::partition::weighted(n, weights);
    check_covers(p, n, weights.size());
    for (std::size_t d = 0; d < weights.size(); ++d) {
      CAPTURE(d);
      const unsigned __int128 scaled = static_cast<unsigned __int128>(n) * quarters[d];
      const auto floor = static_cast<std::size_t>(scaled / total);
      const bool whole = scaled % total == 0;
      CAPTURE(floor);
      CAPTURE(p.count(d));
      // |count - exact| < 1: the floor, or the item above it where the share is not whole.
      CHECK((p.count(d) == floor || (!whole && p.count(d) == floor + 1)));
    }
  }
  CHECK(cohort::partition::weighted(10, {1.0, 3.0}).counts() == std::vector<std::size_t>{3, 7});
  CHECK(cohort::partition::weighted(9, {1.0, 1.0, 1.0}) == cohort::partition::even(9, 3));
}

TEST_CASE("bad partitions are rejected with the argument named") {
  CHECK_THROWS_WITH_AS(cohort::partition::even(10, 0), doctest::Contains("argument 'parts'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::partition::weighted(10, {}), doctest::Contains("argument 'weights'"),
                       std::invalid_argument);
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(cohort::partition::weighted(10, {1.0, bad}),
                         doctest::Contains("weight 1 is"), std::invalid_argument);
  }
  CHECK_THROWS_AS(cohort::partition::from_counts({}), std::invalid_argument);
  CHECK(cohort::partition::from_counts({2, 0, 5}).offset(2) == 2);
  // A part past the end, as std::vector::at would say, with the call named.
  const auto three = cohort::partition::even(10, 3);
  CHECK_THROWS_WITH_AS((void)three.count(3),
                       "cohort::partition::count: index 3 is out of range (3 parts).",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS((void)three.offset(7), doctest::Contains("cohort::partition::offset"),
                       std::out_of_range);
  // One past the last part too (offset(3) returned 10, size(), and the text said "4 parts").
  CHECK_THROWS_WITH_AS((void)three.offset(3),
                       "cohort::partition::offset: index 3 is out of range (3 parts).",
                       std::out_of_range);
}

TEST_CASE("a replicated partition gives every part the same count") {
  for (std::size_t parts : {1u, 2u, 3u, 8u})
    for (std::size_t count : {0ul, 1ul, 7919ul}) {
      const auto p = cohort::partition::replicated(count, parts);
      check_covers(p, count * parts, parts);
      for (std::size_t d = 0; d < parts; ++d)
        CHECK(p.count(d) == count);
    }
  CHECK_THROWS_WITH_AS(cohort::partition::replicated(4, 0), doctest::Contains("argument 'parts'"),
                       std::invalid_argument);
}

// Found by tests/fuzz/partition_fuzz.cpp: weights whose sum overflows a double made every share
// zero and the leftover loop hand out n items one at a time (a hang for n near 2^64); counts
// whose sum passes 2^64 wrapped the offsets.
TEST_CASE("weighted splits survive extreme weights and sizes, and from_counts refuses overflow") {
  const auto huge = cohort::partition::weighted(1000, {1e308, 1e308, 1e308, 1e308});
  check_covers(huge, 1000, 4);
  CHECK(huge.counts() == std::vector<std::size_t>{250, 250, 250, 250});
  const auto tiny =
      cohort::partition::weighted(9, {std::numeric_limits<double>::denorm_min(), 2e-323});
  check_covers(tiny, 9, 2);
  CHECK(tiny.count(1) >= 5);
  const std::size_t most = std::numeric_limits<std::size_t>::max();
  const auto all = cohort::partition::weighted(most, {1.0, 2.0, 3.0});
  check_covers(all, most, 3);
  CHECK(all.count(2) > all.count(1));
  CHECK_THROWS_WITH_AS(cohort::partition::from_counts({most, 1}),
                       doctest::Contains("add up past the largest size_t"), std::invalid_argument);
  // replicated's total wrapped to 0, which an index form then took as a split of n = 0.
  CHECK_THROWS_WITH_AS(cohort::partition::replicated(std::size_t(1) << 63, 2),
                       doctest::Contains("partition::replicated: argument 'count'"),
                       std::invalid_argument);
  CHECK(cohort::partition::replicated(most / 3, 3).size() == most / 3 * 3);
}
