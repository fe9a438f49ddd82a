// cohort/training/detail/bucket_engines.cuh — what gradient_buckets runs its collectives on: the
// peer-to-peer engine, an NCCL clique (one process, several GPUs), or one process's rank of an
// NCCL communicator (one process per GPU, under mpirun or srun).
//
// Each engine says how many members this process drives (one span of gradients each), how many
// ranks the reduction spans (the blocks of a reduce_scatter), member i's rank, device and stream,
// and runs the three collectives on spans in place.
#pragma once

#include "../../communication/operators.cuh"
#include "../../detail/one_capture.cuh"
#include "../../p2p/collectives.cuh"
#include "../../p2p/p2p_clique.cuh"
#include "../../streams/stream_ref.cuh"

#if defined(COHORT_WITH_NCCL) && COHORT_WITH_NCCL
#include "../../nccl/collectives.cuh"
#include "../../nccl/communicator.cuh"
#include "../../nccl/nccl_clique.cuh"
#endif

#include <cuda/std/span>

#include <cstddef>
#include <limits>
#include <variant>
#include <vector>

namespace cohort::detail::training {

template <class T>
using spans = std::vector<cuda::std::span<T>>;

struct p2p_engine {
  p2p_clique* peers;
  p2p_options options;

  std::size_t members() const noexcept { return peers->size(); }
  std::size_t size() const noexcept { return members(); } // as a group answers
  std::size_t ranks() const noexcept { return peers->size(); }
  std::size_t rank_of(std::size_t i) const noexcept { return i; }
  device_ref device(std::size_t i) const { return peers->device(i); }
  stream_ref stream(std::size_t i) const { return peers->stream(i); }
  bool broken() const noexcept { return peers->broken(); }
  void check(const char* function) const { peers->check(function); } // a peer that did not arrive
  std::size_t one_shot_limit() const noexcept {
    return options.algorithm == p2p_algorithm::one_shot ? peers->one_shot_limit()
                                                        : std::numeric_limits<std::size_t>::max();
  }
  const char* name() const noexcept { return "p2p_clique"; }

  template <class T, class Op>
  void all_reduce(const spans<T>& data, Op op) const {
    cohort::all_reduce(*peers, data, op, options);
  }
  template <class T, class Op>
  void reduce_scatter(const spans<T>& data, const spans<T>& blocks, Op op) const {
    cohort::reduce_scatter(*peers, data, blocks, op, options);
  }
  template <class T>
  void all_gather(const spans<T>& blocks, const spans<T>& data) const {
    cohort::all_gather(*peers, blocks, data);
  }
};

#if defined(COHORT_WITH_NCCL) && COHORT_WITH_NCCL

// Every rank's call is checked before the NCCL group opens (as the clique's own forms do), then
// posted inside one group: nothing is posted for one rank when another's would be refused.
struct nccl_clique_engine {
  nccl_clique* nccl;

  std::size_t members() const noexcept { return nccl->size(); }
  std::size_t size() const noexcept { return members(); }
  std::size_t ranks() const noexcept { return nccl->size(); }
  std::size_t rank_of(std::size_t i) const noexcept { return i; }
  device_ref device(std::size_t i) const { return nccl->device(i); }
  stream_ref stream(std::size_t i) const { return nccl->stream(i); }
  bool broken() const noexcept { return false; }
  std::size_t one_shot_limit() const noexcept { return std::numeric_limits<std::size_t>::max(); }
  const char* name() const noexcept { return "nccl_clique"; }

  template <class Call>
  void on_every_rank(const char* function, Call&& call) const {
    require_one_capture(
        members(), [&](std::size_t i) { return stream(i); }, function);
    for (std::size_t i = 0; i < members(); ++i)
      require_call(nccl->rank(i), stream(i), function);
    nccl_group batch;
    for (std::size_t i = 0; i < members(); ++i)
      call(nccl->rank(i), stream(i), i);
    batch.end();
  }
  template <class T, class Op>
  void all_reduce(const spans<T>& data, Op op) const {
    on_every_rank("all_reduce", [&](communicator& c, stream_ref s, std::size_t i) {
      cohort::all_reduce(c, s, data[i], op);
    });
  }
  template <class T, class Op>
  void reduce_scatter(const spans<T>& data, const spans<T>& blocks, Op op) const {
    on_every_rank("reduce_scatter", [&](communicator& c, stream_ref s, std::size_t i) {
      cohort::reduce_scatter(c, s, cuda::std::span<const T>(data[i]), blocks[i], op);
    });
  }
  template <class T>
  void all_gather(const spans<T>& blocks, const spans<T>& data) const {
    on_every_rank("all_gather", [&](communicator& c, stream_ref s, std::size_t i) {
      cohort::all_gather(c, s, cuda::std::span<const T>(blocks[i]), data[i]);
    });
  }
};

// This process's rank of a communicator: one member, whose collectives run on `stream`.
struct communicator_engine {
  communicator* comm;
  stream_ref collectives;

  std::size_t members() const noexcept { return 1; }
  std::size_t size() const noexcept { return 1; }
  std::size_t ranks() const noexcept { return static_cast<std::size_t>(comm->size()); }
  std::size_t rank_of(std::size_t) const noexcept { return static_cast<std::size_t>(comm->rank()); }
  device_ref device(std::size_t) const { return comm->device(); }
  stream_ref stream(std::size_t) const { return collectives; }
  bool broken() const noexcept { return false; }
  std::size_t one_shot_limit() const noexcept { return std::numeric_limits<std::size_t>::max(); }
  const char* name() const noexcept { return "communicator"; }

  template <class T, class Op>
  void all_reduce(const spans<T>& data, Op op) const {
    cohort::all_reduce(*comm, collectives, data[0], op);
  }
  template <class T, class Op>
  void reduce_scatter(const spans<T>& data, const spans<T>& blocks, Op op) const {
    cohort::reduce_scatter(*comm, collectives, cuda::std::span<const T>(data[0]), blocks[0], op);
  }
  template <class T>
  void all_gather(const spans<T>& blocks, const spans<T>& data) const {
    cohort::all_gather(*comm, collectives, cuda::std::span<const T>(blocks[0]), data[0]);
  }
};

using engine = std::variant<p2p_engine, nccl_clique_engine, communicator_engine>;

#else

using engine = std::variant<p2p_engine>;

#endif

// Member i's block of `span` cut into one equal block per rank: the block of member i's rank.
template <class T>
cuda::std::span<T> block_of(const engine& e, cuda::std::span<T> span, std::size_t i) {
  return std::visit(
      [&](const auto& x) {
        const std::size_t block = span.size() / x.ranks();
        return span.subspan(x.rank_of(i) * block, block);
      },
      e);
}

// Each member's block of its span (reduce_scatter's output, all_gather's input).
template <class T>
spans<T> blocks_of(const engine& e, const spans<T>& data) {
  spans<T> out;
  for (std::size_t i = 0; i < data.size(); ++i)
    out.push_back(block_of(e, data[i], i));
  return out;
}

} // namespace cohort::detail::training
