// cohort/nccl/nccl_clique.cuh — NCCL over a device group in one process: one rank per member,
// and collectives over distributed buffers, grouped for you.
//
//   cohort::device_group group(cohort::devices());
//   cohort::nccl_clique nccl(group);                // ranks 0..n-1 on the members
//   cohort::distributed_buffer<float> grads(group, cohort::partition::replicated(count, 2));
//   cohort::all_reduce(nccl, grads, cohort::avg);   // every shard: the mean
//   cohort::broadcast(nccl, weights, /*root*/ 0);
//
// Each shard is one rank's buffer, so the shards of a buffer (or of a distributed_view of the
// user's own memory) given to a collective must all have the same size (partition::replicated
// makes such buffers). Work is enqueued on the members'
// streams and returns at once. The collectives can be captured into a CUDA graph (fork the group's
// streams from the capturing origin, call them, join) where the clique's calls are blocking (the
// default); a bounded clique's collectives and `wait` refuse a capture with std::logic_error, and
// so does any clique's collective whose members' streams are not all in one capture.
#pragma once

#include "../detail/arguments.cuh"
#include "../detail/nvtx.cuh"
#include "../detail/one_capture.cuh"
#include "../distributed/distributed_buffer.cuh"
#include "../distributed/distributed_view.cuh"
#include "../errors/argument_error.cuh"
#include "../execution/on_each.cuh"
#include "collectives.cuh"

#include <type_traits>
#include <utility>
#include <vector>

namespace cohort {

class nccl_clique {
 public:
  explicit nccl_clique(const device_group& group,
                       std::chrono::milliseconds timeout = default_nccl_timeout,
                       nccl_calls calls = nccl_calls::blocking)
      : devices_((detail::members_of(group, "nccl_clique"), group.devices()))
      , ranks_(communicator::create_clique(group, timeout, calls)) {
    for (std::size_t i = 0; i < group.size(); ++i)
      streams_.push_back(group.stream(i));
  }

  // Its ranks end within one time-out for all, not one each (communicator::end_together).
  nccl_clique(nccl_clique&&) noexcept = default;
  nccl_clique& operator=(nccl_clique&& other) noexcept {
    if (this != &other) {
      communicator::end_together(ranks_);
      devices_ = std::move(other.devices_);
      streams_ = std::move(other.streams_);
      ranks_ = std::move(other.ranks_);
    }
    return *this;
  }
  ~nccl_clique() { communicator::end_together(ranks_); }

  // The clique keeps its members' devices and streams, not the group: a group may move (a
  // std::vector<device_group> that grows) while its streams, which the clique runs on, stay.
  std::size_t size() const noexcept { return ranks_.size(); }
  device_ref device(std::size_t i) const {
    return detail::element_at(devices_, i, "nccl_clique::device", "ranks");
  }
  stream_ref stream(std::size_t i) const {
    return detail::element_at(streams_, i, "nccl_clique::stream", "ranks");
  }
  communicator& rank(std::size_t i) {
    return detail::element_at(ranks_, i, "nccl_clique::rank", "ranks");
  }
  const communicator& rank(std::size_t i) const {
    return detail::element_at(ranks_, i, "nccl_clique::rank", "ranks");
  }

  // New communicators from this clique's ranks: rank i joins the ranks with its `colors[i]`,
  // ordered by `keys[i]` (by rank where keys are not given), their calls as this clique's.
  // Returned in rank order, one per rank.
  std::vector<communicator> split(const std::vector<int>& colors, std::vector<int> keys = {}) {
    detail::require_count(colors.size(), ranks_.size(), "nccl_clique::split", "colors",
                          "one per rank");
    if (keys.empty())
      for (std::size_t i = 0; i < ranks_.size(); ++i)
        keys.push_back(static_cast<int>(i));
    detail::require_count(keys.size(), ranks_.size(), "nccl_clique::split", "keys", "one per rank");
    for (int c : colors)
      detail::require_argument(c >= 0, "nccl_clique::split", "colors", "must all be 0 or more.");
    std::vector<const communicator*> parents;
    for (const communicator& c : ranks_) {
      detail::require_argument(!c.empty(), "nccl_clique::split", "this",
                               "a rank was aborted; make a new clique.");
      parents.push_back(&c);
    }
    return communicator::split_together(parents, colors, keys, ranks_[0].timeout(),
                                        "ncclCommSplit (nccl_clique)");
  }

  // Waits for every member's stream, all within one `timeout`; aborts every rank and throws on an
  // error or time-out. Refuses (std::logic_error) streams being captured.
  void wait(std::chrono::milliseconds timeout = default_nccl_timeout) {
    communicator::wait_all(
        ranks_, [&](std::size_t i) { return streams_[i]; }, timeout, "nccl_clique::wait");
  }

 private:
  std::vector<device_ref> devices_;
  std::vector<stream_ref> streams_;
  std::vector<communicator> ranks_;
};

namespace detail {

// Every rank's call is checked (stream, capture, aborted, every member's stream in one capture or
// none) before the group opens, so that nothing is posted for one rank when another's call would
// be refused; then `call(rank, shard index)` runs for every member inside one NCCL group.
template <class Range, class F>
void on_every_rank(nccl_clique& nccl, const Range& stream_source, std::string_view function,
                   F&& call) {
  const nvtx_range range(function, "nccl %zu B/rank, %zu ranks",
                         stream_source.shard(0).data.size_bytes(), nccl.size());
  // NCCL refuses a group whose communicators are partly captured only at ncclGroupEnd, after it
  // has prepared the captured ranks' launches, with an error that names no rank. Checked before
  // require_call, which counts a capturing rank's graph as holding its communicator.
  for (std::size_t i = 0; i < nccl.size(); ++i)
    require_stream(stream_source.shard(i).stream, function);
  require_one_capture(
      nccl.size(), [&](std::size_t i) { return stream_source.shard(i).stream; }, function);
  for (std::size_t i = 0; i < nccl.size(); ++i)
    require_call(nccl.rank(i), stream_source.shard(i).stream, function);
  nccl_group batch;
  for (std::size_t i = 0; i < nccl.size(); ++i)
    call(nccl.rank(i), i);
  batch.end();
}

// How the shards of an out-of-place collective's two ranges compare.
enum class pairing { same_size, recv_gathers, send_scatters };

// Out-of-place forms: checks both ranges' shards (each range's alike, and the two as `p` says),
// then runs `call(rank, recv stream, send shard, recv shard)` for every rank in one group.
template <class S, class R, class F>
void on_every_pair(nccl_clique& nccl, const S& send, R& recv, pairing p, std::string_view function,
                   F&& call) {
  const std::size_t sent = equal_shard_count(send, nccl, function, "send");
  const std::size_t received = equal_shard_count(recv, nccl, function, "recv");
  const std::size_t n = nccl.size();
  if (p == pairing::same_size)
    require_count(received, sent, function, "recv", "per shard, the size of a shard of 'send'");
  else if (p == pairing::recv_gathers)
    require_count(received, sent * n, function, "recv",
                  "per shard, size() times a shard of 'send'");
  else
    require_count(sent, received * n, function, "send",
                  "per shard, size() times a shard of 'recv'");
  on_every_rank(nccl, recv, function, [&](communicator& c, std::size_t i) {
    call(c, recv.shard(i).stream, send.shard(i).data, recv.shard(i).data);
  });
}

// A distributed form's send and recv: recv written, both of one element type.
template <class S, class R>
concept nccl_send_and_recv = distributed_range<S> && writable_distributed_range<R> &&
    std::is_same_v<std::remove_const_t<range_element_t<const S>>, range_element_t<R>>;

} // namespace detail

// Each distributed argument is a distributed_buffer or a distributed_view over the clique's group.
template <distributed_range R, class Op>
void all_reduce(nccl_clique& nccl, R&& data, Op op) {
  detail::require_writable<range_element_t<R>>();
  detail::equal_shard_count(data, nccl, "all_reduce", "data");
  detail::on_every_rank(nccl, data, "all_reduce", [&](communicator& c, std::size_t i) {
    all_reduce(c, data.shard(i).stream, data.shard(i).data, op);
  });
}

template <distributed_range S, writable_distributed_range R, class Op>
requires detail::nccl_send_and_recv<S, R>
void all_reduce(nccl_clique& nccl, const S& send, R&& recv, Op op) {
  detail::on_every_pair(
      nccl, send, recv, detail::pairing::same_size, "all_reduce",
      [&](communicator& c, stream_ref on, auto s, auto r) { all_reduce(c, on, s, r, op); });
}

template <distributed_range R>
void broadcast(nccl_clique& nccl, R&& data, int root) {
  detail::require_writable<range_element_t<R>>();
  detail::equal_shard_count(data, nccl, "broadcast", "data");
  detail::on_every_rank(nccl, data, "broadcast", [&](communicator& c, std::size_t i) {
    broadcast(c, data.shard(i).stream, data.shard(i).data, root);
  });
}

template <distributed_range S, writable_distributed_range R, class Op>
requires detail::nccl_send_and_recv<S, R>
void reduce(nccl_clique& nccl, const S& send, R&& recv, Op op, int root) {
  detail::on_every_pair(
      nccl, send, recv, detail::pairing::same_size, "reduce",
      [&](communicator& c, stream_ref on, auto s, auto r) { reduce(c, on, s, r, op, root); });
}

// recv's shards each get every shard of send, in rank order.
template <distributed_range S, writable_distributed_range R>
requires detail::nccl_send_and_recv<S, R>
void all_gather(nccl_clique& nccl, const S& send, R&& recv) {
  detail::on_every_pair(
      nccl, send, recv, detail::pairing::recv_gathers, "all_gather",
      [&](communicator& c, stream_ref on, auto s, auto r) { all_gather(c, on, s, r); });
}

template <distributed_range S, writable_distributed_range R, class Op>
requires detail::nccl_send_and_recv<S, R>
void reduce_scatter(nccl_clique& nccl, const S& send, R&& recv, Op op) {
  detail::on_every_pair(
      nccl, send, recv, detail::pairing::send_scatters, "reduce_scatter",
      [&](communicator& c, stream_ref on, auto s, auto r) { reduce_scatter(c, on, s, r, op); });
}

} // namespace cohort
