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
// Each distributed argument is a distributed_buffer or a distributed_view (the user's own memory,
// one span per member), whose shards all have the same size (partition::replicated). Every form
// has a span form too (one span per member, on its device), where reduce_scatter and all_gather
// also work in place (rank i's block i of the larger buffer is its smaller one).
//
// all_reduce picks its algorithm by size: one-shot (every rank reduces every rank's data; one
// barrier, none up to 8 KiB a rank of 1-, 2-, 4- or 8-byte elements; for small messages) up to
// the clique's one_shot_limit() bytes per rank on 2 members (on n members, 2/n of it: one-shot
// reads n/2 times the data two-shot reads), two-shot (reduce-scatter then all-gather through peer
// memory; for large ones) above. Every rank reduces in rank order, so all ranks get the same
// bits. Buffers given to two-shot, reduce, reduce_scatter, all_gather and broadcast are read by
// the other GPUs directly (one-shot copies them into the clique's scratch or lines first): use
// cohort's buffers (or cudaMalloc memory).
//
// half, bfloat16, __half2, __nv_bfloat162 and fp8 (e4m3, e5m2) reduce in their own type (fp8 with
// cohort's operators: through float, rounded at every step), or in float with
// `accumulate_in_float` (rounding once at the end). A pair type is reduced lane by lane with
// cohort's operators; a user operator takes whole pairs, or floats (lanes) when accumulating in
// float. Both forms are compiled whatever the options say, so a user operator on these types
// takes the type itself and float (a generic lambda, `[] __device__(auto a, auto b)`, or a functor
// with both overloads); one that does not fails to compile with a message that says so.
#pragma once

#include "../communication/operators.cuh"
#include "../detail/arguments.cuh"
#include "../distributed/distributed_view.cuh"
#include "detail/collective_checks.cuh"
#include "detail/collectives.cuh"
#include "p2p_clique.cuh"
#include "p2p_options.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <type_traits>
#include <vector>

namespace cohort {

namespace detail::p2p {

// A distributed form's send and recv: recv written, both of one element type.
template <class S, class R>
concept send_and_recv = distributed_range<S> && writable_distributed_range<R> &&
    std::is_same_v<std::remove_const_t<range_element_t<const S>>, range_element_t<R>>;

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

// Over a distributed buffer or view whose shards all have the same size (partition::replicated).
template <distributed_range R, class Op>
void all_reduce(p2p_clique& peers, R&& data, Op op, p2p_options options = {}) {
  using T = range_element_t<R>;
  detail::require_writable<T>();
  const std::size_t count = detail::equal_shard_count(data, peers, "all_reduce (p2p)", "data");
  detail::p2p::all_reduce<T>(peers, detail::p2p::pointers<const T>(data),
                             detail::p2p::pointers<T>(data), count, op, options);
}

template <distributed_range S, writable_distributed_range R, class Op>
requires detail::p2p::send_and_recv<S, R>
void all_reduce(p2p_clique& peers, const S& send, R&& recv, Op op, p2p_options options = {}) {
  using T = range_element_t<R>;
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
template <distributed_range S, writable_distributed_range R>
requires detail::p2p::send_and_recv<S, R>
void all_gather(p2p_clique& peers, const S& send, R&& recv) {
  using T = range_element_t<R>;
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
template <distributed_range S, writable_distributed_range R, class Op>
requires detail::p2p::send_and_recv<S, R>
void reduce_scatter(p2p_clique& peers, const S& send, R&& recv, Op op, p2p_options options = {}) {
  using T = range_element_t<R>;
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
template <distributed_range S, writable_distributed_range R, class Op>
requires detail::p2p::send_and_recv<S, R>
void reduce(p2p_clique& peers, const S& send, R&& recv, Op op, int root, p2p_options options = {}) {
  using T = range_element_t<R>;
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
                            "reduce (p2p)", detail::indexed("recv", root), peers.stream(root));
  const auto in = detail::p2p::pointers<const T>(send);
  detail::p2p::per_rank<T> out{};
  out.of[root] = recv[root].data();
  detail::require_apart_or_same(in.of[root], count * sizeof(T), out.of[root], count * sizeof(T),
                                "reduce (p2p)");
  detail::p2p::reduce_to<T>(peers, in, out, count, op, root, options);
}

// Every shard becomes a copy of shard `root`.
template <distributed_range R>
void broadcast(p2p_clique& peers, R&& data, int root) {
  using T = range_element_t<R>;
  detail::require_writable<T>();
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
