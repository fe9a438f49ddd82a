// cohort/p2p/p2p_options.cuh — how a peer-to-peer collective (p2p/collectives.cuh) runs: its
// all_reduce algorithm, and whether narrow floats accumulate in float.
//
//   cohort::all_reduce(peers, data, cohort::sum, {.algorithm = cohort::p2p_algorithm::two_shot});
//   cohort::all_reduce(peers, grads, cohort::avg, {.accumulate_in_float = true}); // bf16 grads
#pragma once

namespace cohort {

// one_shot: every rank reduces every rank's data, after one barrier, or (up to 8 KiB a rank of 1-,
// 2-, 4- or 8-byte elements) as the data arrives (small messages, up to the clique's
// one_shot_limit); two_shot: reduce-scatter then all-gather through peer memory (large
// ones); automatic: one_shot up to a limit that shrinks with the members (p2p/collectives.cuh).
enum class p2p_algorithm { automatic, one_shot, two_shot };

struct p2p_options {
  p2p_algorithm algorithm = p2p_algorithm::automatic;
  // half, bfloat16, their pairs and fp8: reduce in float and round once at the end (no effect on
  // other types).
  bool accumulate_in_float = false;
};

} // namespace cohort
