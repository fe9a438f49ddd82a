// The tail of a tensor-parallel transformer layer: every rank holds its partial output of the
// row-parallel GEMM (tokens x hidden, bf16); the layer sums them over the ranks, adds the residual
// and applies RMSNorm (float math, bf16 out). Two ways, on a p2p_clique:
// - fused: one kernel per GPU, as TensorRT-LLM fuses it. Each block copies its tokens' rows into
//   one half of a staging buffer, meets the same block of every rank (p2p_session::sync), sums
//   every rank's rows through peer memory in float, adds the residual and normalises, all in
//   registers. Consecutive calls alternate staging halves (a per-block parity on the GPU, kept
//   equal over all 256 slots as the engine keeps its epochs), so no second barrier is needed: a
//   rank reaches the call after next only once every rank has passed the next call's barrier,
//   that is finished this one.
// - unfused: cohort's p2p all_reduce (accumulating in float, bf16 out), then a norm kernel; or
//   NCCL's all_reduce then the same norm kernel.
// Used by examples/fused_layer_tail and benchmarks/fused_bench.
#pragma once

#include <cohort/cohort.cuh>

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace layer_tail {

using bf16 = __nv_bfloat16;

constexpr unsigned threads = 512;
constexpr int pack = 8;      // bf16 per 16-byte load
constexpr int max_packs = 4; // per thread and row: hidden up to threads * max_packs * pack
constexpr int max_hidden = static_cast<int>(threads) * max_packs * pack;
constexpr float epsilon = 1e-6f;

__device__ inline void add_pack(const uint4& u, float (&to)[pack]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
  for (int k = 0; k < pack / 2; ++k) {
    const float2 f = __bfloat1622float2(h[k]);
    to[2 * k] += f.x;
    to[2 * k + 1] += f.y;
  }
}

// RMSNorm of one row, held by the block's threads as v[k] = pack threadIdx.x + k * threads; the
// sum of squares is reduced in the same order every time.
__device__ inline void normalize_row(const float (&v)[max_packs][pack], int packs,
                                     const bf16* gamma, bf16* out, int hidden) {
  float squares = 0.0f;
  for (int k = 0; k < max_packs; ++k)
    if (static_cast<int>(threadIdx.x + k * threads) < packs)
      for (int e = 0; e < pack; ++e)
        squares += v[k][e] * v[k][e];
  for (int offset = 16; offset > 0; offset /= 2)
    squares += __shfl_xor_sync(0xffffffffu, squares, offset);
  __shared__ float warps[threads / 32];
  __shared__ float scale;
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned w = 0; w < threads / 32; ++w)
      total += warps[w];
    scale = rsqrtf(total / static_cast<float>(hidden) + epsilon);
  }
  __syncthreads();
  const float s = scale;
  for (int k = 0; k < max_packs; ++k) {
    const int j = static_cast<int>(threadIdx.x + k * threads);
    if (j >= packs) continue;
    float g[pack] = {};
    add_pack(reinterpret_cast<const uint4*>(gamma)[j], g);
    uint4 result;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&result);
    for (int e = 0; e < pack / 2; ++e)
      h[e] = __floats2bfloat162_rn(v[k][2 * e] * s * g[2 * e], v[k][2 * e + 1] * s * g[2 * e + 1]);
    reinterpret_cast<uint4*>(out)[j] = result;
  }
  __syncthreads(); // `warps` and `scale` are reused by the block's next row
}

// The unfused norm: out = RMSNorm(reduced + residual) * gamma, one block per token.
__global__ void __launch_bounds__(threads)
    norm_rows(const bf16* reduced, const bf16* residual, const bf16* gamma, bf16* out, int tokens,
              int hidden) {
  const int packs = hidden / pack;
  for (int t = static_cast<int>(blockIdx.x); t < tokens; t += static_cast<int>(gridDim.x)) {
    float v[max_packs][pack] = {};
    for (int k = 0; k < max_packs; ++k) {
      const int j = static_cast<int>(threadIdx.x + k * threads);
      if (j >= packs) continue;
      add_pack(reinterpret_cast<const uint4*>(reduced)[std::size_t(t) * packs + j], v[k]);
      add_pack(reinterpret_cast<const uint4*>(residual)[std::size_t(t) * packs + j], v[k]);
    }
    normalize_row(v, packs, gamma, out + std::size_t(t) * hidden, hidden);
  }
}

// The fused tail. `staging`: two halves of `half` elements on every rank; `parity`: this rank's
// 256 per-block halves, all equal between calls.
__global__ void __launch_bounds__(threads)
    fused_tail(cohort::p2p_handle<bf16> staging, const bf16* partial, const bf16* residual,
               const bf16* gamma, bf16* out, unsigned* parity, int tokens, int hidden,
               std::size_t half) {
  auto session = staging.session();
  __shared__ unsigned this_half;
  if (threadIdx.x == 0) this_half = parity[blockIdx.x];
  __syncthreads();
  const unsigned h = this_half;
  const int packs = hidden / pack;
  const std::size_t base = h * half;
  uint4* mine = reinterpret_cast<uint4*>(staging.local() + base);
  for (int t = static_cast<int>(blockIdx.x); t < tokens; t += static_cast<int>(gridDim.x))
    for (int j = static_cast<int>(threadIdx.x); j < packs; j += static_cast<int>(threads))
      mine[std::size_t(t) * packs + j] =
          reinterpret_cast<const uint4*>(partial)[std::size_t(t) * packs + j];
  session.sync(); // block b of every rank has staged its rows
  for (int t = static_cast<int>(blockIdx.x); t < tokens; t += static_cast<int>(gridDim.x)) {
    float v[max_packs][pack] = {};
    for (int k = 0; k < max_packs; ++k) {
      const int j = static_cast<int>(threadIdx.x + k * threads);
      if (j >= packs) continue;
      const std::size_t at = std::size_t(t) * packs + j;
      for (int q = 0; q < staging.ranks(); ++q) // in rank order: every rank gets the same bits
        add_pack(__ldcg(reinterpret_cast<const uint4*>(staging.peer(q) + base) + at), v[k]);
      add_pack(reinterpret_cast<const uint4*>(residual)[at], v[k]);
    }
    normalize_row(v, packs, gamma, out + std::size_t(t) * hidden, hidden);
  }
  // The next call stages into the other half; every slot this block stands for moves with it.
  for (unsigned b = blockIdx.x + threadIdx.x * gridDim.x;
       b < static_cast<unsigned>(cohort::detail::p2p::max_blocks); b += gridDim.x * threads)
    parity[b] = h ^ 1u;
  session.end();
}

// Every rank's buffers for up to `max_tokens` tokens of `hidden` (a multiple of 8, at most
// max_hidden) bf16 values.
class layer {
 public:
  layer(const cohort::device_group& group, cohort::p2p_clique& peers, int max_tokens, int hidden)
      : group_(group)
      , peers_(peers)
      , hidden_(hidden)
      , half_(std::size_t(max_tokens) * hidden)
      , partial_(group, cohort::partition::replicated(half_, group.size()))
      , residual_(group, cohort::partition::replicated(half_, group.size()))
      , gamma_(group, cohort::partition::replicated(std::size_t(hidden), group.size()))
      , out_(group, cohort::partition::replicated(half_, group.size()))
      , reduced_(group, cohort::partition::replicated(half_, group.size()))
      , staging_(group, cohort::partition::replicated(2 * half_, group.size()))
      , parity_(group,
                cohort::partition::replicated(cohort::detail::p2p::max_blocks, group.size())) {
    if (hidden % pack != 0 || hidden > max_hidden || max_tokens < 1)
      cohort::detail::throw_invalid_argument("layer_tail::layer", "hidden",
                                             "must be a multiple of 8 up to " +
                                                 std::to_string(max_hidden) +
                                                 ", with max_tokens at least 1.");
    parity_.fill_bytes(0);
    for (std::size_t r = 0; r < group.size(); ++r)
      handles_.push_back(cohort::p2p_handle_for(peers, staging_, r));
  }

  int hidden() const noexcept { return hidden_; }

  // Rank r's partial output; the residual and gamma, the same on every rank.
  void load(const std::vector<std::vector<bf16>>& partial, const std::vector<bf16>& residual,
            const std::vector<bf16>& gamma) {
    for (std::size_t r = 0; r < group_.size(); ++r) {
      partial_.local(r).copy_from_host(partial[r]);
      residual_.local(r).copy_from_host(residual);
      gamma_.local(r).copy_from_host(gamma);
    }
    group_.synchronize();
  }

  void fused(int tokens) {
    check_tokens(tokens, "layer_tail::layer::fused");
    const unsigned blocks =
        static_cast<unsigned>(std::min(tokens, cohort::detail::p2p::max_blocks));
    cohort::p2p_launch(peers_, {.grid = blocks, .block = threads, .name = "fused_tail"}, fused_tail,
                       [&](std::size_t r) {
                         return std::make_tuple(handles_[r], data(partial_, r), data(residual_, r),
                                                data(gamma_, r), data(out_, r), data(parity_, r),
                                                tokens, hidden_, half_);
                       });
  }

  // The all-reduce (cohort p2p, in float), then the norm.
  void unfused(int tokens) {
    check_tokens(tokens, "layer_tail::layer::unfused");
    std::vector<cuda::std::span<const bf16>> send;
    std::vector<cuda::std::span<bf16>> recv;
    for (std::size_t r = 0; r < group_.size(); ++r) {
      send.push_back(cuda::std::span<const bf16>(data(partial_, r), rows(tokens)));
      recv.push_back(cuda::std::span<bf16>(data(reduced_, r), rows(tokens)));
    }
    cohort::all_reduce(peers_, send, recv, cohort::sum, {.accumulate_in_float = true});
    norm(tokens);
  }

#if COHORT_WITH_NCCL
  void unfused_nccl(cohort::nccl_clique& nccl, int tokens) {
    check_tokens(tokens, "layer_tail::layer::unfused_nccl");
    {
      cohort::nccl_group batch;
      for (std::size_t r = 0; r < group_.size(); ++r)
        cohort::all_reduce(nccl.rank(r), group_.stream(r),
                           cuda::std::span<const bf16>(data(partial_, r), rows(tokens)),
                           cuda::std::span<bf16>(data(reduced_, r), rows(tokens)), cohort::sum);
    }
    norm(tokens);
  }
#endif

  void poison_output() {
    out_.fill_bytes(0xA5);
  }

  std::vector<bf16> output(std::size_t r, int tokens) const {
    check_tokens(tokens, "layer_tail::layer::output");
    std::vector<bf16> host(rows(tokens));
    cohort::scoped_device on(group_.device(r));
    cohort::check_cuda(cudaMemcpyAsync(host.data(), out_.shard(r).data.data(),
                                       host.size() * sizeof(bf16), cudaMemcpyDeviceToHost,
                                       group_.stream(r).native_handle()),
                       "cudaMemcpyAsync(device to host)", group_.device(r).get());
    group_.stream(r).synchronize();
    return host;
  }

 private:
  // The buffers hold max_tokens rows: more would run past them (and 0 is a grid of 0 blocks).
  void check_tokens(int tokens, const char* call) const {
    if (tokens < 1 || rows(tokens) > half_)
      cohort::detail::throw_invalid_argument(
          call, "tokens",
          "must be from 1 to the layer's max_tokens (" +
              std::to_string(half_ / static_cast<std::size_t>(hidden_)) + "), not " +
              std::to_string(tokens) + ".");
  }
  std::size_t rows(int tokens) const {
    return std::size_t(tokens) * hidden_;
  }
  template <class T>
  static T* data(cohort::distributed_buffer<T>& b, std::size_t r) {
    return b.shard(r).data.data();
  }

  void norm(int tokens) {
    const unsigned blocks = static_cast<unsigned>(std::min(tokens, 65535));
    for (std::size_t r = 0; r < group_.size(); ++r)
      cohort::launch(group_.stream(r), {.grid = blocks, .block = threads, .name = "norm_rows"},
                     norm_rows, data(reduced_, r), data(residual_, r), data(gamma_, r),
                     data(out_, r), tokens, hidden_);
  }

  const cohort::device_group& group_;
  cohort::p2p_clique& peers_;
  int hidden_;
  std::size_t half_;
  cohort::distributed_buffer<bf16> partial_, residual_, gamma_, out_, reduced_, staging_;
  cohort::distributed_buffer<unsigned> parity_;
  std::vector<cohort::p2p_handle<bf16>> handles_;
};

// The host's answer for one token row, in double.
inline void reference_row(const std::vector<std::vector<float>>& partial,
                          const std::vector<float>& residual, const std::vector<float>& gamma,
                          std::size_t t, std::size_t hidden, std::vector<double>& out) {
  out.assign(hidden, 0.0);
  double squares = 0.0;
  for (std::size_t e = 0; e < hidden; ++e) {
    double v = residual[t * hidden + e];
    for (const auto& p : partial)
      v += p[t * hidden + e];
    out[e] = v;
    squares += v * v;
  }
  const double scale = 1.0 / std::sqrt(squares / static_cast<double>(hidden) + epsilon);
  for (std::size_t e = 0; e < hidden; ++e)
    out[e] *= scale * gamma[e];
}

} // namespace layer_tail
