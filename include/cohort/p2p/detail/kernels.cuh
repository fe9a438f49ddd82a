// cohort/p2p/detail/kernels.cuh — the device side of the peer-to-peer engine.
//
// Every rank of a call runs the same kernel, with the same grid, on its own stream. Ranks meet at
// per-block barriers: block b of each rank writes a signal into block b's slot of every rank's
// signal array (system-scope release) and waits for the signals of block b of every rank
// (system-scope acquire). Because every phase maps element i to the same block on every rank,
// a per-block barrier orders exactly the work that depends on it, and no grid-wide sync is needed.
// Signals only grow (one value per barrier, handed out by the host), so a slot never needs reset.
//
// Data from other ranks is read with ld.global.cg (L2, not L1): L1 is not coherent with writes
// made by other GPUs during the kernel.
#pragma once

#include <cuda/atomic>

#include <cstdio>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail::p2p {

inline constexpr int max_ranks = 8;
inline constexpr int max_blocks = 1024;
inline constexpr int block_threads = 512;

// Every rank's signal array: slot [block * max_ranks + from] holds the last value rank `from`'s
// block `block` sent.
struct signals {
  std::uint32_t* of[max_ranks];
  int rank;
  int ranks;
};

template <class T>
struct per_rank {
  T* of[max_ranks];
};

__device__ inline unsigned long long nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A peer that has not arrived after this long never will (its kernel cannot run: the ranks'
// kernels were serialised, or a rank's stream is blocked): stop the kernel with a message rather
// than hang the process.
inline constexpr unsigned long long barrier_patience_ns = 30'000'000'000ull;

__device__ inline void barrier(const signals& s, std::uint32_t value) {
  __syncthreads(); // the whole block's work so far comes before the signal (release is cumulative)
  if (static_cast<int>(threadIdx.x) < s.ranks) {
    const int peer = static_cast<int>(threadIdx.x);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> out(
        s.of[peer][blockIdx.x * max_ranks + s.rank]);
    out.store(value, cuda::std::memory_order_release);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> in(
        s.of[s.rank][blockIdx.x * max_ranks + peer]);
    // Wrap-safe "in >= value": values handed out over 2^31 calls apart never meet.
    const unsigned long long since = nanoseconds();
    while (static_cast<std::int32_t>(in.load(cuda::std::memory_order_acquire) - value) < 0) {
      if (nanoseconds() - since > barrier_patience_ns) {
        printf("cohort p2p: rank %d, block %u waited 30 s for rank %d, which never arrived (its "
               "kernel could not run beside this one, e.g. kernels serialised by a tool, or its "
               "stream blocked). Stopping the kernel.\n",
               s.rank, blockIdx.x, peer);
        __trap();
      }
    }
  }
  __syncthreads();
}

// Loads one P through L2, in the widest pieces its alignment allows.
template <class P>
__device__ inline P load_shared(const P* p) {
  P out;
  if constexpr (alignof(P) >= 16 && sizeof(P) % 16 == 0) {
    uint4 pieces[sizeof(P) / 16];
    for (std::size_t k = 0; k < sizeof(P) / 16; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const uint4*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else if constexpr (alignof(P) >= 8 && sizeof(P) % 8 == 0) {
    unsigned long long pieces[sizeof(P) / 8];
    for (std::size_t k = 0; k < sizeof(P) / 8; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned long long*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else if constexpr (alignof(P) >= 4 && sizeof(P) % 4 == 0) {
    unsigned int pieces[sizeof(P) / 4];
    for (std::size_t k = 0; k < sizeof(P) / 4; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned int*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else if constexpr (alignof(P) >= 2 && sizeof(P) % 2 == 0) {
    unsigned short pieces[sizeof(P) / 2];
    for (std::size_t k = 0; k < sizeof(P) / 2; ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned short*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  } else {
    unsigned char pieces[sizeof(P)];
    for (std::size_t k = 0; k < sizeof(P); ++k)
      pieces[k] = __ldcg(reinterpret_cast<const unsigned char*>(p) + k);
    std::memcpy(&out, pieces, sizeof(P));
  }
  return out;
}

// V elements moved as one aligned unit (16 bytes where the host found the pointers aligned).
template <class T, int V>
struct alignas(V > 1 ? sizeof(T) * V : alignof(T)) pack {
  T v[V];
};

// Elements per pack for T: 16 bytes' worth where T divides 16, else one.
template <class T>
inline constexpr int wide_pack = (sizeof(T) <= 16 && 16 % sizeof(T) == 0) ? int(16 / sizeof(T)) : 1;

// A contiguous range walked by every thread of the grid in the same order on every rank: pack j
// by thread j mod (grid size), then the leftover elements one per thread.
template <class T, int V, class F, class G>
__device__ inline void walk(std::size_t count, F&& on_pack, G&& on_element) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t thread = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::size_t packs = count / V;
  constexpr int unroll = 4;
  std::size_t j = thread;
  for (; j + (unroll - 1) * stride < packs; j += unroll * stride)
    on_pack.template operator()<unroll>(j, stride);
  for (; j < packs; j += stride)
    on_pack.template operator()<1>(j, stride);
  for (std::size_t e = packs * V + thread; e < count; e += stride)
    on_element(e);
}

// Copies `count` elements from `from` (maybe another rank's memory) to `to`.
template <class T, int V>
__device__ inline void copy_range(const T* from, T* to, std::size_t count) {
  using P = pack<T, V>;
  const P* src = reinterpret_cast<const P*>(from);
  P* dst = reinterpret_cast<P*>(to);
  walk<T, V>(
      count,
      [&]<int U>(std::size_t j, std::size_t stride) {
        P held[U];
        for (int u = 0; u < U; ++u)
          held[u] = load_shared(src + j + u * stride);
        for (int u = 0; u < U; ++u)
          dst[j + u * stride] = held[u];
      },
      [&](std::size_t e) { to[e] = load_shared(from + e); });
}

// How a reduction turns elements into accumulators and back.
template <class T, class Acc, class Op, bool Average>
struct reducer {
  Op op;
  int ranks;
  __device__ Acc finish(Acc a) const {
    if constexpr (Average)
      return a / static_cast<Acc>(ranks);
    else
      return a;
  }
  __device__ T out(Acc a) const {
    if constexpr (std::is_same_v<T, Acc>)
      return finish(a);
    else
      return static_cast<T>(finish(a));
  }
};

// Reduces `count` elements at offset `first` of every rank's `from` into `to`, in rank order (so
// every rank that reduces the same elements gets the same bits).
template <class T, class Acc, int V, class R>
__device__ inline void reduce_range(const per_rank<const T>& from, std::size_t first, T* to,
                                    std::size_t count, const R& r) {
  using P = pack<T, V>;
  walk<T, V>(
      count,
      [&]<int U>(std::size_t j, std::size_t stride) {
        Acc acc[U][V];
        for (int u = 0; u < U; ++u) {
          const P p = load_shared(reinterpret_cast<const P*>(from.of[0] + first) + j + u * stride);
          for (int k = 0; k < V; ++k)
            acc[u][k] = static_cast<Acc>(p.v[k]);
        }
        for (int q = 1; q < r.ranks; ++q)
          for (int u = 0; u < U; ++u) {
            const P p =
                load_shared(reinterpret_cast<const P*>(from.of[q] + first) + j + u * stride);
            for (int k = 0; k < V; ++k)
              acc[u][k] = r.op(acc[u][k], static_cast<Acc>(p.v[k]));
          }
        for (int u = 0; u < U; ++u) {
          P result;
          for (int k = 0; k < V; ++k)
            result.v[k] = r.out(acc[u][k]);
          reinterpret_cast<P*>(to)[j + u * stride] = result;
        }
      },
      [&](std::size_t e) {
        Acc acc = static_cast<Acc>(load_shared(from.of[0] + first + e));
        for (int q = 1; q < r.ranks; ++q)
          acc = r.op(acc, static_cast<Acc>(load_shared(from.of[q] + first + e)));
        to[e] = r.out(acc);
      });
}

// One-shot all-reduce, for small messages: each rank copies its input into its scratch (this
// call's half of a double buffer), meets the others once, then reduces every rank's scratch into
// its output. The scratch is written again two calls later, after a barrier of the call in
// between has shown that every rank finished this one.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    one_shot_all_reduce(const T* in, T* out, per_rank<T> scratch, std::size_t count, signals s,
                        std::uint32_t signal, R r) {
  copy_range<T, V>(in, scratch.of[s.rank], count);
  barrier(s, signal);
  per_rank<const T> from;
  for (int q = 0; q < max_ranks; ++q)
    from.of[q] = scratch.of[q];
  reduce_range<T, Acc, V>(from, 0, out, count, r);
}

// Two-shot all-reduce, for large messages: rank q reduces chunk q of every rank's input into its
// output (reduce-scatter), then every rank copies the other chunks from their owners' outputs
// (all-gather). Three barriers: inputs ready; chunks reduced; everyone done reading (after which
// the caller may change its buffers). In place works: chunk q of a rank's buffer is read in the
// first phase only by rank q and rewritten in the second only after the middle barrier.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    two_shot_all_reduce(per_rank<const T> in, per_rank<T> out, std::size_t count, std::size_t chunk,
                        signals s, std::uint32_t signal, R r) {
  auto range = [&](int q, std::size_t& first, std::size_t& n) {
    const std::size_t start = chunk * static_cast<std::size_t>(q);
    first = start < count ? start : count;
    n = (count - first < chunk ? count - first : chunk);
  };
  barrier(s, signal);
  std::size_t first = 0, n = 0;
  range(s.rank, first, n);
  reduce_range<T, Acc, V>(in, first, out.of[s.rank] + first, n, r);
  barrier(s, signal + 1);
  for (int step = 1; step < s.ranks; ++step) {
    const int q = (s.rank + step) % s.ranks; // each rank starts with a different peer
    range(q, first, n);
    copy_range<T, V>(out.of[q] + first, out.of[s.rank] + first, n);
  }
  barrier(s, signal + 2);
}

// Reduce-scatter: rank q reduces block q (`count` elements at count * q) of every rank's input
// into its output. The second barrier keeps every input alive until all ranks have read it.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    reduce_scatter(per_rank<const T> in, T* out, std::size_t count, signals s, std::uint32_t signal,
                   R r) {
  barrier(s, signal);
  reduce_range<T, Acc, V>(in, count * static_cast<std::size_t>(s.rank), out, count, r);
  barrier(s, signal + 1);
}

// Reduce: the root reduces every rank's input into its output; the others only keep their inputs
// alive until it has.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    reduce(per_rank<const T> in, T* out, std::size_t count, int root, signals s,
           std::uint32_t signal, R r) {
  barrier(s, signal);
  if (s.rank == root) reduce_range<T, Acc, V>(in, 0, out, count, r);
  barrier(s, signal + 1);
}

// All-gather: every rank copies every rank's `count` elements into its slot of its output.
template <class T, int V>
__global__ void __launch_bounds__(block_threads)
    all_gather(per_rank<const T> in, T* out, std::size_t count, signals s, std::uint32_t signal) {
  barrier(s, signal);
  for (int step = 0; step < s.ranks; ++step) {
    const int q = (s.rank + step) % s.ranks;
    if (in.of[q] != out + count * q) copy_range<T, V>(in.of[q], out + count * q, count);
  }
  barrier(s, signal + 1);
}

// Broadcast: every rank but the root copies the root's elements.
template <class T, int V>
__global__ void __launch_bounds__(block_threads)
    broadcast(const T* root_data, T* data, std::size_t count, signals s, std::uint32_t signal) {
  barrier(s, signal);
  if (root_data != data) copy_range<T, V>(root_data, data, count);
  barrier(s, signal + 1);
}

} // namespace cohort::detail::p2p
