// cohort/p2p/collectives.cuh — all_reduce, reduce_scatter, reduce, all_gather and broadcast
// through peer memory, for any trivially copyable type (the reductions: default constructible too,
// as their accumulators are) and (for the reductions) any associative, commutative device
// operator. No NCCL involved.
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
// Every form has a span form too (one span per member, on its device), where reduce_scatter and
// all_gather also work in place (rank i's block i of the larger buffer is its smaller one).
//
// all_reduce picks its algorithm by size: one-shot (every rank reduces every rank's data; one
// barrier; for small messages) up to `p2p_clique::automatic_one_shot_limit()` bytes per rank,
// two-shot (reduce-scatter then all-gather through peer memory; for large ones) above. Every rank
// reduces in rank order, so all ranks get the same bits. Buffers given to two-shot, reduce,
// reduce_scatter, all_gather and broadcast are read by the other GPUs directly (one-shot copies
// them into the clique's scratch first): use cohort's buffers (or cudaMalloc memory).
//
// half, bfloat16, __half2, __nv_bfloat162 and fp8 (e4m3, e5m2) reduce in their own type (fp8 with
// cohort's operators: through float, rounded at every step), or in float with
// `accumulate_in_float` (rounding once at the end). A pair type is reduced lane by lane with
// cohort's operators; a user operator takes whole pairs, or floats (lanes) when accumulating in
// float. Both forms are compiled whatever the options say, so a user operator on these types
// takes the type itself and float (a generic lambda, `[] __device__(auto a, auto b)`, or a functor
// with both overloads); one that does not fails to compile with a message that says so.
#pragma once

#include "../detail/arguments.cuh"
#include "../communication/operators.cuh"
#include "../detail/nvtx.cuh"
#include "detail/launch.cuh"
#include "p2p_clique.cuh"

#include <cuda/std/span>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort {

enum class p2p_algorithm { automatic, one_shot, two_shot };

struct p2p_options {
  p2p_algorithm algorithm = p2p_algorithm::automatic;
  // half, bfloat16, their pairs and fp8: reduce in float and round once at the end (no effect on
  // other types).
  bool accumulate_in_float = false;
};

namespace detail::p2p {

// The types that accumulate_in_float applies to, besides the pairs.
template <class T>
inline constexpr bool widens_to_float = is_narrow_float<std::remove_cv_t<T>>;

// The lane type of a pair type (void for other types).
template <class T>
using lane_of = std::conditional_t<
    std::is_same_v<std::remove_cv_t<T>, __half2>, __half,
    std::conditional_t<std::is_same_v<std::remove_cv_t<T>, __nv_bfloat162>, __nv_bfloat16, void>>;

inline bool aligned_16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// What rank i's kernel gets; `no_op` for ensure_loaded's launch.
inline engine engine_arg(const p2p_clique& peers, std::size_t i, bool no_op) {
  engine e = peers.engine_for(i);
  if (no_op) e.ranks = 0;
  return e;
}

// Each span is memory of its member's device (for an emulated group, the one device).
template <class T>
void require_on_members(const p2p_clique& peers, const std::vector<cuda::std::span<T>>& spans,
                        std::string_view function, std::string_view argument) {
  require_count(spans.size(), peers.size(), function, argument, "one span per member");
  for (std::size_t i = 0; i < spans.size(); ++i)
    require_memory_of(peers.device(i), spans[i].data(), spans[i].size_bytes(), function,
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

// Every rank's pointers: from spans, or from a distributed buffer's shards.
template <class T, class Range>
per_rank<T> pointers(const Range& spans) {
  per_rank<T> p{};
  for (std::size_t i = 0; i < spans.size(); ++i)
    p.of[i] = spans[i].data();
  return p;
}
template <class T, class U>
per_rank<T> pointers(const distributed_buffer<U>& buffer) {
  per_rank<T> p{};
  for (std::size_t i = 0; i < buffer.shards(); ++i)
    p.of[i] = const_cast<U*>(buffer.shard(i).data.data());
  return p;
}

// The span forms' element types: send's T or const T, recv's T (written, so not const).
template <class S, class T>
constexpr void require_send_recv() {
  static_assert(std::is_same_v<std::remove_const_t<S>, T> && !std::is_const_v<T>,
                "send and recv hold the same type, and recv's spans are not of const elements.");
}

template <class U, class T>
per_rank<U> as_lanes(const per_rank<T>& p) {
  per_rank<U> out{};
  for (int i = 0; i < max_ranks; ++i)
    out.of[i] = reinterpret_cast<U*>(p.of[i]);
  return out;
}

// The checks every reduction makes, then `launch.template operator()<U, Acc>(in, out, count)`
// with the element type U it runs on (a pair type's lane where it is reduced lane by lane) and
// the accumulator Acc.
template <class T, class Op, class Launch>
void dispatch_reduction(const per_rank<const T>& in, const per_rank<T>& out, std::size_t count,
                        p2p_options options, Launch&& launch) {
  static_assert(
      bitwise_copyable_v<T>,
      "the peer-to-peer engine moves bytes: the element type must be trivially copyable.");
  using lane = lane_of<T>;
  static_assert(!divides_by_ranks<Op> || std::is_constructible_v<T, int> || widens_to_float<T> ||
                    !std::is_void_v<lane>,
                "cohort::avg divides by the number of ranks: T must be constructible from int.");
  if (count == 0) return;
  if constexpr (!std::is_void_v<lane>) {
    if (options.accumulate_in_float)
      return launch.template operator()<lane, float>(as_lanes<const lane>(in), as_lanes<lane>(out),
                                                     2 * count);
    // Lane by lane in the lane's own type only with cohort's operators: a user operator is never
    // asked to take a lone __half or __nv_bfloat16. In the `else` only: cohort's operators are
    // never compiled for the pair type itself, whose + and * PyTorch's flags compile out.
    if constexpr (is_cohort_operator<Op>)
      launch.template operator()<lane, lane>(as_lanes<const lane>(in), as_lanes<lane>(out),
                                             2 * count);
    else
      launch.template operator()<T, T>(in, out, count);
  } else {
    if constexpr (widens_to_float<T>) {
      if (options.accumulate_in_float) return launch.template operator()<T, float>(in, out, count);
    }
    launch.template operator()<T, T>(in, out, count);
  }
}

template <class T>
bool all_aligned(const p2p_clique& peers, const per_rank<T>& p, bool null_ok = false) {
  for (std::size_t i = 0; i < peers.size(); ++i)
    if (!(aligned_16(p.of[i]) || (null_ok && p.of[i] == nullptr))) return false;
  return true;
}

inline const char* name_of(p2p_algorithm a) noexcept {
  return a == p2p_algorithm::one_shot   ? "one_shot"
         : a == p2p_algorithm::two_shot ? "two_shot"
                                        : "automatic";
}

inline p2p_algorithm choose(const p2p_clique& peers, std::size_t bytes, p2p_algorithm algorithm) {
  if (algorithm == p2p_algorithm::automatic)
    algorithm = bytes <= peers.automatic_one_shot_limit() ? p2p_algorithm::one_shot
                                                          : p2p_algorithm::two_shot;
  if (algorithm == p2p_algorithm::one_shot && bytes > peers.one_shot_limit())
    throw_invalid_argument("all_reduce (p2p)", "options.algorithm",
                           "one_shot takes at most " + std::to_string(peers.one_shot_limit()) +
                               " bytes per rank (the clique's one_shot_limit); this call has " +
                               std::to_string(bytes) +
                               ". Use two_shot or automatic, or a clique with a larger limit.");
  return algorithm;
}

template <class T, class Op>
void all_reduce(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                std::size_t count, Op op, p2p_options options) {
  const p2p_algorithm algorithm = choose(peers, count * sizeof(T), options.algorithm);
  const nvtx_range range("all_reduce", "p2p %s %zu B/rank", name_of(algorithm), count * sizeof(T));
  dispatch_reduction<T, Op>(in, out, count, options, [&]<class U, class Acc>(
                                                         const per_rank<const U>& from,
                                                         const per_rank<U>& to, std::size_t n) {
    using R = reducer<U, Acc, Op, divides_by_ranks<Op>>;
    const R r{op, static_cast<int>(peers.size())};
    constexpr int V = wide_pack<U>;
    const bool wide = V > 1 && all_aligned(peers, from) && all_aligned(peers, to);
    const std::size_t unit = wide ? V : 1;
    if (algorithm == p2p_algorithm::one_shot) {
      auto args = [&](std::size_t i, bool no_op) {
        return std::make_tuple(from.of[i], to.of[i], n, engine_arg(peers, i, no_op), r);
      };
      launch_packed<one_shot_all_reduce<U, Acc, V, R>, one_shot_all_reduce<U, Acc, 1, R>>(
          wide, peers, peers.blocks_for(n / unit), "cohort p2p one_shot_all_reduce", args);
      return;
    }
    const std::size_t per_member = (n + peers.size() - 1) / peers.size();
    const std::size_t chunk = (per_member + unit - 1) / unit * unit;
    auto args = [&](std::size_t i, bool no_op) {
      return std::make_tuple(from, to, n, chunk, engine_arg(peers, i, no_op), r);
    };
    launch_packed<two_shot_all_reduce<U, Acc, V, R>, two_shot_all_reduce<U, Acc, 1, R>>(
        wide, peers, peers.blocks_for(chunk / unit), "cohort p2p two_shot_all_reduce", args);
  });
}

// reduce_scatter (root < 0) or reduce (to `root`): `count` elements per rank's output.
template <class T, class Op>
void reduce_to(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
               std::size_t count, Op op, int root, p2p_options options) {
  const nvtx_range range(root < 0 ? "reduce_scatter" : "reduce", "p2p %zu B/rank",
                         count * sizeof(T));
  dispatch_reduction<T, Op>(in, out, count, options, [&]<class U, class Acc>(
                                                         const per_rank<const U>& from,
                                                         const per_rank<U>& to, std::size_t n) {
    using R = reducer<U, Acc, Op, divides_by_ranks<Op>>;
    const R r{op, static_cast<int>(peers.size())};
    constexpr int V = wide_pack<U>;
    const bool wide = V > 1 && (root >= 0 || (n * sizeof(U)) % 16 == 0) &&
                      all_aligned(peers, from) && all_aligned(peers, to, /*null_ok=*/true);
    auto args = [&](std::size_t i, bool no_op) {
      return std::make_tuple(from, to.of[i], n, root, engine_arg(peers, i, no_op), r);
    };
    launch_packed<p2p::reduce_to<U, Acc, V, R>, p2p::reduce_to<U, Acc, 1, R>>(
        wide, peers, peers.blocks_for(n / (wide ? V : 1)),
        root < 0 ? "cohort p2p reduce_scatter" : "cohort p2p reduce", args);
  });
}

template <class T>
void all_gather(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                std::size_t count) {
  static_assert(bitwise_copyable_v<T>,
                "all_gather moves bytes: T must be trivially copyable.");
  const nvtx_range range("all_gather", "p2p %zu B/rank", count * sizeof(T));
  for (std::size_t i = 0; i < peers.size(); ++i) {
    // In place is send i at slot i of recv i; any other overlap is refused.
    const bool own_slot = in.of[i] == out.of[i] + count * i;
    if (!own_slot && in.of[i] < out.of[i] + count * peers.size() && out.of[i] < in.of[i] + count)
      throw_invalid_argument("all_gather (p2p)", "send",
                             "rank " + std::to_string(i) +
                                 "'s input overlaps its output other than at slot " +
                                 std::to_string(i) + " (the in-place form).");
  }
  if (count == 0) return;
  constexpr int V = wide_pack<T>;
  const bool wide =
      V > 1 && (count * sizeof(T)) % 16 == 0 && all_aligned(peers, in) && all_aligned(peers, out);
  auto args = [&](std::size_t i, bool no_op) {
    return std::make_tuple(in, out.of[i], count, engine_arg(peers, i, no_op));
  };
  launch_packed<p2p::all_gather<T, V>, p2p::all_gather<T, 1>>(
      wide, peers, peers.blocks_for(count / (wide ? V : 1)), "cohort p2p all_gather", args);
}

template <class T>
void broadcast(p2p_clique& peers, const per_rank<T>& data, std::size_t count, int root) {
  static_assert(bitwise_copyable_v<T>,
                "broadcast moves bytes: T must be trivially copyable.");
  const nvtx_range range("broadcast", "p2p %zu B from rank %d", count * sizeof(T), root);
  if (root < 0 || static_cast<std::size_t>(root) >= peers.size())
    throw_invalid_argument("broadcast (p2p)", "root",
                           "rank " + std::to_string(root) + " is not in [0, " +
                               std::to_string(peers.size()) + ").");
  if (count == 0) return;
  const T* source = data.of[root];
  constexpr int V = wide_pack<T>;
  const bool wide = V > 1 && all_aligned(peers, data);
  auto args = [&](std::size_t i, bool no_op) {
    return std::make_tuple(source, data.of[i], count, engine_arg(peers, i, no_op));
  };
  launch_packed<p2p::broadcast<T, V>, p2p::broadcast<T, 1>>(
      wide, peers, peers.blocks_for(count / (wide ? V : 1)), "cohort p2p broadcast", args);
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
    require_count(l.size(), count * peers.size(), function, large_name,
                  "per rank, size() times a span of '" + std::string(small_name) + "'");
  return count;
}

// The shard counts of send and recv over the clique (each equal across ranks).
template <class A, class B>
std::pair<std::size_t, std::size_t> shard_counts(const p2p_clique& peers, const A& send,
                                                 const B& recv, std::string_view function) {
  return {equal_shard_count(send, peers, function, "send"),
          equal_shard_count(recv, peers, function, "recv")};
}

} // namespace detail::p2p

// In place: every rank's span becomes the reduction of all ranks' spans. One span per member of
// the clique's group, on that member's device, all the same size; enqueued on the group's streams.
template <class T, class Op>
void all_reduce(p2p_clique& peers, const std::vector<cuda::std::span<T>>& data, Op op,
                p2p_options options = {}) {
  detail::require_writable<T>();
  detail::p2p::require_on_members(peers, data, "all_reduce (p2p)", "data");
  const std::size_t count = detail::p2p::common_size(data, "all_reduce (p2p)", "data");
  detail::p2p::all_reduce<T>(peers, detail::p2p::pointers<const T>(data),
                             detail::p2p::pointers<T>(data), count, op, options);
}

// Out of place: recv[i] becomes the reduction of every send[i]. send[i] and recv[i] may be the
// same span (in place) but may not partly overlap.
template <class S, class T, class Op>
void all_reduce(p2p_clique& peers, const std::vector<cuda::std::span<S>>& send,
                const std::vector<cuda::std::span<T>>& recv, Op op, p2p_options options = {}) {
  detail::p2p::require_send_recv<S, T>();
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
  const std::size_t count = detail::equal_shard_count(data, peers, "all_reduce (p2p)", "data");
  detail::p2p::all_reduce<T>(peers, detail::p2p::pointers<const T>(data),
                             detail::p2p::pointers<T>(data), count, op, options);
}

template <class T, class Op>
void all_reduce(p2p_clique& peers, const distributed_buffer<T>& send, distributed_buffer<T>& recv,
                Op op, p2p_options options = {}) {
  const auto [count, recv_count] = detail::p2p::shard_counts(peers, send, recv, "all_reduce (p2p)");
  detail::require_count(recv_count, count, "all_reduce (p2p)", "recv",
                        "per shard, the size of a shard of 'send'");
  const auto in = detail::p2p::pointers<const T>(send);
  const auto out = detail::p2p::pointers<T>(recv);
  for (std::size_t i = 0; i < peers.size(); ++i)
    detail::require_apart_or_same(in.of[i], count * sizeof(T), out.of[i], count * sizeof(T),
                                  "all_reduce (p2p)");
  detail::p2p::all_reduce<T>(peers, in, out, count, op, options);
}

// recv's shards each get every shard of send, in rank order (recv: size() times a shard of send).
template <class T>
void all_gather(p2p_clique& peers, const distributed_buffer<T>& send, distributed_buffer<T>& recv) {
  const auto [count, recv_count] = detail::p2p::shard_counts(peers, send, recv, "all_gather (p2p)");
  detail::require_count(recv_count, count * peers.size(), "all_gather (p2p)", "recv",
                        "per shard, size() times a shard of 'send'");
  detail::p2p::all_gather<T>(peers, detail::p2p::pointers<const T>(send),
                             detail::p2p::pointers<T>(recv), count);
}

// The same over per-device spans; send[i] may be slot i of recv[i] (in place).
template <class S, class T>
void all_gather(p2p_clique& peers, const std::vector<cuda::std::span<S>>& send,
                const std::vector<cuda::std::span<T>>& recv) {
  detail::p2p::require_send_recv<S, T>();
  const std::size_t count =
      detail::p2p::small_and_large(peers, send, "send", recv, "recv", "all_gather (p2p)");
  detail::p2p::all_gather<T>(peers, detail::p2p::pointers<const T>(send),
                             detail::p2p::pointers<T>(recv), count);
}

// recv's shard i becomes block i (a shard of recv's size) of the reduction of send's shards
// (send: size() times a shard of recv).
template <class T, class Op>
void reduce_scatter(p2p_clique& peers, const distributed_buffer<T>& send,
                    distributed_buffer<T>& recv, Op op, p2p_options options = {}) {
  const auto [send_count, count] =
      detail::p2p::shard_counts(peers, send, recv, "reduce_scatter (p2p)");
  detail::require_count(send_count, count * peers.size(), "reduce_scatter (p2p)", "send",
                        "per shard, size() times a shard of 'recv'");
  const auto in = detail::p2p::pointers<const T>(send);
  const auto out = detail::p2p::pointers<T>(recv);
  detail::p2p::require_own_block(in, out, count, peers.size());
  detail::p2p::reduce_to<T>(peers, in, out, count, op, -1, options);
}

// The same over per-device spans; recv[i] may be block i of send[i] (in place:
// recv[i] = send[i].subspan(i * count, count)).
template <class S, class T, class Op>
void reduce_scatter(p2p_clique& peers, const std::vector<cuda::std::span<S>>& send,
                    const std::vector<cuda::std::span<T>>& recv, Op op, p2p_options options = {}) {
  detail::p2p::require_send_recv<S, T>();
  const std::size_t count =
      detail::p2p::small_and_large(peers, recv, "recv", send, "send", "reduce_scatter (p2p)");
  const auto in = detail::p2p::pointers<const T>(send);
  const auto out = detail::p2p::pointers<T>(recv);
  detail::p2p::require_own_block(in, out, count, peers.size());
  detail::p2p::reduce_to<T>(peers, in, out, count, op, -1, options);
}

// recv's shard `root` becomes the reduction of send's shards; recv's other shards are left alone.
template <class T, class Op>
void reduce(p2p_clique& peers, const distributed_buffer<T>& send, distributed_buffer<T>& recv,
            Op op, int root, p2p_options options = {}) {
  const auto [count, recv_count] = detail::p2p::shard_counts(peers, send, recv, "reduce (p2p)");
  detail::require_count(recv_count, count, "reduce (p2p)", "recv",
                        "per shard, the size of a shard of 'send'");
  detail::p2p::require_root(peers, root, "reduce (p2p)");
  const auto in = detail::p2p::pointers<const T>(send);
  detail::p2p::per_rank<T> out{};
  out.of[root] = detail::p2p::pointers<T>(recv).of[root];
  detail::require_apart_or_same(in.of[root], count * sizeof(T), out.of[root], count * sizeof(T),
                                "reduce (p2p)");
  detail::p2p::reduce_to<T>(peers, in, out, count, op, root, options);
}

// The same over per-device spans; only recv[root] is written (the other ranks' recv spans may be
// empty).
template <class S, class T, class Op>
void reduce(p2p_clique& peers, const std::vector<cuda::std::span<S>>& send,
            const std::vector<cuda::std::span<T>>& recv, Op op, int root,
            p2p_options options = {}) {
  detail::p2p::require_send_recv<S, T>();
  detail::p2p::require_on_members(peers, send, "reduce (p2p)", "send");
  detail::p2p::require_root(peers, root, "reduce (p2p)");
  const std::size_t count = detail::p2p::common_size(send, "reduce (p2p)", "send");
  detail::require_count(recv.size(), peers.size(), "reduce (p2p)", "recv", "one span per member");
  detail::require_count(recv[root].size(), count, "reduce (p2p)", "recv",
                        "the root's span, the size of a span of 'send'");
  detail::require_memory_of(peers.device(root), recv[root].data(), recv[root].size_bytes(),
                            "reduce (p2p)", "recv[" + std::to_string(root) + "]");
  const auto in = detail::p2p::pointers<const T>(send);
  detail::p2p::per_rank<T> out{};
  out.of[root] = recv[root].data();
  detail::require_apart_or_same(in.of[root], count * sizeof(T), out.of[root], count * sizeof(T),
                                "reduce (p2p)");
  detail::p2p::reduce_to<T>(peers, in, out, count, op, root, options);
}

// Every shard becomes a copy of shard `root`.
template <class T>
void broadcast(p2p_clique& peers, distributed_buffer<T>& data, int root) {
  const std::size_t count = detail::equal_shard_count(data, peers, "broadcast (p2p)", "data");
  detail::p2p::broadcast<T>(peers, detail::p2p::pointers<T>(data), count, root);
}

// The same over per-device spans, all the same size.
template <class T>
void broadcast(p2p_clique& peers, const std::vector<cuda::std::span<T>>& data, int root) {
  detail::require_writable<T>();
  detail::p2p::require_on_members(peers, data, "broadcast (p2p)", "data");
  const std::size_t count = detail::p2p::common_size(data, "broadcast (p2p)", "data");
  detail::p2p::broadcast<T>(peers, detail::p2p::pointers<T>(data), count, root);
}

} // namespace cohort
