// cohort/p2p/p2p_progress.cuh — where each rank of a p2p clique stands: p2p_clique::progress()
// answers from another host thread while a call waits (under wait_forever, say), and says which
// rank is stuck and on whom.
//
//   std::thread watcher([&] { std::puts(cohort::to_string(peers.progress()).c_str()); });
//   watcher.join();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

struct p2p_rank_progress {
  int rank = 0;
  int device = 0;
  // Block 0's last call started, and the last it finished, with the clique's sequence number at
  // each (a call in progress has started_epoch >= finished_epoch).
  std::string started_call;
  std::uint64_t started_epoch = 0;
  std::string finished_call;
  std::uint64_t finished_epoch = 0;
  // A wait longer than a millisecond that has not ended: in which call, by which block, for which
  // rank, and for what value.
  bool waiting = false;
  std::string waiting_call;
  unsigned waiting_block = 0;
  int waiting_peer = 0;
  std::uint64_t waiting_value = 0;
  // Whether the rank's kernels have been stopped (a peer did not arrive: p2p_error).
  bool stopped = false;

  bool in_call() const noexcept { return !started_call.empty() && started_epoch >= finished_epoch; }
};

inline std::string to_string(const std::vector<p2p_rank_progress>& ranks) {
  std::string text;
  for (const p2p_rank_progress& r : ranks) {
    text += "rank " + std::to_string(r.rank) + " (device " + std::to_string(r.device) + "): ";
    text += r.started_call.empty()
                ? "no call started"
                : "last started " + r.started_call + " at " + std::to_string(r.started_epoch);
    if (!r.finished_call.empty())
      text +=
          ", last finished " + r.finished_call + " (to " + std::to_string(r.finished_epoch) + ")";
    text += r.in_call() ? ", in its call" : ", idle";
    if (r.waiting)
      text += ", block " + std::to_string(r.waiting_block) + " waiting in " + r.waiting_call +
              " for rank " + std::to_string(r.waiting_peer) + " (value " +
              std::to_string(r.waiting_value) + ")";
    if (r.stopped) text += ", stopped";
    text += "\n";
  }
  return text;
}

} // namespace cohort
