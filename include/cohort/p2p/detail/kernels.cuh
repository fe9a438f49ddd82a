// cohort/p2p/detail/kernels.cuh — the device side of the peer-to-peer engine.
//
// Every rank of a call runs the same kernel, with the same grid, on its own stream. Ranks meet at
// per-block barriers: block b of each rank writes a value into block b's slot of every rank's
// signals (system-scope release) and waits for block b of every rank (system-scope acquire).
// Because every phase maps element i to the same block on every rank, a per-block barrier orders
// exactly the work that depends on it, and no grid-wide sync is needed.
//
// The engine's state lives on the GPUs: each rank keeps one 64-bit epoch per block slot, which its
// kernels read when they start and advance before they end (block_session). Barrier values and the
// one-shot scratch half come from the epoch, so the host passes only pointers and sizes, and a
// launch captured into a CUDA graph replays correctly any number of times, mixed with direct
// calls (NCCL's LSA barrier sessions and vLLM's custom all-reduce keep their state the same way).
//
// Data from other ranks is read with ld.global.cg (L2, not L1): L1 is not coherent with writes
// made by other GPUs during the kernel.
#pragma once

#include "../../communication/operators.cuh"

#include <cuda/atomic>

#include <cstdio>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cohort::detail::p2p {

inline constexpr int max_ranks = 8;
inline constexpr int max_blocks = 256; // more than half the SMs of any GPU so far
inline constexpr int block_threads = 512;
// Barrier values a call may use: its epoch's base + 1 ... base + epoch_step - 1.
inline constexpr std::uint64_t epoch_step = 4;

// What one rank's kernels know of the clique. Nothing in it changes from call to call, so a call
// captured into a CUDA graph is the same call at every replay: the state that moves lives in
// device memory, in `epochs` and the signal slots.
struct engine {
  // Every rank's signal slots: slot [block * max_ranks + from] of rank r holds the last barrier
  // value block `block` of rank `from` sent to r.
  std::uint64_t* signals[max_ranks];
  // Every rank's point-to-point flags: flag [block * max_ranks + from] of rank r counts the
  // signals block `block` of rank `from` has sent to r, ever.
  std::uint64_t* flags[max_ranks];
  // This rank's own counts: [block * max_ranks + peer] the signals its block `block` has sent to
  // `peer`, then (max_blocks * max_ranks further on) the waits it has made on `peer`.
  std::uint64_t* counts;
  // This rank's epochs, one per block slot, each only growing (see block_session).
  std::uint64_t* epochs;
  // Every rank's one-shot scratch: two halves of `half_bytes` each.
  unsigned char* scratch[max_ranks];
  std::size_t half_bytes;
  unsigned long long patience_ns; // 0: wait for a peer as long as it takes
  int rank;
  int ranks; // 0 only for the no-op launch that loads a kernel (ensure_loaded)
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

// Sessions: what a block of a call (an engine kernel, or a user's kernel through p2p_handle) knows
// of its place in the clique's sequence of calls.
//
// Block b stands for the slots b, b + grid, b + 2 grid, ... of the call's grid. It opens its
// session at the highest of them and, when it ends, moves every one of them past the values it
// used. Each rank runs the same calls with the same grids, and each block the same sequence of
// calls on every rank, so block b's base is the same on every rank, and the barrier values and
// scratch half derived from it agree without the host handing any out. Each session call (sync,
// grid_sync) takes the next value base + 1, base + 2, ...
// The slots need not be equal: the blocks of a user's kernel may make different numbers of calls
// (a tile loop), leaving slot 1 ahead of slot 0; a later call whose block 0 stands for both then
// starts past the higher, and a block never takes a value at or below one its slot's signals
// already hold (which would pass a barrier before the peers arrive). They keep one parity: the
// engine's calls move every slot by epoch_step, a user's session by a multiple of 2 * epoch_step,
// so every block of a call takes the same scratch half. Values only grow: 2^64 is never reached.
//
// A slot [block * max_ranks + from] of rank r is written only by block `block` of rank `from`, in
// increasing values, so "at least v" means "that block has made its v-th call or a later one".
//
// Point-to-point signals count instead, and need no epoch: the n-th signal block b of rank r ever
// sends to rank p stores n into p's flag [b][r], and the n-th wait block b of p ever makes on r
// waits for that flag to reach n. The counts live in each rank's own memory, touched only by
// thread 0 of block b of the kernels in stream order, so they too replay from graphs.

// The block's index in its grid and its thread's index in the block, whatever their dimensions.
__device__ inline unsigned linear_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// In 64 bits: a grid of 2^17 x 2^15 blocks made 0 in 32, which passed the check of at most
// max_blocks (device.cuh).
__device__ inline unsigned long long grid_blocks() {
  return 1ull * gridDim.x * gridDim.y * gridDim.z;
}
__device__ inline unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ inline unsigned block_size() {
  return blockDim.x * blockDim.y * blockDim.z;
}

// Waits until `slot` holds at least `value` (system-scope acquire), within the engine's patience.
__device__ inline void wait_for(const engine& e, std::uint64_t& slot, std::uint64_t value,
                                unsigned block, int peer, const char* call) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> in(slot);
  const unsigned long long since = e.patience_ns != 0 ? nanoseconds() : 0;
  while (in.load(cuda::std::memory_order_acquire) < value) {
    if (e.patience_ns != 0 && nanoseconds() - since > e.patience_ns) {
      printf("cohort p2p: rank %d, block %u has waited %llu ms in %s for rank %d, which has not "
             "arrived: its kernel could not run beside this one (kernels serialised by a tool, "
             "a blocked stream, another clique's kernels filling its SMs, a grid larger than "
             "fits beside its peers) or is only late (a long kernel before the call, a debugger; "
             "then make the p2p_clique with a longer patience, or "
             "p2p_clique_options::wait_forever). Stopping the kernel.\n",
             e.rank, block, e.patience_ns / 1000000ull, call, peer);
      __trap();
    }
  }
}

// Stores `value` into block `block`'s slot from this rank on rank `peer` (system-scope release).
__device__ inline void store_signal(const engine& e, int peer, unsigned block,
                                    std::uint64_t value) {
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> out(
      e.signals[peer][block * max_ranks + e.rank]);
  out.store(value, cuda::std::memory_order_release);
}

// Block `block` of every rank meets block `block` of every other rank: it stores `value` into its
// slot of every rank's signals (release: the block's writes so far come first, as release is
// cumulative over the __syncthreads before it) and waits until every rank's block has stored at
// least `value` into its own (acquire, then __syncthreads hands it to the whole block).
__device__ inline void barrier(const engine& e, unsigned block, std::uint64_t value,
                               const char* call) {
  __syncthreads();
  for (int peer = static_cast<int>(linear_thread()); peer < e.ranks;
       peer += static_cast<int>(block_size())) {
    store_signal(e, peer, block, value);
    wait_for(e, e.signals[e.rank][block * max_ranks + peer], value, block, peer, call);
  }
  __syncthreads();
}

class block_session {
 public:
  // Every thread of the block, before anything else touches the clique's state.
  __device__ explicit block_session(const engine& e)
      : e_(&e)
      , block_(linear_block()) {
    __shared__ unsigned long long base;
    if (linear_thread() == 0) base = 0;
    __syncthreads();
    unsigned long long highest = 0;
    for_each_slot([&](unsigned slot) {
      if (e.epochs[slot] > highest) highest = e.epochs[slot];
    });
    if (highest != 0) atomicMax(&base, highest);
    __syncthreads();
    base_ = base;
    // `base` is one variable for every session a kernel opens: a second session's thread 0 must
    // not overwrite it before every thread of this block has read it.
    __syncthreads();
  }

  __device__ const engine& clique() const { return *e_; }
  __device__ unsigned block() const { return block_; }
  // The values used so far, and the value the next call takes.
  __device__ std::uint64_t used() const { return used_; }
  __device__ std::uint64_t next() { return base_ + ++used_; }
  // This call's half of every rank's one-shot scratch: consecutive engine calls alternate, and a
  // rank reaches the call after next only once every rank has finished this one (the call between
  // has a barrier; a user's session advances by a multiple of 2 * epoch_step, see end_user).
  __device__ std::size_t scratch_offset() const {
    return ((base_ / epoch_step) & 1u) * e_->half_bytes;
  }

  __device__ void sync(const char* call = "sync") { barrier(*e_, block_, next(), call); }

  __device__ void signal(int peer) {
    __syncthreads(); // the block's writes so far come before the flag
    if (linear_thread() == 0) {
      std::uint64_t& sent = e_->counts[block_ * max_ranks + peer];
      cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> flag(
          e_->flags[peer][block_ * max_ranks + e_->rank]);
      flag.store(++sent, cuda::std::memory_order_release);
    }
  }

  __device__ void wait(int peer, const char* call = "wait") {
    if (linear_thread() == 0) {
      std::uint64_t& waited =
          e_->counts[std::size_t{max_blocks} * max_ranks + block_ * max_ranks + peer];
      wait_for(*e_, e_->flags[e_->rank][block_ * max_ranks + peer], ++waited, block_, peer, call);
    }
    __syncthreads();
  }

  // After the block's last access to shared state: moves every slot the block stands for to
  // base + step (step a multiple of epoch_step above every value used).
  __device__ void end(std::uint64_t step) {
    __syncthreads();
    for_each_slot([&](unsigned slot) { e_->epochs[slot] = base_ + step; });
  }
  // The step a user's session takes: the values it used rounded up to a multiple of
  // 2 * epoch_step, at least that, so that the engine's next call keeps alternating scratch halves
  // whatever the user's kernel synchronised.
  __device__ std::uint64_t user_step() const {
    constexpr std::uint64_t unit = 2 * epoch_step;
    const std::uint64_t step = (used_ + unit - 1) / unit * unit;
    return step == 0 ? unit : step;
  }

 private:
  // Calls f(slot) for every slot this block stands for, the block's threads sharing them (one
  // thread storing them all cost 25 us on a 1-block call). The grid is at most max_blocks.
  template <class F>
  __device__ void for_each_slot(F f) const {
    const auto grid = static_cast<unsigned>(grid_blocks());
    for (unsigned slot = block_ + linear_thread() * grid; slot < static_cast<unsigned>(max_blocks);
         slot += grid * block_size())
      f(slot);
  }

  const engine* e_;
  unsigned block_;
  std::uint64_t used_ = 0; // 64 bits: a persistent kernel may pass 2^32 barriers (hours)
  std::uint64_t base_ = 0;
};

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

// The bytes of a P, with its size and alignment: what the copies move, so that they take any
// trivially copyable type, one without a default constructor too.
template <class P>
struct alignas(alignof(P)) bytes_of {
  unsigned char bytes[sizeof(P)];
};

// Copies `count` elements from `from` (maybe another rank's memory) to `to`.
template <class T, int V>
__device__ inline void copy_range(const T* from, T* to, std::size_t count) {
  using P = bytes_of<pack<T, V>>;
  using E = bytes_of<T>;
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
      [&](std::size_t e) {
        reinterpret_cast<E*>(to)[e] = load_shared(reinterpret_cast<const E*>(from) + e);
      });
}

// How a reduction turns elements into accumulators and back.
template <class T, class Acc, class Op, bool Average>
struct reducer {
  Op op;
  int ranks;
  // Checked in device code, where nvcc knows an extended __device__ lambda's parameters (host code
  // takes such a lambda as callable with anything).
  __device__ Acc apply(Acc a, Acc b) const {
    static_assert(
        std::is_invocable_v<const Op&, Acc&, Acc&>,
        "cohort's peer-to-peer reduction calls this operator with two values of its "
        "accumulator type, and cannot: for __half, __nv_bfloat16, their pairs and fp8 "
        "both the type and float are compiled (accumulate_in_float picks at run time), so "
        "give an operator that takes both, e.g. [] __device__(auto a, auto b).");
    return op(a, b);
  }
  __device__ Acc finish(Acc a) const {
    if constexpr (Average && is_16_bit_float<Acc>)
      return __hdiv(a, convert<Acc>(ranks)); // its operator may be compiled out (operators.cuh)
    else if constexpr (Average && is_8_bit_float<Acc>)
      return convert<Acc>(convert<float>(a) / static_cast<float>(ranks)); // fp8 has no division
    else if constexpr (Average)
      return a / convert<Acc>(ranks);
    else
      return a;
  }
  __device__ T out(Acc a) const { return convert<T>(finish(a)); }
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
            acc[u][k] = convert<Acc>(p.v[k]);
        }
        for (int q = 1; q < r.ranks; ++q)
          for (int u = 0; u < U; ++u) {
            const P p =
                load_shared(reinterpret_cast<const P*>(from.of[q] + first) + j + u * stride);
            for (int k = 0; k < V; ++k)
              acc[u][k] = r.apply(acc[u][k], convert<Acc>(p.v[k]));
          }
        for (int u = 0; u < U; ++u) {
          P result;
          for (int k = 0; k < V; ++k)
            result.v[k] = r.out(acc[u][k]);
          reinterpret_cast<P*>(to)[j + u * stride] = result;
        }
      },
      [&](std::size_t e) {
        Acc acc = convert<Acc>(load_shared(from.of[0] + first + e));
        for (int q = 1; q < r.ranks; ++q)
          acc = r.apply(acc, convert<Acc>(load_shared(from.of[q] + first + e)));
        to[e] = r.out(acc);
      });
}

// Releases a kernel that waits for members that never launched (their launch failed): it raises,
// in the waiting member's own signal slots and flags, every slot of the missing members
// [first_missing, ranks) past any value. It runs on a stream of the member's own beside the
// waiting kernel. (A template, as every kernel in a header must be, so that translation units may
// share it.)
template <class Word>
__global__ void release_waiting(Word* signals, Word* flags, int first_missing, int ranks) {
  const int peer = first_missing + static_cast<int>(threadIdx.x);
  if (peer >= ranks) return;
  const auto raise_past_all = [&](Word* slots) {
    cuda::atomic_ref<Word, cuda::thread_scope_system> slot(slots[blockIdx.x * max_ranks + peer]);
    slot.store(~Word{0}, cuda::std::memory_order_release);
  };
  raise_past_all(signals);
  raise_past_all(flags);
}

// Every kernel returns at once when launched with ranks == 0 (ensure_loaded's no-op launch).

// One-shot all-reduce, for small messages: each rank copies its input into its half of the
// scratch, meets the others once, then reduces every rank's scratch into its output.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    one_shot_all_reduce(const T* in, T* out, std::size_t count, engine e, R r) {
  if (e.ranks == 0) return;
  block_session session(e);
  const std::size_t half = session.scratch_offset();
  copy_range<T, V>(in, reinterpret_cast<T*>(e.scratch[e.rank] + half), count);
  session.sync("one-shot all_reduce");
  per_rank<const T> from;
  for (int q = 0; q < max_ranks; ++q)
    from.of[q] = reinterpret_cast<const T*>(e.scratch[q] + half);
  reduce_range<T, Acc, V>(from, 0, out, count, r);
  session.end(epoch_step);
}

// Two-shot all-reduce, for large messages: rank q reduces chunk q of every rank's input into its
// output (reduce-scatter), then every rank copies the other chunks from their owners' outputs
// (all-gather). Three barriers: inputs ready; chunks reduced; everyone done reading (after which
// the caller may change its buffers). In place works: chunk q of a rank's buffer is read in the
// first phase only by rank q and rewritten in the second only after the middle barrier.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    two_shot_all_reduce(per_rank<const T> in, per_rank<T> out, std::size_t count, std::size_t chunk,
                        engine e, R r) {
  if (e.ranks == 0) return;
  block_session session(e);
  auto range = [&](int q, std::size_t& first, std::size_t& n) {
    const std::size_t start = chunk * static_cast<std::size_t>(q);
    first = start < count ? start : count;
    n = (count - first < chunk ? count - first : chunk);
  };
  session.sync("two-shot all_reduce");
  std::size_t first = 0, n = 0;
  range(e.rank, first, n);
  reduce_range<T, Acc, V>(in, first, out.of[e.rank] + first, n, r);
  session.sync("two-shot all_reduce");
  for (int step = 1; step < e.ranks; ++step) {
    const int q = (e.rank + step) % e.ranks; // each rank starts with a different peer
    range(q, first, n);
    copy_range<T, V>(out.of[q] + first, out.of[e.rank] + first, n);
  }
  session.sync("two-shot all_reduce");
  session.end(epoch_step);
}

// Reduce-scatter (root < 0): rank q reduces block q (`count` elements at count * q) of every
// rank's input into its output. Reduce (root >= 0): the root reduces every rank's input into its
// output, the others only keep their inputs alive until it has. The second barrier keeps every
// input alive until all ranks have read it.
template <class T, class Acc, int V, class R>
__global__ void __launch_bounds__(block_threads)
    reduce_to(per_rank<const T> in, T* out, std::size_t count, int root, engine e, R r) {
  if (e.ranks == 0) return;
  block_session session(e);
  session.sync("reduce or reduce_scatter");
  if (root < 0)
    reduce_range<T, Acc, V>(in, count * static_cast<std::size_t>(e.rank), out, count, r);
  else if (e.rank == root)
    reduce_range<T, Acc, V>(in, 0, out, count, r);
  session.sync("reduce or reduce_scatter");
  session.end(epoch_step);
}

// All-gather: every rank copies every rank's `count` elements into its slot of its output.
template <class T, int V>
__global__ void __launch_bounds__(block_threads)
    all_gather(per_rank<const T> in, T* out, std::size_t count, engine e) {
  if (e.ranks == 0) return;
  block_session session(e);
  session.sync("all_gather");
  for (int step = 0; step < e.ranks; ++step) {
    const int q = (e.rank + step) % e.ranks;
    if (in.of[q] != out + count * q) copy_range<T, V>(in.of[q], out + count * q, count);
  }
  session.sync("all_gather");
  session.end(epoch_step);
}

// Broadcast: every rank but the root copies the root's elements.
template <class T, int V>
__global__ void __launch_bounds__(block_threads)
    broadcast(const T* root_data, T* data, std::size_t count, engine e) {
  if (e.ranks == 0) return;
  block_session session(e);
  session.sync("broadcast");
  if (root_data != data) copy_range<T, V>(root_data, data, count);
  session.sync("broadcast");
  session.end(epoch_step);
}

} // namespace cohort::detail::p2p
