// cohort/p2p/p2p_clique_options.cuh — how a p2p_clique is made: its one-shot limit, the
// patience of its barriers, and the blocks a call may use.
//
//   cohort::p2p_clique tuned(group, {.patience = std::chrono::seconds(60), .max_blocks = 16});
//   cohort::p2p_clique patient(group, {.patience = cohort::p2p_clique_options::wait_forever});
#pragma once

#include "../errors/argument_error.cuh"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <optional>

namespace cohort {

namespace detail {
// A patience as the kernels count it (nanoseconds), saturated: past about 584 years (a patience
// of milliseconds::max()) the conversion overflowed into a short or negative one.
constexpr unsigned long long patience_nanoseconds(std::chrono::milliseconds patience) {
  constexpr unsigned long long per_ms = 1'000'000, most = ~0ull;
  const auto ms = static_cast<unsigned long long>(patience.count());
  return ms >= most / per_ms ? most : ms * per_ms;
}
} // namespace detail

struct p2p_clique_options {
  // Largest message, in bytes per rank, that the one-shot algorithm can take (it needs twice that
  // in scratch on every member), rounded up to a multiple of 256 bytes (one_shot_limit() says
  // what it became). On 2 NVLink-joined H200s one-shot was faster than two-shot up to 8 MiB and
  // slower from 16 MiB (docs/performance.md).
  std::size_t one_shot_limit = std::size_t{8} << 20;
  // How long a rank waits at a barrier for a peer before it gives up: every kernel on the clique
  // then leaves, and the clique reports a p2p_error naming the ranks (the context stays usable;
  // the program makes a new clique). A peer is late when a long kernel runs before the collective
  // on its stream, or under a debugger; `wait_forever` waits as NCCL does.
  // Left at the default, the environment variable COHORT_P2P_PATIENCE_MS (digits) replaces it.
  std::chrono::milliseconds patience = default_patience;
  static constexpr std::chrono::milliseconds default_patience{std::chrono::minutes(5)};
  static constexpr std::chrono::milliseconds wait_forever{0};
  // COHORT_P2P_PATIENCE_MS, where it is set and not empty (0: wait_forever); anything but digits
  // is refused, naming the variable.
  static std::optional<std::chrono::milliseconds> patience_from_environment() {
    const char* ms = std::getenv("COHORT_P2P_PATIENCE_MS");
    if (ms == nullptr || *ms == '\0') return std::nullopt;
    char* end = nullptr;
    const unsigned long long value = std::strtoull(ms, &end, 10);
    detail::require_argument(*end == '\0' && ms[0] >= '0' && ms[0] <= '9', "p2p_clique",
                             "COHORT_P2P_PATIENCE_MS",
                             "must be milliseconds, in digits (0 waits for ever).");
    // strtoull saturates at its maximum, which milliseconds' signed count would turn negative.
    const auto most = static_cast<unsigned long long>(std::chrono::milliseconds::max().count());
    return std::chrono::milliseconds(
        static_cast<std::chrono::milliseconds::rep>(std::min(value, most)));
  }
  // Blocks per rank a call may use, never more than half of any member's concurrent_sm_count (at
  // least 1) nor 256; 0, or more: that bound.
  unsigned max_blocks = 0;
};

} // namespace cohort
