// cohort/p2p/device.cuh — users' own kernels reach their peers: each rank's pointer into a buffer
// of the same size on every member, barriers across the same block of every rank or across whole
// grids, and point-to-point signals, all inside one kernel per GPU. No NCCL, no registration; it
// works on emulated groups and inside CUDA graphs (docs/multi_gpu_kernels.md).
//
//   __global__ void shift(cohort::p2p_handle<float> h) {
//     auto s = h.session();                          // every thread of the block, first
//     const int next = (h.rank() + 1) % h.ranks();
//     for (std::size_t i = threadIdx.x; i < h.size(); i += blockDim.x) h.local()[i] = h.rank();
//     s.sync();                                      // block b of every rank has written
//     float v = __ldcg(h.peer(next) + threadIdx.x);  // the next rank's element
//     (void)v;
//     s.end();                                       // every thread of the block, last
//   }
//
//   cohort::p2p_launch(peers, {.grid = 1, .block = 256}, shift, [&](std::size_t rank) {
//     return std::make_tuple(cohort::p2p_handle_for(peers, x, rank));
//   });
//
// The handle is made on the host, for one rank, and passed by value; it holds pointers only, so a
// launch captured into a graph replays correctly (the state that moves is on the GPUs, as for the
// engine's own calls: the session reads its block's epoch when it opens and advances it at end()).
//
// Rules (breaking one hangs the kernel until the clique's patience runs out, when every kernel on
// the clique leaves and the host gets a p2p_error with the context intact, or lets a later
// barrier pass before its peers arrive: wrong results, which the debug checks below catch where
// they can). Every rank launches the same kernel with the same grid, in the same order
// among the clique's calls (its collectives and other session kernels), on the clique's streams
// (peers.stream(i)) or streams ordered with them; at most 256 blocks (detail::p2p::max_blocks) per
// grid. Every thread of a block opens the session first and calls end() last, and a kernel opens
// at most one session per clique (sessions of different cliques may nest); the session calls in
// between are made by every thread of the block (each has a __syncthreads). Block b makes the
// same sequence of sync() and grid_sync() calls on every rank: the k-th of block b takes the
// value base + k on every rank. The blocks of one rank may make different numbers of sync()
// calls (a tile loop over more tiles than blocks); every block makes each grid_sync(). Signals
// count: the n-th wait(p) of block b of rank r returns once block b of rank p
// has sent its n-th signal(r), counting from the clique's creation, so each kernel sends as many
// signals to each peer as that peer's kernel waits for (else later kernels' waits are off). The
// ranks' kernels must run at the same time: all their grids resident beside each other (on an
// emulated group, on one GPU) and none of them kept from running by another kernel of yours that
// waits for them.
//
// Memory ordering (release/acquire as cuda::atomic_ref, at system scope; at device scope where
// every rank runs on one GPU, an emulated group): what the threads of a block wrote before sync()
// or signal(p) is visible to the threads of the same block of the peer (every rank for sync, p
// for signal) after that block's matching sync() or wait(). Writes of
// other blocks are ordered only by grid_sync(): what any block of any rank wrote before it is
// visible to every block of every rank after it. What a rank's stream did before its kernel (a
// copy into the buffer, an earlier kernel) counts as written before that kernel's first sync():
// the kernel starts only after it. Read data a peer wrote during the kernel through
// L2 (__ldcg, volatile or atomic loads): L1 is not coherent with other GPUs' stores; never __ldg
// or `const __restrict__` (the read-only path).
//
// The types a kernel takes are p2p_handle (p2p/p2p_handle.cuh) and the session it opens,
// p2p_session (p2p/p2p_session.cuh, with the debug checks); this header adds p2p_launch.
#pragma once

#include "../detail/nvtx.cuh"
#include "../errors/argument_error.cuh"
#include "../execution/launch.cuh"
#include "detail/clique_access.cuh"
#include "detail/engine.cuh"
#include "detail/launch.cuh"
#include "p2p_clique.cuh"
#include "p2p_handle.cuh"
#include "p2p_session.cuh"

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cohort {

namespace detail::p2p {

template <class T>
inline constexpr bool is_p2p_handle = false;
template <class T>
inline constexpr bool is_p2p_handle<p2p_handle<T>> = true;

template <class Tuple>
inline constexpr bool holds_handle = false;
template <class... A>
inline constexpr bool holds_handle<std::tuple<A...>> = (is_p2p_handle<std::remove_cvref_t<A>> ||
                                                        ...);

} // namespace detail::p2p

// Launches `kernel` on every member of `peers`, on the clique's streams, with the arguments
// `args_of(rank)` returns (a tuple, its p2p_handles made by `peers` for that rank). Before a
// kernel's first launch on the clique it is loaded everywhere by a launch whose handles are
// made for loading (the kernel ends at session()): loading a kernel lazily while a peer's kernel
// waits for it could wait for that kernel; so on that first launch args_of(rank) is called twice
// per rank (keep it free of side effects). args_of may return references (std::tie of handles
// kept by the caller): the launch works on copies. A launch that fails part-way releases the
// members already launched, once the work queued ahead on the missing members' streams is done
// (what the failed call writes is unspecified), and breaks the clique, as for its collectives.
template <class... Params, class ArgsOf>
void p2p_launch(p2p_clique& peers, const launch_config& config, void (*kernel)(Params...),
                ArgsOf&& args_of) {
  if (detail::has_zero_dimension(config.grid) || detail::has_zero_dimension(config.block))
    detail::throw_invalid_argument("p2p_launch", "config",
                                   "grid and block need at least 1 in every dimension; skip the "
                                   "launch when there is no work.");
  const unsigned long long blocks = 1ull * config.grid.x * config.grid.y * config.grid.z;
  if (blocks > static_cast<unsigned long long>(detail::p2p::max_blocks))
    detail::throw_invalid_argument("p2p_launch", "config",
                                   "the grid has " + std::to_string(blocks) +
                                       " blocks; a kernel with p2p sessions takes at most " +
                                       std::to_string(detail::p2p::max_blocks) +
                                       " (one signal slot per block).");
  const detail::nvtx_range range("p2p_launch", "%s, %llu blocks, %zu ranks",
                                 config.name != nullptr ? config.name : "a kernel", blocks,
                                 peers.size());
  auto args = [&](std::size_t i, bool no_op) {
    // Copies: args_of may return references (std::tie of handles the caller keeps), and the
    // loading launch below changes its handles.
    auto values = std::apply(
        [](auto&&... a) {
          return std::tuple<std::remove_cvref_t<decltype(a)>...>(std::forward<decltype(a)>(a)...);
        },
        args_of(i));
    static_assert(detail::p2p::holds_handle<decltype(values)>,
                  "p2p_launch: args_of(rank) must return a tuple holding a p2p_handle (the kernel "
                  "is loaded by a launch that ends where it opens the handle's session).");
    // A handle made for another rank, or over a clique of another size, would meet the wrong
    // peers; a handle of another clique would wait in that clique's sessions, which a launch that
    // fails part-way neither releases nor marks broken (it releases `peers`). Refused before
    // anything is launched (every rank's arguments are made first).
    std::apply(
        [&](const auto&... a) {
          (([&] {
             if constexpr (detail::p2p::is_p2p_handle<std::remove_cvref_t<decltype(a)>>) {
               detail::require_argument(
                   a.rank() == static_cast<int>(i) && a.ranks() == static_cast<int>(peers.size()),
                   "p2p_launch", "args_of", [&] {
                     return "returned for rank " + std::to_string(i) + " a p2p_handle of rank " +
                            std::to_string(a.rank()) + " of " + std::to_string(a.ranks()) +
                            "; make rank r's handles with p2p_handle_for(peers, buffer, r).";
                   });
               detail::require_argument(
                   detail::p2p::clique_access::made_by(a, peers), "p2p_launch", "args_of", [&] {
                     return "returned for rank " + std::to_string(i) +
                            " a p2p_handle of another clique; make every handle with "
                            "p2p_handle_for(peers, buffer, r) of the clique launched on.";
                   });
             }
           }()),
           ...);
        },
        values);
    if (no_op)
      std::apply(
          [](auto&... a) {
            (([&] {
               if constexpr (detail::p2p::is_p2p_handle<std::remove_cvref_t<decltype(a)>>)
                 a = detail::p2p::clique_access::for_loading(a);
             }()),
             ...);
          },
          values);
    return values;
  };
  detail::p2p::launch_kernel_on_every_member(peers, config, kernel, args);
}

} // namespace cohort
