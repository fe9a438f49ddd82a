// cohort/training/detail/bucket_checks.cuh — what gradient_buckets checks before it takes a
// bucket, its compute streams, or a call that enqueues work (texts built only on a failure).
#pragma once

#include "../../detail/arguments.cuh"
#include "../../detail/one_capture.cuh"
#include "../../errors/argument_error.cuh"
#include "../../streams/stream_ref.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace cohort {

namespace detail::training {

// `Engine` is one of bucket_engines.cuh's: members() spans a bucket, device(i) and stream(i) where
// member i's collectives run, ranks() blocks a reduce_scatter cuts a bucket into.

// One stream per member, on its device, none of them the collectives' own; and the collectives'
// streams on the members' devices (a communicator's is the user's). `function`: the constructor
// that checks them.
template <class Engine>
void require_compute_streams(const Engine& peers, const std::vector<stream_ref>& compute,
                             const char* function = "gradient_buckets") {
  detail::require_count(compute.size(), peers.members(), function, "compute",
                        "one stream per member");
  for (std::size_t i = 0; i < compute.size(); ++i) {
    const stream_ref collectives = peers.stream(i);
    detail::require_stream(collectives, function, "collectives");
    if (collectives.device() != peers.device(i))
      detail::throw_invalid_argument(
          function, "collectives",
          "is a stream of device " + std::to_string(collectives.device().get()) +
              "; the communicator is on device " + std::to_string(peers.device(i).get()) + ".");
    const auto name = detail::indexed("compute", i);
    if (stream_ref::is_empty(compute[i].native_handle()))
      detail::require_stream(compute[i], function, name());
    if (compute[i].device() != peers.device(i))
      detail::throw_invalid_argument(
          function, name(),
          "is a stream of device " + std::to_string(compute[i].device().get()) + "; member " +
              std::to_string(i) + " is device " + std::to_string(peers.device(i).get()) + ".");
    if (compute[i] == peers.stream(i))
      detail::throw_invalid_argument(
          function, name(),
          "is the stream the collectives run on: the reductions could not overlap the "
          "backward. Use another stream (device_group::new_stream(" +
              std::to_string(i) + ")).");
  }
}

// A new bucket of `count` elements per member (checked on its members already): not empty,
// splittable into the ranks' blocks where it is reduce-scattered, within the one-shot limit where
// its all_reduce is asked to be one-shot (the p2p engine's), apart from every span of the buckets
// before it (`taken`, bucket by bucket, one span per member).
template <class Engine, class T>
void require_new_bucket(const Engine& peers, bool reduce_scatter,
                        const std::vector<cuda::std::span<T>>& gradients, std::size_t count,
                        const std::vector<cuda::std::span<const T>>& taken) {
  constexpr const char* function = "gradient_buckets::add";
  const std::size_t members = peers.members();
  const std::size_t ranks = peers.ranks();
  detail::require_argument(count > 0, function, "gradients", "the spans are empty.");
  if (reduce_scatter && count % ranks != 0)
    detail::throw_invalid_argument(function, "gradients",
                                   "holds " + std::to_string(count) +
                                       " elements per member, which do not split into " +
                                       std::to_string(ranks) +
                                       " equal blocks for reduce_scatter: pad the bucket to a "
                                       "multiple of the ranks.");
  // The collective's one check of its own that could fail later, after ready's waits.
  if (!reduce_scatter && count * sizeof(T) > peers.one_shot_limit())
    detail::throw_invalid_argument(function, "gradients",
                                   "holds " + std::to_string(count * sizeof(T)) +
                                       " bytes per member, above the clique's one_shot_limit (" +
                                       std::to_string(peers.one_shot_limit()) +
                                       ") that options.p2p.algorithm = one_shot needs.");
  // Every member's span against every member's of every other bucket: on an emulated group
  // the members share one GPU's memory (spans on two GPUs never overlap).
  for (std::size_t k = 0; k < taken.size(); ++k)
    for (std::size_t i = 0; i < members; ++i) {
      const cuda::std::span<const T> other = taken[k];
      if (gradients[i].data() < other.data() + other.size() &&
          other.data() < gradients[i].data() + count)
        detail::throw_invalid_argument(function, "gradients",
                                       "member " + std::to_string(i) + "'s span overlaps bucket " +
                                           std::to_string(k / members) + "'s (member " +
                                           std::to_string(k % members) +
                                           "'s): it would be reduced twice.");
    }
}

// Refused here, naming this call, before after_compute makes the clique's streams wait for the
// compute streams: a clique a launch broke part-way (the collective would refuse it, but after
// the waits); a clique stream being captured while its compute stream is not in that capture (a
// captured stream cannot wait for work outside its capture: call finish() first inside it,
// which brings the compute streams in); members whose streams would not all be in one capture
// (or none) once the waits took each compute stream's capture into its clique stream.
template <class Engine>
void require_launchable(const Engine& peers, const std::vector<stream_ref>& compute,
                        const char* function) {
  if constexpr (requires { peers.check(function); })
    peers.check(function); // p2p_error: a peer of an earlier call did not arrive
  if (peers.broken())
    detail::throw_invalid_argument(function, "this",
                                   "its p2p_clique was broken by a launch that failed part-way "
                                   "(the members' engine states differ for good): make a new "
                                   "p2p_clique, and gradient_buckets over it.");
  // Each stream's capture read once: member i's clique stream counts as in its compute
  // stream's capture where that is active (the waits take it there).
  detail::require_one_capture(
      compute.size(),
      [&](std::size_t i) {
        const detail::stream_capture on_compute = detail::read_capture(compute[i], function);
        const detail::stream_capture clique = detail::read_capture(peers.stream(i), function);
        if (clique.state.active && on_compute.state != clique.state)
          throw std::logic_error(
              "cohort::" + std::string(function) + ": member " + std::to_string(i) +
              "'s collectives' stream is being captured and its compute stream is not in that "
              "capture: the reduction could not wait for the gradients. Nothing was enqueued. "
              "Call finish() first inside the capture (it brings the compute streams in), or "
              "capture the compute streams as well.");
        return on_compute.state.active ? on_compute : clique;
      },
      function);
}

} // namespace detail::training

} // namespace cohort
