// cohort/p2p/p2p_handle.cuh — one rank's view, inside a user's kernel, of a buffer of the same
// size on every member of a p2p_clique: its own elements, every peer's, and the block's session
// (p2p/p2p_session.cuh). Made on the host for one rank and passed by value: it holds pointers
// only, so a launch captured into a graph replays correctly.
//
//   cohort::p2p_handle<float> mine = cohort::p2p_handle_for(peers, x, /*rank*/ 0);
//   cohort::p2p_handle<const float> reads = mine;   // a kernel that only reads
#pragma once

#include "../detail/arguments.cuh"
#include "../distributed/distributed_buffer.cuh"
#include "../distributed/distributed_view.cuh"
#include "../errors/argument_error.cuh"
#include "../memory/bitwise_copyable.cuh"
#include "detail/clique_access.cuh"
#include "detail/engine.cuh"
#include "p2p_clique.cuh"
#include "p2p_session.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cohort {

// Rank rank()'s view of a buffer of size() elements on every member of a p2p_clique.
template <class T>
class p2p_handle {
 public:
  using element_type = T;

  p2p_handle() = default;
  // A handle of const elements from one of the same elements, as span<T> converts to
  // span<const T>: a kernel that only reads takes p2p_handle<const T> whichever buffer it is given.
  template <class U>
  requires(std::is_same_v<const U, T> && !std::is_const_v<U>) __host__ __device__
      p2p_handle(const p2p_handle<U>& other)
      : e_(other.e_)
      , size_(other.size_) {
    for (int r = 0; r < detail::p2p::max_ranks; ++r)
      data_[r] = other.data_[r];
  }

  __host__ __device__ int rank() const { return e_.rank; }
  __host__ __device__ int ranks() const { return e_.ranks; }
  __host__ __device__ std::size_t size() const { return size_; }
  // This rank's elements, and element i of them.
  __device__ T* local() const { return data_[e_.rank]; }
  __device__ T* local(std::size_t i) const { return peer(e_.rank, i, "p2p_handle::local"); }
  // Rank r's elements (r in [0, ranks())), and element i of them.
  __device__ T* peer(int r) const {
    check_rank(r, "p2p_handle::peer");
    return data_[r];
  }
  __device__ T* peer(int r, std::size_t i) const { return peer(r, i, "p2p_handle::peer"); }

  // Opened by every thread of the block, before any other session call.
  __device__ p2p_session session() const { return p2p_session(e_); }

 private:
  template <class U>
  friend class p2p_handle;
  friend struct detail::p2p::clique_access;
  template <class U>
  friend p2p_handle<U> p2p_handle_for(const p2p_clique&, const std::vector<cuda::std::span<U>>&,
                                      std::size_t);

  // Whether `peers` made this handle (p2p_launch launches on a clique whose own handles it gets).
  bool made_by(const p2p_clique& peers) const {
    return e_.rank >= 0 && static_cast<std::size_t>(e_.rank) < peers.size() &&
           e_.epochs ==
               detail::p2p::clique_access::engine_for(peers, static_cast<std::size_t>(e_.rank))
                   .epochs;
  }

  // For p2p_launch's loading launch: a kernel given this handle ends where it opens its session.
  p2p_handle for_loading() const {
    p2p_handle h = *this;
    h.e_.ranks = 0;
    return h;
  }

  __device__ T* peer(int r, std::size_t i, const char* call) const {
    check_rank(r, call);
#if COHORT_DEVICE_CHECKS
    detail::p2p::check_below(i, size_, call, "offset");
#endif
    return data_[r] + i;
  }

  __device__ void check_rank(int r, const char* call) const {
#if COHORT_DEVICE_CHECKS
    detail::p2p::check_below(static_cast<unsigned>(r), e_.ranks, call, "rank");
#else
    (void)r, (void)call;
#endif
  }

  detail::p2p::engine e_{};
  T* data_[detail::p2p::max_ranks] = {};
  std::size_t size_ = 0;
};

// Rank `rank`'s handle to `spans`, one per member of `peers`, each on its member's device and all
// of the same size (cohort's buffers or cudaMalloc memory: the peers read and write it).
template <class T>
p2p_handle<T> p2p_handle_for(const p2p_clique& peers, const std::vector<cuda::std::span<T>>& spans,
                             std::size_t rank) {
  static_assert(bitwise_copyable_v<std::remove_cv_t<T>>,
                "peers read the buffer's bytes: the element type must be trivially copyable.");
  constexpr std::string_view function = "p2p_handle_for";
  if (rank >= peers.size())
    detail::throw_invalid_argument(function, "rank",
                                   std::to_string(rank) +
                                       " is not a member of the clique (it has " +
                                       std::to_string(peers.size()) + ").");
  detail::require_count(spans.size(), peers.size(), function, "buffer",
                        "one shard per member of the clique");
  for (std::size_t i = 0; i < spans.size(); ++i) {
    detail::require_count(spans[i].size(), spans[0].size(), function, "buffer", [&] {
      return "every member's shard must be as large as member 0's (shard " + std::to_string(i) +
             ")";
    });
    detail::require_memory_of(
        peers.device(i), spans[i].data(), spans[i].size_bytes(), function,
        [&] { return "buffer's shard " + std::to_string(i); }, peers.stream(i));
  }
  p2p_handle<T> h;
  h.e_ = detail::p2p::clique_access::engine_for(peers, rank);
  for (std::size_t i = 0; i < spans.size(); ++i)
    h.data_[i] = spans[i].data();
  h.size_ = spans.empty() ? 0 : spans[0].size();
  return h;
}

namespace detail {

// The spans of a distributed range (`T` const for a const buffer or a view of const) over the
// clique's group.
template <class T, class Range>
std::vector<cuda::std::span<T>> shards_over_clique(const p2p_clique& peers, Range& range) {
  std::vector<cuda::std::span<T>> spans;
  for (std::size_t i = 0; i < range.shards(); ++i) {
    const cohort::shard<T> s = range.shard(i);
    if (i < peers.size() && s.device != peers.device(i))
      throw_invalid_argument(
          "p2p_handle_for", "buffer",
          "shard " + std::to_string(i) + " is on device " + std::to_string(s.device.get()) +
              ", member " + std::to_string(i) + " of the clique on device " +
              std::to_string(peers.device(i).get()) + ": make the buffer over the clique's group.");
    spans.push_back(s.data);
  }
  return spans;
}

} // namespace detail

// Rank `rank`'s handle to a distributed buffer over the clique's group, with equal shards (e.g.
// partition::replicated); a const buffer gives a handle of const elements.
template <class T>
p2p_handle<T> p2p_handle_for(const p2p_clique& peers, distributed_buffer<T>& buffer,
                             std::size_t rank) {
  return p2p_handle_for(peers, detail::shards_over_clique<T>(peers, buffer), rank);
}
template <class T>
p2p_handle<const T> p2p_handle_for(const p2p_clique& peers, const distributed_buffer<T>& buffer,
                                   std::size_t rank) {
  return p2p_handle_for(peers, detail::shards_over_clique<const T>(peers, buffer), rank);
}
// Of a distributed view (the user's own memory): a view of const elements gives a handle of const
// elements.
template <class T>
p2p_handle<T> p2p_handle_for(const p2p_clique& peers, const distributed_view<T>& view,
                             std::size_t rank) {
  return p2p_handle_for(peers, detail::shards_over_clique<T>(peers, view), rank);
}
// A handle outlives the expression that makes it: of a temporary buffer, it would point into
// memory freed before the kernel runs.
template <class T>
void p2p_handle_for(const p2p_clique&, const distributed_buffer<T>&&, std::size_t) = delete;

} // namespace cohort
