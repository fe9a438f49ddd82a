// cohort/p2p/collectives.cuh — all_reduce, reduce_scatter, reduce, all_gather and
// broadcast through peer memory, for any trivially copyable type and (for the reductions) any
// associative, commutative device operator. No NCCL involved.
//
//   cohort::p2p_clique peers(group);
//   cohort::distributed_buffer<stats> s(group, cohort::partition::replicated(n, group.size()));
//   cohort::all_reduce(peers, s, [] __device__(stats a, stats b) { return merge(a, b); });
//   cohort::all_reduce(peers, grads, cohort::avg, {.accumulate_in_float = true}); // bf16 grads
//   cohort::all_gather(peers, mine, everyone);   // everyone's shards: size() * a shard of mine
//   cohort::broadcast(peers, weights, /*root*/ 0);
//   cohort::reduce_scatter(peers, everyone, mine, cohort::sum);
//   cohort::reduce(peers, x, y, op, /*root*/ 0);
//
// all_reduce picks its algorithm by size: one-shot (every rank reduces every rank's data; one
// barrier; for small messages) up to `p2p_clique::automatic_one_shot_limit()` bytes per rank,
// two-shot (reduce-scatter then all-gather through peer memory; for large ones) above. Every rank
// reduces in rank order, so all ranks get the same bits. Buffers given to two-shot, all_gather and
// broadcast are read by the other GPUs: use cohort's buffers (or cudaMalloc memory).
#pragma once

#include "../communication/detail/arguments.cuh"
#include "../communication/operators.cuh"
#include "p2p_clique.cuh"

#include <cuda/std/span>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace cohort {

enum class p2p_algorithm { automatic, one_shot, two_shot };

struct p2p_options {
  p2p_algorithm algorithm = p2p_algorithm::automatic;
  // half and bfloat16: reduce in float and round once at the end (no effect on other types).
  bool accumulate_in_float = false;
};

namespace detail::p2p {

template <class T>
inline constexpr bool is_half_like = std::is_same_v<std::remove_cv_t<T>, __half> ||
                                     std::is_same_v<std::remove_cv_t<T>, __nv_bfloat16>;

inline bool aligned_16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Each span is memory of its member's device (for an emulated group, the one device).
template <class T>
void require_on_members(p2p_clique& peers, const std::vector<cuda::std::span<T>>& spans,
                        std::string_view function, std::string_view argument) {
  require_count(spans.size(), peers.size(), function, argument, "one span per member");
  for (std::size_t i = 0; i < spans.size(); ++i)
    require_memory_of(peers.group().device(i), spans[i].data(), spans[i].size_bytes(), function,
                      std::string(argument) + "[" + std::to_string(i) + "]");
}

template <class T>
std::size_t common_size(const std::vector<cuda::std::span<T>>& spans, std::string_view function,
                        std::string_view argument) {
  for (std::size_t i = 1; i < spans.size(); ++i)
    require_count(spans[i].size(), spans[0].size(), function, argument,
                  "every rank's span must be as large as rank 0's (span " + std::to_string(i) +
                      ")");
  return spans.empty() ? 0 : spans[0].size();
}

template <class T, class Range>
per_rank<T> pointers(const Range& spans) {
  per_rank<T> p{};
  for (std::size_t i = 0; i < spans.size(); ++i)
    p.of[i] = spans[i].data();
  return p;
}

template <class T, class Acc, class Op>
void launch_all_reduce(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                       std::size_t count, Op op, p2p_algorithm algorithm) {
  using R = reducer<T, Acc, Op, divides_by_ranks<Op>>;
  const R r{op, static_cast<int>(peers.size())};
  constexpr int V = wide_pack<T>;
  bool wide = V > 1;
  for (std::size_t i = 0; i < peers.size(); ++i)
    wide = wide && aligned_16(in.of[i]) && aligned_16(out.of[i]);
  const std::size_t unit = wide ? V : 1;
  const device_group& group = peers.group();
  if (algorithm == p2p_algorithm::one_shot) {
    const per_rank<T> scratch = peers.next_scratch<T>();
    const std::uint32_t signal = peers.take_signals(1);
    const unsigned blocks = peers.blocks_for(count / unit);
    auto args = [&](std::size_t i) {
      return std::make_tuple(in.of[i], out.of[i], scratch, count, peers.signals_for(i), signal, r);
    };
    launch_packed<one_shot_all_reduce<T, Acc, V, R>, one_shot_all_reduce<T, Acc, 1, R>>(
        wide, group, blocks, "cohort p2p one_shot_all_reduce", args);
    return;
  }
  const std::size_t per_member = (count + peers.size() - 1) / peers.size();
  const std::size_t chunk = (per_member + unit - 1) / unit * unit;
  const std::uint32_t signal = peers.take_signals(3);
  const unsigned blocks = peers.blocks_for(chunk / unit);
  auto args = [&](std::size_t i) {
    return std::make_tuple(in, out, count, chunk, peers.signals_for(i), signal, r);
  };
  launch_packed<two_shot_all_reduce<T, Acc, V, R>, two_shot_all_reduce<T, Acc, 1, R>>(
      wide, group, blocks, "cohort p2p two_shot_all_reduce", args);
}

template <class T, class Op>
void all_reduce(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                std::size_t count, Op op, p2p_options options) {
  static_assert(
      std::is_trivially_copyable_v<T>,
      "the peer-to-peer engine moves bytes: the element type must be trivially copyable.");
  static_assert(!divides_by_ranks<Op> || std::is_constructible_v<T, int> || is_half_like<T>,
                "cohort::avg divides by the number of ranks: T must be constructible from int.");
  const std::size_t bytes = count * sizeof(T);
  p2p_algorithm algorithm = options.algorithm;
  if (algorithm == p2p_algorithm::automatic)
    algorithm = bytes <= peers.automatic_one_shot_limit() ? p2p_algorithm::one_shot
                                                          : p2p_algorithm::two_shot;
  if (algorithm == p2p_algorithm::one_shot && bytes > peers.one_shot_limit())
    throw_invalid_argument("all_reduce (p2p)", "options.algorithm",
                           "one_shot takes at most " + std::to_string(peers.one_shot_limit()) +
                               " bytes per rank (the clique's one_shot_limit); this call has " +
                               std::to_string(bytes) +
                               ". Use two_shot or automatic, or a clique with a larger limit.");
  if (count == 0) return;
  if constexpr (is_half_like<T>) {
    if (options.accumulate_in_float)
      return launch_all_reduce<T, float>(peers, in, out, count, op, algorithm);
  }
  launch_all_reduce<T, T>(peers, in, out, count, op, algorithm);
}

// reduce_scatter (root < 0) or reduce (to `root`): `count` elements per rank's output.
template <class T, class Acc, class Op>
void launch_reduce_to(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                      std::size_t count, Op op, int root) {
  using R = reducer<T, Acc, Op, divides_by_ranks<Op>>;
  const R r{op, static_cast<int>(peers.size())};
  constexpr int V = wide_pack<T>;
  bool wide = V > 1 && (root >= 0 || (count * sizeof(T)) % 16 == 0);
  for (std::size_t i = 0; i < peers.size(); ++i)
    wide = wide && aligned_16(in.of[i]) && (out.of[i] == nullptr || aligned_16(out.of[i]));
  const std::uint32_t signal = peers.take_signals(2);
  const unsigned blocks = peers.blocks_for(count / (wide ? V : 1));
  const device_group& group = peers.group();
  if (root < 0) {
    auto args = [&](std::size_t i) {
      return std::make_tuple(in, out.of[i], count, peers.signals_for(i), signal, r);
    };
    launch_packed<p2p::reduce_scatter<T, Acc, V, R>, p2p::reduce_scatter<T, Acc, 1, R>>(
        wide, group, blocks, "cohort p2p reduce_scatter", args);
    return;
  }
  auto args = [&](std::size_t i) {
    return std::make_tuple(in, out.of[i], count, root, peers.signals_for(i), signal, r);
  };
  launch_packed<p2p::reduce<T, Acc, V, R>, p2p::reduce<T, Acc, 1, R>>(wide, group, blocks,
                                                                      "cohort p2p reduce", args);
}

template <class T, class Op>
void reduce_to(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
               std::size_t count, Op op, int root, p2p_options options) {
  static_assert(
      std::is_trivially_copyable_v<T>,
      "the peer-to-peer engine moves bytes: the element type must be trivially copyable.");
  static_assert(!divides_by_ranks<Op> || std::is_constructible_v<T, int> || is_half_like<T>,
                "cohort::avg divides by the number of ranks: T must be constructible from int.");
  if (count == 0) return;
  if constexpr (is_half_like<T>) {
    if (options.accumulate_in_float)
      return launch_reduce_to<T, float>(peers, in, out, count, op, root);
  }
  launch_reduce_to<T, T>(peers, in, out, count, op, root);
}

template <class T>
void all_gather(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                std::size_t count) {
  static_assert(std::is_trivially_copyable_v<T>,
                "all_gather moves bytes: T must be trivially copyable.");
  constexpr int V = wide_pack<T>;
  bool wide = V > 1 && (count * sizeof(T)) % 16 == 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    wide = wide && aligned_16(in.of[i]) && aligned_16(out.of[i]);
    // In place is send i at slot i of recv i; any other overlap is refused.
    const bool own_slot = in.of[i] == out.of[i] + count * i;
    if (!own_slot && in.of[i] < out.of[i] + count * peers.size() && out.of[i] < in.of[i] + count)
      throw_invalid_argument("all_gather (p2p)", "send",
                             "rank " + std::to_string(i) +
                                 "'s input overlaps its output other "
                                 "than at slot " +
                                 std::to_string(i) + " (the in-place form).");
  }
  if (count == 0) return;
  const std::uint32_t signal = peers.take_signals(2);
  const unsigned blocks = peers.blocks_for(count / (wide ? V : 1));
  auto args = [&](std::size_t i) {
    return std::make_tuple(in, out.of[i], count, peers.signals_for(i), signal);
  };
  launch_packed<p2p::all_gather<T, V>, p2p::all_gather<T, 1>>(wide, peers.group(), blocks,
                                                              "cohort p2p all_gather", args);
}

} // namespace detail::p2p

// In place: every rank's span becomes the reduction of all ranks' spans. One span per member of
// the clique's group, on that member's device, all the same size; enqueued on the group's streams.
template <class T, class Op>
void all_reduce(p2p_clique& peers, const std::vector<cuda::std::span<T>>& data, Op op,
                p2p_options options = {}) {
  detail::p2p::require_on_members(peers, data, "all_reduce (p2p)", "data");
  const std::size_t count = detail::p2p::common_size(data, "all_reduce (p2p)", "data");
  detail::p2p::all_reduce<T>(peers, detail::p2p::pointers<const T>(data),
                             detail::p2p::pointers<T>(data), count, op, options);
}

// Out of place: recv[i] becomes the reduction of every send[i]. send[i] and recv[i] may be the
// same span (in place) but may not partly overlap.
template <class T, class Op>
void all_reduce(p2p_clique& peers, const std::vector<cuda::std::span<const T>>& send,
                const std::vector<cuda::std::span<T>>& recv, Op op, p2p_options options = {}) {
  detail::p2p::require_on_members(peers, send, "all_reduce (p2p)", "send");
  detail::p2p::require_on_members(peers, recv, "all_reduce (p2p)", "recv");
  const std::size_t count = detail::p2p::common_size(send, "all_reduce (p2p)", "send");
  for (std::size_t i = 0; i < recv.size(); ++i) {
    detail::require_count(recv[i].size(), count, "all_reduce (p2p)", "recv",
                          "per rank, the size of a span of 'send'");
    detail::require_apart_or_same(send[i].data(), send[i].size_bytes(), recv[i].data(),
                                  recv[i].size_bytes(), "all_reduce (p2p)");
  }
  detail::p2p::all_reduce<T>(peers, detail::p2p::pointers<const T>(send),
                             detail::p2p::pointers<T>(recv), count, op, options);
}

// Over a distributed buffer whose shards all have the same size (partition::replicated).
template <class T, class Op>
void all_reduce(p2p_clique& peers, distributed_buffer<T>& data, Op op, p2p_options options = {}) {
  const std::size_t count =
      detail::equal_shard_count(data, peers.group(), "all_reduce (p2p)", "data");
  detail::p2p::per_rank<const T> in{};
  detail::p2p::per_rank<T> out{};
  for (std::size_t i = 0; i < data.shards(); ++i)
    in.of[i] = out.of[i] = data.shard(i).data.data();
  detail::p2p::all_reduce<T>(peers, in, out, count, op, options);
}

template <class T, class Op>
void all_reduce(p2p_clique& peers, const distributed_buffer<T>& send, distributed_buffer<T>& recv,
                Op op, p2p_options options = {}) {
  const std::size_t count =
      detail::equal_shard_count(send, peers.group(), "all_reduce (p2p)", "send");
  detail::require_count(detail::equal_shard_count(recv, peers.group(), "all_reduce (p2p)", "recv"),
                        count, "all_reduce (p2p)", "recv",
                        "per shard, the size of a shard of 'send'");
  detail::p2p::per_rank<const T> in{};
  detail::p2p::per_rank<T> out{};
  for (std::size_t i = 0; i < send.shards(); ++i) {
    in.of[i] = send.shard(i).data.data();
    out.of[i] = recv.shard(i).data.data();
    detail::require_apart_or_same(in.of[i], count * sizeof(T), out.of[i], count * sizeof(T),
                                  "all_reduce (p2p)");
  }
  detail::p2p::all_reduce<T>(peers, in, out, count, op, options);
}

// recv's shards each get every shard of send, in rank order (recv: size() times a shard of send).
template <class T>
void all_gather(p2p_clique& peers, const distributed_buffer<T>& send, distributed_buffer<T>& recv) {
  const std::size_t count =
      detail::equal_shard_count(send, peers.group(), "all_gather (p2p)", "send");
  detail::require_count(detail::equal_shard_count(recv, peers.group(), "all_gather (p2p)", "recv"),
                        count * peers.size(), "all_gather (p2p)", "recv",
                        "per shard, size() times a shard of 'send'");
  detail::p2p::per_rank<const T> in{};
  detail::p2p::per_rank<T> out{};
  for (std::size_t i = 0; i < peers.size(); ++i) {
    in.of[i] = send.shard(i).data.data();
    out.of[i] = recv.shard(i).data.data();
  }
  detail::p2p::all_gather<T>(peers, in, out, count);
}

// The same over per-device spans; send[i] may be slot i of recv[i] (in place).
template <class S, class T>
void all_gather(p2p_clique& peers, const std::vector<cuda::std::span<S>>& send,
                const std::vector<cuda::std::span<T>>& recv) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "send and recv hold the same type.");
  detail::p2p::require_on_members(peers, send, "all_gather (p2p)", "send");
  detail::p2p::require_on_members(peers, recv, "all_gather (p2p)", "recv");
  const std::size_t count = detail::p2p::common_size(send, "all_gather (p2p)", "send");
  for (const auto& r : recv)
    detail::require_count(r.size(), count * peers.size(), "all_gather (p2p)", "recv",
                          "per rank, size() times a span of 'send'");
  detail::p2p::all_gather<T>(peers, detail::p2p::pointers<const T>(send),
                             detail::p2p::pointers<T>(recv), count);
}

// recv's shard i becomes block i (a shard of recv's size) of the reduction of send's shards
// (send: size() times a shard of recv). recv's shard i may be block i of send's shard i.
template <class T, class Op>
void reduce_scatter(p2p_clique& peers, const distributed_buffer<T>& send,
                    distributed_buffer<T>& recv, Op op, p2p_options options = {}) {
  const std::size_t count =
      detail::equal_shard_count(recv, peers.group(), "reduce_scatter (p2p)", "recv");
  detail::require_count(
      detail::equal_shard_count(send, peers.group(), "reduce_scatter (p2p)", "send"),
      count * peers.size(), "reduce_scatter (p2p)", "send",
      "per shard, size() times a shard of 'recv'");
  detail::p2p::per_rank<const T> in{};
  detail::p2p::per_rank<T> out{};
  for (std::size_t i = 0; i < peers.size(); ++i) {
    in.of[i] = send.shard(i).data.data();
    out.of[i] = recv.shard(i).data.data();
    const bool own_block = out.of[i] == in.of[i] + count * i;
    if (!own_block && out.of[i] < in.of[i] + count * peers.size() && in.of[i] < out.of[i] + count)
      detail::throw_invalid_argument("reduce_scatter (p2p)", "recv",
                                     "shard " + std::to_string(i) + " overlaps send's shard " +
                                         std::to_string(i) + " other than at block " +
                                         std::to_string(i) + " (the in-place form).");
  }
  detail::p2p::reduce_to<T>(peers, in, out, count, op, -1, options);
}

// recv's shard `root` becomes the reduction of send's shards; recv's other shards are left alone.
template <class T, class Op>
void reduce(p2p_clique& peers, const distributed_buffer<T>& send, distributed_buffer<T>& recv,
            Op op, int root, p2p_options options = {}) {
  const std::size_t count = detail::equal_shard_count(send, peers.group(), "reduce (p2p)", "send");
  detail::require_count(detail::equal_shard_count(recv, peers.group(), "reduce (p2p)", "recv"),
                        count, "reduce (p2p)", "recv", "per shard, the size of a shard of 'send'");
  if (root < 0 || static_cast<std::size_t>(root) >= peers.size())
    detail::throw_invalid_argument("reduce (p2p)", "root",
                                   "rank " + std::to_string(root) + " is not in [0, " +
                                       std::to_string(peers.size()) + ").");
  detail::p2p::per_rank<const T> in{};
  detail::p2p::per_rank<T> out{};
  for (std::size_t i = 0; i < peers.size(); ++i)
    in.of[i] = send.shard(i).data.data();
  out.of[root] = recv.shard(static_cast<std::size_t>(root)).data.data();
  detail::require_apart_or_same(in.of[root], count * sizeof(T), out.of[root], count * sizeof(T),
                                "reduce (p2p)");
  detail::p2p::reduce_to<T>(peers, in, out, count, op, root, options);
}

// Every shard becomes a copy of shard `root`.
template <class T>
void broadcast(p2p_clique& peers, distributed_buffer<T>& data, int root) {
  static_assert(std::is_trivially_copyable_v<T>,
                "broadcast moves bytes: T must be trivially copyable.");
  const std::size_t count =
      detail::equal_shard_count(data, peers.group(), "broadcast (p2p)", "data");
  if (root < 0 || static_cast<std::size_t>(root) >= peers.size())
    detail::throw_invalid_argument("broadcast (p2p)", "root",
                                   "rank " + std::to_string(root) + " is not in [0, " +
                                       std::to_string(peers.size()) + ").");
  if (count == 0) return;
  const T* source = data.shard(static_cast<std::size_t>(root)).data.data();
  constexpr int V = detail::p2p::wide_pack<T>;
  bool wide = V > 1 && detail::p2p::aligned_16(source);
  for (std::size_t i = 0; i < peers.size(); ++i)
    wide = wide && detail::p2p::aligned_16(data.shard(i).data.data());
  const std::uint32_t signal = peers.take_signals(2);
  const unsigned blocks = peers.blocks_for(count / (wide ? V : 1));
  auto args = [&](std::size_t i) {
    return std::make_tuple(source, data.shard(i).data.data(), count, peers.signals_for(i), signal);
  };
  detail::p2p::launch_packed<detail::p2p::broadcast<T, V>, detail::p2p::broadcast<T, 1>>(
      wide, peers.group(), blocks, "cohort p2p broadcast", args);
}

} // namespace cohort
