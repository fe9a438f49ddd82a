// cohort/p2p/detail/collectives.cuh — the peer-to-peer collectives over every rank's pointers,
// once their arguments are checked: each picks its kernel's variant (16-byte packs where every
// pointer allows) and grid, and launches it on every member (launch.cuh).
#pragma once

#include "../../detail/nvtx.cuh"
#include "../p2p_clique.cuh"
#include "../p2p_options.cuh"
#include "clique_access.cuh"
#include "collective_checks.cuh"
#include "collective_plan.cuh"
#include "kernels.cuh"
#include "launch.cuh"

#include <cstddef>
#include <tuple>

namespace cohort::detail::p2p {

template <class T, class Op>
void all_reduce(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                std::size_t count, Op op, p2p_options options) {
  const p2p_algorithm algorithm = choose(peers, count * sizeof(T), options.algorithm);
  const nvtx_range range("all_reduce", "p2p %s %zu B/rank", name_of(algorithm), count * sizeof(T));
  dispatch_reduction<T, Op>(
      in, out, count, options,
      [&]<class U, class Acc>(const per_rank<const U>& from, const per_rank<U>& to, std::size_t n) {
        using R = reducer<U, Acc, Op, divides_by_ranks<Op>>;
        const R r{op, static_cast<int>(peers.size())};
        constexpr int V = wide_pack<U>;
        const bool wide = V > 1 && all_aligned(peers, from) && all_aligned(peers, to);
        const std::size_t unit = wide ? V : 1;
        if (algorithm == p2p_algorithm::one_shot) {
          if constexpr (8 % sizeof(U) == 0) {
            if (n * sizeof(U) <= line_bytes) {
              auto args = [&](std::size_t i, bool no_op) {
                return std::make_tuple(from.of[i], to.of[i], n, engine_arg(peers, i, no_op), r);
              };
              launch_on_every_member<lines_all_reduce<U, Acc, R>>(
                  peers,
                  clique_access::blocks_for(peers, lines_for(n * sizeof(U)), line_block_threads),
                  "cohort p2p one_shot_all_reduce", args, line_block_threads);
              return;
            }
          }
          auto args = [&](std::size_t i, bool no_op) {
            return std::make_tuple(from.of[i], to.of[i], n, engine_arg(peers, i, no_op), r);
          };
          launch_packed<one_shot_all_reduce<U, Acc, V, R>, one_shot_all_reduce<U, Acc, 1, R>>(
              wide, peers, clique_access::blocks_for(peers, n / unit),
              "cohort p2p one_shot_all_reduce", args);
          return;
        }
        const std::size_t per_member = (n + peers.size() - 1) / peers.size();
        const std::size_t chunk = (per_member + unit - 1) / unit * unit;
        auto args = [&](std::size_t i, bool no_op) {
          return std::make_tuple(from, to, n, chunk, engine_arg(peers, i, no_op), r);
        };
        launch_packed<two_shot_all_reduce<U, Acc, V, R>, two_shot_all_reduce<U, Acc, 1, R>>(
            wide, peers, clique_access::blocks_for(peers, chunk / unit),
            "cohort p2p two_shot_all_reduce", args);
      });
}

// reduce_scatter (root < 0) or reduce (to `root`): `count` elements per rank's output.
template <class T, class Op>
void reduce_to(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
               std::size_t count, Op op, int root, p2p_options options) {
  const nvtx_range range(root < 0 ? "reduce_scatter" : "reduce", "p2p %zu B/rank",
                         count * sizeof(T));
  dispatch_reduction<T, Op>(
      in, out, count, options,
      [&]<class U, class Acc>(const per_rank<const U>& from, const per_rank<U>& to, std::size_t n) {
        using R = reducer<U, Acc, Op, divides_by_ranks<Op>>;
        const R r{op, static_cast<int>(peers.size())};
        constexpr int V = wide_pack<U>;
        const bool wide = V > 1 && (root >= 0 || (n * sizeof(U)) % 16 == 0) &&
                          all_aligned(peers, from) && all_aligned(peers, to, /*null_ok=*/true);
        auto args = [&](std::size_t i, bool no_op) {
          return std::make_tuple(from, to.of[i], n, root, engine_arg(peers, i, no_op), r);
        };
        launch_packed<p2p::reduce_to<U, Acc, V, R>, p2p::reduce_to<U, Acc, 1, R>>(
            wide, peers, clique_access::blocks_for(peers, n / (wide ? V : 1)),
            root < 0 ? "cohort p2p reduce_scatter" : "cohort p2p reduce", args);
      });
}

template <class T>
void all_gather(p2p_clique& peers, const per_rank<const T>& in, const per_rank<T>& out,
                std::size_t count) {
  static_assert(bitwise_copyable_v<T>, "all_gather moves bytes: T must be trivially copyable.");
  const nvtx_range range("all_gather", "p2p %zu B/rank", count * sizeof(T));
  // In place is send i at slot i of recv i; any other overlap is refused.
  require_own_slot(in, out, count, peers.size());
  if (count == 0) return;
  constexpr int V = wide_pack<T>;
  const bool wide =
      V > 1 && (count * sizeof(T)) % 16 == 0 && all_aligned(peers, in) && all_aligned(peers, out);
  auto args = [&](std::size_t i, bool no_op) {
    return std::make_tuple(in, out.of[i], count, engine_arg(peers, i, no_op));
  };
  launch_packed<p2p::all_gather<T, V>, p2p::all_gather<T, 1>>(
      wide, peers, clique_access::blocks_for(peers, count / (wide ? V : 1)),
      "cohort p2p all_gather", args);
}

template <class T>
void broadcast(p2p_clique& peers, const per_rank<T>& data, std::size_t count, int root) {
  static_assert(bitwise_copyable_v<T>, "broadcast moves bytes: T must be trivially copyable.");
  const nvtx_range range("broadcast", "p2p %zu B from rank %d", count * sizeof(T), root);
  require_root(peers, root, "broadcast (p2p)");
  if (count == 0) return;
  const T* source = data.of[root];
  constexpr int V = wide_pack<T>;
  const bool wide = V > 1 && all_aligned(peers, data);
  auto args = [&](std::size_t i, bool no_op) {
    return std::make_tuple(source, data.of[i], count, engine_arg(peers, i, no_op));
  };
  launch_packed<p2p::broadcast<T, V>, p2p::broadcast<T, 1>>(
      wide, peers, clique_access::blocks_for(peers, count / (wide ? V : 1)), "cohort p2p broadcast",
      args);
}

} // namespace cohort::detail::p2p
