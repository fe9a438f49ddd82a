// cohort/nccl/detail/create.cuh — making NCCL communicators with a bound: one rank of a
// multi-process communicator, every rank of a clique in one process, splits, and the blocking
// twins that the default `nccl_calls::blocking` hands out.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/nccl_error.cuh"
#include "../timeouts.cuh"
#include "../unique_id.cuh"
#include "poll.cuh"

#include <nccl.h>

#include <chrono>
#include <exception>
#include <string_view>
#include <vector>

namespace cohort::detail {

using deadline_t = std::chrono::steady_clock::time_point;

// One rank being made: its handle, and where the user's calls go blocking, its guard (see
// communicator_state).
struct made_rank {
  ncclComm_t handle = nullptr;
  ncclComm_t guard = nullptr;
};

// A rank of an existing communicator, as creation needs it.
struct rank_of {
  ncclComm_t handle;
  device_ref device;
  int rank;
  int size;
};

// Non-blocking, so that creation can be polled. A future guard (calls blocking) shares its
// resources and abort flag with the twin split from it; a communicator the user splits never
// shares them with its children, whose lives are their own.
inline ncclConfig_t nonblocking_config(bool guard) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.splitShare = guard ? 1 : 0;
  return config;
}
inline ncclConfig_t blocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.splitShare = 0;
  return config;
}

inline void abort_all(const std::vector<ncclComm_t>& handles) noexcept {
  for (ncclComm_t h : handles)
    if (h != nullptr) (void)ncclCommAbort(h);
}

// Polls every rank's new communicator until NCCL has made it; on failure aborts them all and
// throws naming the first rank that did not finish.
inline void wait_made(const std::vector<ncclComm_t>& made, const std::vector<rank_of>& ranks,
                      deadline_t deadline, std::chrono::milliseconds timeout,
                      std::string_view what) {
  for (std::size_t i = 0; i < made.size(); ++i) {
    const poll_outcome outcome =
        made[i] == nullptr ? poll_outcome{ncclInternalError, false} : poll_until(made[i], deadline);
    if (outcome.done()) continue;
    abort_all(made);
    throw_unfinished(outcome, what, ranks[i].device.get(), ranks[i].rank, ranks[i].size, timeout);
  }
}

// ncclGroupEnd with `device` current, and what was current before made current again: NCCL's
// blocking group end saves the current device and sets it back with cudaSetDevice, which, with no
// context current, makes (and creates) GPU 0's primary context in a process that may not use it.
inline ncclResult_t group_end_on(device_ref device) noexcept {
  ncclResult_t ended = ncclInternalError;
  on_device_quietly(
      device, [&] { ended = ncclGroupEnd(); }, if_not_current::run_anyway);
  return ended;
}

// Runs `post(i, &made[i])` (an NCCL call that makes a communicator) for every rank in one NCCL
// group, rank i's device current: one thread drives every rank of a clique. On an error aborts
// what was made and throws. The group is closed on every path: one left open would take this
// thread's later NCCL calls into it.
template <class Post>
std::vector<ncclComm_t> post_together(const std::vector<rank_of>& ranks, Post&& post,
                                      std::string_view what) {
  std::vector<ncclComm_t> made(ranks.size(), nullptr);
  // Every device made current once first: a rank whose device cannot be is refused before any
  // rank posts. Inside the group, ranks posted before a failure would wait for the others in
  // NCCL's bootstrap (a blocking parent's split cannot be aborted from here).
  for (const rank_of& rank : ranks)
    scoped_device on(rank.device);
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t started = ncclSuccess;
  std::exception_ptr thrown; // by scoped_device (a device that cannot be made current) or `post`
  for (std::size_t i = 0; i < ranks.size() && started == ncclSuccess && !thrown; ++i) {
    try {
      scoped_device on(ranks[i].device);
      started = post(i, &made[i]);
    } catch (...) {
      thrown = std::current_exception();
    }
    if (started == ncclInProgress) started = ncclSuccess;
  }
  const ncclResult_t ended = ranks.empty() ? ncclGroupEnd() : group_end_on(ranks[0].device);
  if (thrown) {
    abort_all(made);
    std::rethrow_exception(thrown);
  }
  if (started != ncclSuccess || (ended != ncclSuccess && ended != ncclInProgress)) {
    abort_all(made);
    throw nccl_error(started != ncclSuccess ? started : ended, what, ranks[0].device.get(),
                     ranks[0].rank);
  }
  return made;
}

// Rank `ranks[i].rank` of a `size`-rank communicator identified by `id`, for every i,
// non-blocking.
inline std::vector<ncclComm_t> init_ranks(const unique_id& id, const std::vector<rank_of>& ranks,
                                          bool guards, deadline_t deadline,
                                          std::chrono::milliseconds timeout,
                                          std::string_view what) {
  std::vector<ncclConfig_t> configs(ranks.size(), nonblocking_config(guards));
  const auto made = post_together(
      ranks,
      [&](std::size_t i, ncclComm_t* out) {
        return ncclCommInitRankConfig(out, ranks[i].size, id.native(), ranks[i].rank, &configs[i]);
      },
      what);
  wait_made(made, ranks, deadline, timeout, what);
  return made;
}

// Splits communicators driven from this thread together: rank i of `parents` joins color
// colors[i] at key keys[i] with `config`. Waits until NCCL has made them, bounded by `deadline`
// where NCCL lets the wait be bounded (not for a blocking parent); on failure aborts what was
// made.
inline std::vector<ncclComm_t>
split_together(const std::vector<rank_of>& parents, const std::vector<int>& colors,
               const std::vector<int>& keys, ncclConfig_t config, deadline_t deadline,
               std::chrono::milliseconds timeout, std::string_view what) {
  std::vector<ncclConfig_t> configs(parents.size(), config);
  const auto made = post_together(
      parents,
      [&](std::size_t i, ncclComm_t* out) {
        return ncclCommSplit(parents[i].handle, colors[i], keys[i], out, &configs[i]);
      },
      what);
  for (std::size_t i = 0; i < parents.size(); ++i) {
    const poll_outcome outcome = poll_until(parents[i].handle, deadline);
    if (outcome.done()) continue;
    abort_all(made);
    throw_unfinished(outcome, what, parents[i].device.get(), parents[i].rank, parents[i].size,
                     timeout);
  }
  wait_made(made, parents, deadline, timeout, what);
  return made;
}

// The ranks the user gets from non-blocking communicators `made` (every rank has joined): the
// communicators themselves where calls are bounded; else blocking twins split from them with one
// color, each keeping its communicator as its guard. NCCL fixes a communicator's blocking mode
// when it makes it, so this is how creation (and destruction) stay bounded while later calls cost
// what raw NCCL calls cost. On failure aborts `made` too.
inline std::vector<made_rank> with_twins(const std::vector<ncclComm_t>& made,
                                         const std::vector<rank_of>& ranks, bool blocking,
                                         deadline_t deadline, std::chrono::milliseconds timeout,
                                         std::string_view what) {
  std::vector<made_rank> result(made.size());
  if (!blocking) {
    for (std::size_t i = 0; i < made.size(); ++i)
      result[i].handle = made[i];
    return result;
  }
  std::vector<rank_of> guards = ranks;
  std::vector<int> colors(made.size(), 0), keys;
  for (std::size_t i = 0; i < made.size(); ++i) {
    guards[i].handle = made[i];
    keys.push_back(ranks[i].rank);
  }
  try {
    const auto twins =
        split_together(guards, colors, keys, blocking_config(), deadline, timeout, what);
    for (std::size_t i = 0; i < made.size(); ++i)
      result[i] = {twins[i], made[i]};
  } catch (...) {
    abort_all(made);
    throw;
  }
  return result;
}

} // namespace cohort::detail
