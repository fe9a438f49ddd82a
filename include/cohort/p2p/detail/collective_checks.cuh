// cohort/p2p/detail/collective_checks.cuh — what the peer-to-peer collectives check of their
// arguments before anything is enqueued, and every rank's pointers from spans or a distributed
// range. The texts of the checks are built only when one fails.
#pragma once

#include "../../detail/arguments.cuh"
#include "../../distributed/distributed_view.cuh"
#include "../p2p_clique.cuh"
#include "engine.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort::detail::p2p {

// Each span is memory of its member's device (for an emulated group, the one device). `Members`
// answers size(), device(i) and stream(i): a p2p_clique, or the engine of gradient_buckets.
template <class Members, class T>
void require_on_members(const Members& peers, const std::vector<cuda::std::span<T>>& spans,
                        std::string_view function, std::string_view argument) {
  require_count(spans.size(), peers.size(), function, argument, "one span per member");
  for (std::size_t i = 0; i < spans.size(); ++i)
    require_memory_of(peers.device(i), spans[i].data(), spans[i].size_bytes(), function,
                      indexed(argument, i), peers.stream(i));
}

template <class T>
std::size_t common_size(const std::vector<cuda::std::span<T>>& spans, std::string_view function,
                        std::string_view argument) {
  for (std::size_t i = 1; i < spans.size(); ++i)
    require_count(spans[i].size(), spans[0].size(), function, argument, [&] {
      return "every rank's span must be as large as rank 0's (span " + std::to_string(i) + ")";
    });
  return spans.empty() ? 0 : spans[0].size();
}

// Every rank's pointers: from spans, or from a distributed range's shards (through `range` as
// given: a const buffer's are const).
template <class T, class U>
per_rank<T> pointers(const std::vector<cuda::std::span<U>>& spans) {
  per_rank<T> p{};
  for (std::size_t i = 0; i < spans.size(); ++i)
    p.of[i] = spans[i].data();
  return p;
}
template <class T, distributed_range Range>
per_rank<T> pointers(Range& range) {
  per_rank<T> p{};
  for (std::size_t i = 0; i < range.shards(); ++i)
    p.of[i] = range.shard(i).data.data();
  return p;
}

// The span forms' element types: send's T or const T, recv's T (written, so not const).
template <class S, class T>
constexpr void require_send_recv() {
  static_assert(std::is_same_v<std::remove_const_t<S>, T> && !std::is_const_v<T>,
                "send and recv hold the same type, and recv's spans are not of const elements.");
}

inline void require_root(const p2p_clique& peers, int root, std::string_view function) {
  if (root < 0 || static_cast<std::size_t>(root) >= peers.size())
    throw_invalid_argument(function, "root",
                           "rank " + std::to_string(root) + " is not in [0, " +
                               std::to_string(peers.size()) + ").");
}

// reduce_scatter's recv[i] is block i of send[i] (in place) or apart from send[i].
template <class S, class R>
void require_own_block(const per_rank<S>& in, const per_rank<R>& out, std::size_t count,
                       std::size_t ranks) {
  for (std::size_t i = 0; i < ranks; ++i) {
    const bool own_block = out.of[i] == in.of[i] + count * i;
    if (!own_block && out.of[i] < in.of[i] + count * ranks && in.of[i] < out.of[i] + count)
      throw_invalid_argument("reduce_scatter (p2p)", "recv",
                             "rank " + std::to_string(i) + "'s output overlaps its input other " +
                                 "than at block " + std::to_string(i) + " (the in-place form).");
  }
}

// all_gather's send[i] is slot i of recv[i] (in place) or apart from recv[i].
template <class S, class R>
void require_own_slot(const per_rank<S>& in, const per_rank<R>& out, std::size_t count,
                      std::size_t ranks) {
  for (std::size_t i = 0; i < ranks; ++i) {
    const bool own_slot = in.of[i] == out.of[i] + count * i;
    if (!own_slot && in.of[i] < out.of[i] + count * ranks && out.of[i] < in.of[i] + count)
      throw_invalid_argument("all_gather (p2p)", "send",
                             "rank " + std::to_string(i) +
                                 "'s input overlaps its output other than at slot " +
                                 std::to_string(i) + " (the in-place form).");
  }
}

// The span forms of all_gather and reduce_scatter: one span per member, on its device; every span
// of `large` is size() times the spans of `small`, which are all one size, returned.
template <class A, class B>
std::size_t small_and_large(const p2p_clique& peers, const std::vector<cuda::std::span<A>>& small,
                            std::string_view small_name,
                            const std::vector<cuda::std::span<B>>& large,
                            std::string_view large_name, std::string_view function) {
  require_on_members(peers, small, function, small_name);
  require_on_members(peers, large, function, large_name);
  const std::size_t count = common_size(small, function, small_name);
  for (const auto& l : large)
    require_count(l.size(), count * peers.size(), function, large_name, [&] {
      return "per rank, size() times a span of '" + std::string(small_name) + "'";
    });
  return count;
}

// The shard counts of send and recv over the clique (each equal across ranks).
template <class A, class B>
std::pair<std::size_t, std::size_t> shard_counts(const p2p_clique& peers, const A& send,
                                                 const B& recv, std::string_view function) {
  return {equal_shard_count(send, peers, function, "send"),
          equal_shard_count(recv, peers, function, "recv")};
}

} // namespace cohort::detail::p2p
