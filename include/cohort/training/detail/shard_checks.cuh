// cohort/training/detail/shard_checks.cuh — how sharded_parameters cuts a layer into the ranks'
// shards, and what it checks before it takes a layer (texts built only on a failure).
#pragma once

#include "../../detail/arguments.cuh"
#include "../../errors/argument_error.cuh"
#include "bucket_engines.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

namespace cohort::detail::training {

// Elements of a layer of `count` parameters that each of `ranks` ranks holds: count / ranks
// rounded up, then up to a multiple of 16 bytes, so that every rank's block of the gathered
// buffer starts 16-byte aligned (the peer-to-peer engine's wide path).
template <class T>
constexpr std::size_t shard_elements(std::size_t count, std::size_t ranks) {
  constexpr std::size_t unit = 16 / std::gcd(std::size_t{16}, sizeof(T));
  const std::size_t per_rank = (count + ranks - 1) / ranks;
  return (per_rank + unit - 1) / unit * unit;
}

// A span of a layer already taken: whose, for the message.
struct taken_span {
  const void* begin;
  std::size_t bytes;
  std::size_t layer;
  const char* argument; // "weights" or "gradients"
  std::size_t member;
};

inline std::string name_of(const taken_span& s) {
  return "layer " + std::to_string(s.layer) + "'s " + s.argument + "[" + std::to_string(s.member) +
         "]";
}

// A new layer `layer` of `count` parameters: its shards (and its gradient shards, where given),
// one span per member on that member's device, each `shard` elements, apart from one another
// and from every span taken before (`taken`, to which they are added once all are checked).
template <class Engine, class T>
void require_new_layer(const Engine& peers, std::size_t layer, std::size_t count, std::size_t shard,
                       const std::vector<cuda::std::span<T>>& weights,
                       const std::vector<cuda::std::span<T>>& gradients,
                       std::vector<taken_span>& taken) {
  constexpr const char* function = "sharded_parameters::add";
  detail::require_argument(count > 0, function, "count",
                           "is 0: a layer holds a parameter or more.");
  std::vector<taken_span> made;
  auto check = [&](const std::vector<cuda::std::span<T>>& spans, const char* argument) {
    detail::p2p::require_on_members(peers, spans, function, argument);
    for (std::size_t i = 0; i < spans.size(); ++i) {
      detail::require_count(spans[i].size(), shard, function, detail::indexed(argument, i), [&] {
        return "member " + std::to_string(i) + "'s shard of a layer of " + std::to_string(count) +
               " parameters over " + std::to_string(peers.ranks()) +
               " ranks: shard_size(count), count / ranks rounded up to 16 bytes";
      });
      made.push_back({spans[i].data(), spans[i].size_bytes(), layer, argument, i});
    }
  };
  check(weights, "weights");
  if (!gradients.empty()) check(gradients, "gradients");
  // Every span against every other: on an emulated group the members share one GPU's memory
  // (spans on two GPUs never overlap).
  auto overlap = [](const taken_span& a, const taken_span& b) {
    const auto* x = static_cast<const unsigned char*>(a.begin);
    const auto* y = static_cast<const unsigned char*>(b.begin);
    return x < y + b.bytes && y < x + a.bytes;
  };
  for (std::size_t k = 0; k < made.size(); ++k) {
    for (std::size_t j = 0; j < k; ++j)
      if (overlap(made[k], made[j]))
        detail::throw_invalid_argument(
            function, made[k].argument,
            "member " + std::to_string(made[k].member) + "'s span overlaps " + made[j].argument +
                "[" + std::to_string(made[j].member) + "]: each shard needs memory of its own.");
    for (const taken_span& t : taken)
      if (overlap(made[k], t))
        detail::throw_invalid_argument(function, made[k].argument,
                                       "member " + std::to_string(made[k].member) +
                                           "'s span overlaps " + name_of(t) +
                                           ": each shard needs memory of its own.");
  }
  taken.insert(taken.end(), made.begin(), made.end());
}

} // namespace cohort::detail::training
