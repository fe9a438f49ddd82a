// cohort/distributed/indices.cuh — the index range [0, n), split over a group.
//
// What the algorithms take in place of a buffer when the work is a function of the index:
// `multi_device_for_each(group, cohort::indices(n), f)` calls f(i) for every i in [0, n), and the
// reductions and scans read f(i) the same way. Split evenly by default, as a partition says, or
// by an adaptive_balancer that times each member's share and moves work toward the faster ones.
//
//   cohort::multi_device_for_each(group, cohort::indices(n), f);
//   cohort::multi_device_for_each(group, cohort::indices(n, cohort::partition::weighted(n, {1, 3})), f);
//   cohort::adaptive_balancer balancer(group);
//   cohort::multi_device_for_each(group, cohort::indices(n, balancer), f);
#pragma once

#include "../errors/argument_error.cuh"
#include "../execution/adaptive_balancer.cuh"
#include "../execution/device_group.cuh"
#include "../partitioning/partition.cuh"
#include "distributed_view.cuh"

#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace cohort {

class index_range {
 public:
  explicit index_range(std::size_t n) noexcept
      : n_(n) {}
  index_range(std::size_t n, partition split)
      : n_(n)
      , split_(std::move(split)) {}
  index_range(std::size_t n, adaptive_balancer& balancer) noexcept
      : n_(n)
      , balancer_(&balancer) {}

  std::size_t size() const noexcept { return n_; }

  // The balancer that splits this range, or null.
  adaptive_balancer* balancer() const noexcept { return balancer_; }

  // The partition this range was given, or null (split by a balancer, or evenly).
  const partition* given_split() const noexcept { return split_ ? &*split_ : nullptr; }

  // Member k's share for a call over `group`: the given split (checked against the group and n),
  // the balancer's next one (which orders moved ranges and refuses capture), or the even one.
  // `function` names the caller in errors, and `argument` this range.
  partition split_for(const device_group& group, std::string_view function,
                      std::string_view argument = "input") const {
    const std::size_t members = detail::members_of(group, function);
    if (balancer_ != nullptr) return balancer_->next_split(group, n_, function, argument);
    if (!split_) return partition::even(n_, members);
    detail::require_argument(
        split_->parts() == members && split_->size() == n_, function, argument, [&] {
          return "is split in " + std::to_string(split_->parts()) + " parts covering " +
                 std::to_string(split_->size()) + " items; the group has " +
                 std::to_string(members) + " members and the range " + std::to_string(n_) +
                 " items: give one part per member covering n.";
        });
    return *split_;
  }

 private:
  std::size_t n_;
  std::optional<partition> split_;
  adaptive_balancer* balancer_ = nullptr;
};

// [0, n) split evenly, by `split`, or by `balancer` (which must outlive the calls).
inline index_range indices(std::size_t n) noexcept {
  return index_range(n);
}
inline index_range indices(std::size_t n, partition split) {
  return index_range(n, std::move(split));
}
inline index_range indices(std::size_t n, adaptive_balancer& balancer) noexcept {
  return index_range(n, balancer);
}

namespace detail {

template <class I>
inline constexpr bool is_index_range = std::same_as<std::remove_cvref_t<I>, index_range>;

// What an algorithm reads: a distributed range (its elements) or an index range (the indices).
template <class I>
concept algorithm_input = distributed_range<I> || is_index_range<I>;

} // namespace detail

} // namespace cohort
