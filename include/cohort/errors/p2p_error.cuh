// cohort/errors/p2p_error.cuh — the exception a p2p clique throws once a peer did not arrive.
//
// A block of the peer-to-peer engine (or of a user's kernel with a p2p_session) that waits for a
// peer longer than the clique's patience gives up: every kernel on the clique leaves, and the next
// call on the clique that moves data, `p2p_clique::check()` or the group's `synchronize()` throws a
// `p2p_error`
// naming the host call, and for each rank that gave up the device, the block, the engine's call it
// waited in, the peer that did not arrive and the values each rank had reached. The CUDA context
// is intact: the program destroys the clique, makes a new one and goes on.
//
//   try { group.synchronize(); } catch (const cohort::p2p_error& e) { missing = e.peer(); }
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

// One rank's block that waited past the patience.
struct p2p_wait {
  int rank = 0;
  int device = 0;
  int peer = 0; // the rank that did not arrive
  unsigned block = 0;
  std::string call; // the engine's call it waited in ("all_reduce (one-shot)", "p2p_session::wait")
  bool point_to_point = false; // a wait for a signal: `value` counts signals, not barrier values
  std::uint64_t value = 0;     // what it waited for
  std::uint64_t seen = 0;      // what it found
  std::chrono::nanoseconds waited{0};
  std::vector<std::uint64_t> reached; // per rank: the last barrier value its block `block` sent
};

namespace detail {

inline std::string p2p_message(std::string_view call, const std::vector<p2p_wait>& waits) {
  std::string text = "cohort: " + std::string(call) + ": the p2p clique has stopped.";
  for (const p2p_wait& w : waits) {
    text +=
        " Rank " + std::to_string(w.rank) + " (device " + std::to_string(w.device) + "), block " +
        std::to_string(w.block) + ", waited " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(w.waited).count()) +
        " ms in " + w.call + " for rank " + std::to_string(w.peer) + ", which did not arrive (";
    text += w.point_to_point ? "signal " + std::to_string(w.value) + " awaited, " +
                                   std::to_string(w.seen) + " received"
                             : "barrier value " + std::to_string(w.value) + " awaited, " +
                                   std::to_string(w.seen) + " reached";
    text += "; the values block " + std::to_string(w.block) + " of each rank had reached:";
    for (std::size_t q = 0; q < w.reached.size(); ++q)
      text += (q == 0 ? " " : ", ") + std::string("rank ") + std::to_string(q) + " " +
              std::to_string(w.reached[q]);
    text += ").";
  }
  text += " Every kernel on the clique has left, and every later call on it is refused; the "
          "CUDA context and its memory are intact: destroy the clique and make a new p2p_clique. "
          "The missing rank's kernel could not run beside its peers (its stream blocked, kernels "
          "serialised by a tool, its SMs filled by other kernels), skipped the call, or was only "
          "late (a long kernel before it, a debugger: then give the clique a longer patience, or "
          "p2p_clique_options::wait_forever).";
  return text;
}

} // namespace detail

class p2p_error : public std::runtime_error {
 public:
  // `waits` is not empty; the rank that gave up first comes first.
  p2p_error(std::string_view call, std::vector<p2p_wait> waits)
      : std::runtime_error(detail::p2p_message(call, waits))
      , call_(call)
      , waits_(std::move(waits)) {}

  // The host call that reported it.
  const std::string& call() const noexcept { return call_; }
  // Every rank that gave up, the first first.
  const std::vector<p2p_wait>& waits() const noexcept { return waits_; }
  // The rank that gave up first, and the peer it waited for.
  int rank() const noexcept { return waits_.front().rank; }
  int peer() const noexcept { return waits_.front().peer; }

 private:
  std::string call_;
  std::vector<p2p_wait> waits_;
};

} // namespace cohort
