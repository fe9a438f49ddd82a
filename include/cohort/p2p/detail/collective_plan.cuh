// cohort/p2p/detail/collective_plan.cuh — how a peer-to-peer collective is planned on the host:
// the element type and accumulator it runs on (narrow floats and their pairs), 16-byte packs where
// every pointer allows them, and all_reduce's algorithm.
#pragma once

#include "../../communication/operators.cuh"
#include "../../detail/narrow_floats.cuh"
#include "../../memory/bitwise_copyable.cuh"
#include "../p2p_clique.cuh"
#include "../p2p_options.cuh"
#include "clique_access.cuh"
#include "engine.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace cohort::detail::p2p {

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
  engine e = clique_access::engine_for(peers, i);
  if (no_op) e.ranks = 0;
  return e;
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
    algorithm = bytes <= clique_access::automatic_one_shot_limit(peers) ? p2p_algorithm::one_shot
                                                                        : p2p_algorithm::two_shot;
  if (algorithm == p2p_algorithm::one_shot && bytes > peers.one_shot_limit())
    throw_invalid_argument("all_reduce (p2p)", "options.algorithm",
                           "one_shot takes at most " + std::to_string(peers.one_shot_limit()) +
                               " bytes per rank (the clique's one_shot_limit); this call has " +
                               std::to_string(bytes) +
                               ". Use two_shot or automatic, or a clique with a larger limit.");
  return algorithm;
}

} // namespace cohort::detail::p2p
