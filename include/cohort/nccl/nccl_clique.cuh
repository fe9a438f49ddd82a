// cohort/nccl/nccl_clique.cuh — NCCL over a device group in one process: one rank per member,
// and collectives over distributed buffers, grouped for you.
//
//   cohort::device_group group(cohort::devices());
//   cohort::nccl_clique nccl(group);                                  // ranks 0..n-1 on the members
//   cohort::distributed_buffer<float> grads(group, cohort::partition::replicated(count, 2));
//   cohort::all_reduce(nccl, grads, cohort::avg);                     // every shard: the mean
//   cohort::broadcast(nccl, weights, /*root*/ 0);
//
// Each shard is one rank's buffer, so the shards of a buffer given to a collective must all have
// the same size (partition::replicated makes such buffers). Work is enqueued on the members'
// streams and returns at once.
#pragma once

#include "../communication/detail/arguments.cuh"
#include "../distributed/distributed_buffer.cuh"
#include "../execution/on_each.cuh"
#include "collectives.cuh"

#include <vector>

namespace cohort {

class nccl_clique {
 public:
  explicit nccl_clique(const device_group& group,
                  std::chrono::milliseconds timeout = default_nccl_timeout,
                  nccl_calls calls = nccl_calls::blocking)
      : group_(&group)
      , ranks_(communicator::create_clique(group, timeout, calls)) {}

  const device_group& group() const noexcept { return *group_; }
  std::size_t size() const noexcept { return ranks_.size(); }
  communicator& rank(std::size_t i) { return ranks_.at(i); }

  // New communicators from this clique's ranks: rank i joins the ranks with its `colors[i]`,
  // ordered by `keys[i]` (by rank where keys are not given), their calls as this clique's.
  // Returned in rank order, one per rank.
  std::vector<communicator> split(const std::vector<int>& colors, std::vector<int> keys = {}) {
    detail::require_count(colors.size(), ranks_.size(), "nccl_clique::split", "colors", "one per rank");
    if (keys.empty())
      for (std::size_t i = 0; i < ranks_.size(); ++i)
        keys.push_back(static_cast<int>(i));
    detail::require_count(keys.size(), ranks_.size(), "nccl_clique::split", "keys", "one per rank");
    for (int c : colors)
      detail::require_argument(c >= 0, "nccl_clique::split", "colors", "must all be 0 or more.");
    std::vector<communicator_ref> parents(ranks_.begin(), ranks_.end());
    const auto made = detail::split_together(parents, colors, keys, ranks_[0].calls(),
                                             std::chrono::steady_clock::now() + ranks_[0].timeout(),
                                             "ncclCommSplit (nccl_clique)");
    std::vector<communicator> result;
    for (std::size_t i = 0; i < made.size(); ++i)
      result.push_back(
          communicator::adopt(made[i], ranks_[i].device(), ranks_[i].timeout(), ranks_[i].calls()));
    return result;
  }

  // Waits (bounded) for every member's stream; aborts every rank and throws on an error or
  // time-out.
  void wait(std::chrono::milliseconds timeout = default_nccl_timeout) {
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      try {
        ranks_[i].wait(group_->stream(i), timeout);
      } catch (...) {
        for (communicator& c : ranks_)
          c.abort();
        throw;
      }
    }
  }

 private:
  const device_group* group_;
  std::vector<communicator> ranks_;
};

namespace detail {

// Runs `call(rank, shard index)` for every member inside one NCCL group.
template <class F>
void on_every_rank(nccl_clique& nccl, F&& call) {
  nccl_group batch;
  for (std::size_t i = 0; i < nccl.size(); ++i)
    call(nccl.rank(i), i);
  batch.end();
}

} // namespace detail

template <class T, class Op>
void all_reduce(nccl_clique& nccl, distributed_buffer<T>& data, Op op) {
  detail::equal_shard_count(data, nccl.group(), "all_reduce", "data");
  detail::on_every_rank(nccl, [&](communicator& c, std::size_t i) {
    all_reduce(c, data.shard(i).data, op, data.shard(i).stream);
  });
}

template <class T, class Op>
void all_reduce(nccl_clique& nccl, const distributed_buffer<T>& send, distributed_buffer<T>& recv,
                Op op) {
  const std::size_t count = detail::equal_shard_count(send, nccl.group(), "all_reduce", "send");
  detail::require_count(detail::equal_shard_count(recv, nccl.group(), "all_reduce", "recv"), count,
                        "all_reduce", "recv", "per shard, the size of a shard of 'send'");
  detail::on_every_rank(nccl, [&](communicator& c, std::size_t i) {
    all_reduce(c, send.shard(i).data, recv.shard(i).data, op, recv.shard(i).stream);
  });
}

template <class T>
void broadcast(nccl_clique& nccl, distributed_buffer<T>& data, int root) {
  detail::equal_shard_count(data, nccl.group(), "broadcast", "data");
  detail::on_every_rank(nccl, [&](communicator& c, std::size_t i) {
    broadcast(c, data.shard(i).data, root, data.shard(i).stream);
  });
}

template <class T, class Op>
void reduce(nccl_clique& nccl, const distributed_buffer<T>& send, distributed_buffer<T>& recv, Op op,
            int root) {
  const std::size_t count = detail::equal_shard_count(send, nccl.group(), "reduce", "send");
  detail::require_count(detail::equal_shard_count(recv, nccl.group(), "reduce", "recv"), count,
                        "reduce", "recv", "per shard, the size of a shard of 'send'");
  detail::on_every_rank(nccl, [&](communicator& c, std::size_t i) {
    reduce(c, send.shard(i).data, recv.shard(i).data, op, root, recv.shard(i).stream);
  });
}

// recv's shards each get every shard of send, in rank order.
template <class T>
void all_gather(nccl_clique& nccl, const distributed_buffer<T>& send, distributed_buffer<T>& recv) {
  const std::size_t count = detail::equal_shard_count(send, nccl.group(), "all_gather", "send");
  detail::require_count(detail::equal_shard_count(recv, nccl.group(), "all_gather", "recv"),
                        count * nccl.size(), "all_gather", "recv",
                        "per shard, size() times a shard of 'send'");
  detail::on_every_rank(nccl, [&](communicator& c, std::size_t i) {
    all_gather(c, send.shard(i).data, recv.shard(i).data, recv.shard(i).stream);
  });
}

template <class T, class Op>
void reduce_scatter(nccl_clique& nccl, const distributed_buffer<T>& send, distributed_buffer<T>& recv,
                    Op op) {
  const std::size_t count = detail::equal_shard_count(recv, nccl.group(), "reduce_scatter", "recv");
  detail::require_count(detail::equal_shard_count(send, nccl.group(), "reduce_scatter", "send"),
                        count * nccl.size(), "reduce_scatter", "send",
                        "per shard, size() times a shard of 'recv'");
  detail::on_every_rank(nccl, [&](communicator& c, std::size_t i) {
    reduce_scatter(c, send.shard(i).data, recv.shard(i).data, op, recv.shard(i).stream);
  });
}

} // namespace cohort
