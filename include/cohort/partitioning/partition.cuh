// cohort/partitioning/partition.cuh — how `n` items are split over the devices of a group.
//
// Pure host code with no CUDA calls, usable on its own. A partition is a list of contiguous,
// ordered ranges [offset, offset + count) that cover [0, n) exactly once, one range per device.
//
//   auto p = cohort::partition::even(10, 3);               // counts 4, 3, 3
//   auto q = cohort::partition::weighted(10, {1.0, 3.0});  // counts 3, 7 (largest remainder)
//   for (std::size_t d = 0; d < p.parts(); ++d) use(p.offset(d), p.count(d));
#pragma once

#include "../errors/argument_error.cuh"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

class partition {
 public:
  // Items as equal as can be: the first n % parts ranges get one more.
  static partition even(std::size_t n, std::size_t parts) {
    detail::require_argument(parts > 0, "partition::even", "parts", "must be at least 1.");
    std::vector<std::size_t> counts(parts, n / parts);
    for (std::size_t d = 0; d < n % parts; ++d)
      ++counts[d];
    return partition(std::move(counts));
  }

  // Items in proportion to `weights` (each finite and > 0), rounded by largest remainder so the
  // counts add up to n and no range is off by more than one item from its exact share.
  static partition weighted(std::size_t n, const std::vector<double>& weights) {
    detail::require_argument(!weights.empty(), "partition::weighted", "weights",
                             "must name at least one device.");
    double top = 0.0;
    for (std::size_t d = 0; d < weights.size(); ++d) {
      const double w = weights[d];
      if (!std::isfinite(w) || !(w > 0.0))
        detail::throw_invalid_argument("partition::weighted", "weights",
                                       "weight " + std::to_string(d) + " is " + std::to_string(w) +
                                           "; every weight must be finite and greater than zero.");
      top = std::max(top, w);
    }
    // Shares of the largest weight: the total stays finite whatever the weights (1e308 each).
    long double total = 0.0L;
    for (double w : weights)
      total += static_cast<long double>(w) / top;
    std::vector<std::size_t> counts(weights.size());
    // Not std::pair nor std::floor: both are constexpr, which nvcc's --expt-relaxed-constexpr
    // (PyTorch's default) compiles for the device too, warning that long double is double there.
    struct remainder {
      long double value;
      std::size_t part;
    };
    std::vector<remainder> remainders(weights.size());
    unsigned __int128 given = 0; // can pass 2^64 - 1 by a rounding when n is near it
    for (std::size_t d = 0; d < weights.size(); ++d) {
      // long double keeps n past 2^53 nearly exact; what rounding leaves is settled below.
      const long double exact =
          static_cast<long double>(n) * (static_cast<long double>(weights[d]) / top) / total;
      counts[d] =
          exact >= static_cast<long double>(n) ? n : static_cast<std::size_t>(floorl(exact));
      remainders[d] = {exact - static_cast<long double>(counts[d]), d};
      given += counts[d];
    }
    // Hand the leftover items to the largest remainders (ties to the lower position); where
    // rounding gave out too many (n near 2^64), take them back from the smallest.
    std::stable_sort(remainders.begin(), remainders.end(),
                     [](const remainder& a, const remainder& b) { return a.value > b.value; });
    for (std::size_t k = 0; given < n; ++k, ++given)
      ++counts[remainders[k % remainders.size()].part];
    for (std::size_t k = 0; given > n; ++k) {
      std::size_t& c = counts[remainders[remainders.size() - 1 - k % remainders.size()].part];
      if (c == 0) continue;
      --c;
      --given;
    }
    return partition(std::move(counts));
  }

  // `count` items on every one of `parts` (n = count * parts): each device holds a buffer of its
  // own of the same size, as collectives over distributed buffers want.
  static partition replicated(std::size_t count, std::size_t parts) {
    detail::require_argument(parts > 0, "partition::replicated", "parts", "must be at least 1.");
    detail::require_argument(count <= std::numeric_limits<std::size_t>::max() / parts,
                             "partition::replicated", "count",
                             "times parts passes the largest size_t; no buffer can hold that many "
                             "items.");
    return partition(std::vector<std::size_t>(parts, count));
  }

  // Exactly these counts, in order.
  static partition from_counts(std::vector<std::size_t> counts) {
    detail::require_argument(!counts.empty(), "partition::from_counts", "counts",
                             "must name at least one device.");
    std::size_t sum = 0;
    for (std::size_t c : counts) {
      detail::require_argument(
          c <= std::numeric_limits<std::size_t>::max() - sum, "partition::from_counts", "counts",
          "add up past the largest size_t; no buffer can hold that many items.");
      sum += c;
    }
    return partition(std::move(counts));
  }

  std::size_t parts() const noexcept { return counts_.size(); }
  std::size_t size() const noexcept { return offsets_.back(); } // the n that was split
  std::size_t count(std::size_t part) const {
    return detail::element_at(counts_, part, "partition::count", "parts");
  }
  std::size_t offset(std::size_t part) const {
    detail::element_at(counts_, part, "partition::offset", "parts"); // offsets_ has one more
    return offsets_[part];
  }
  const std::vector<std::size_t>& counts() const noexcept { return counts_; }

  friend bool operator==(const partition&, const partition&) = default;

 private:
  explicit partition(std::vector<std::size_t> counts)
      : counts_(std::move(counts)) {
    offsets_.resize(counts_.size() + 1, 0);
    std::partial_sum(counts_.begin(), counts_.end(), offsets_.begin() + 1);
  }

  std::vector<std::size_t> counts_;
  std::vector<std::size_t> offsets_; // parts() + 1 entries; the last is the total
};

} // namespace cohort
