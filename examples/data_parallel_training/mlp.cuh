// mlp.cuh — the model that data_parallel_training and sharded_training train: a stack of square
// layers (width × width weights, ReLU between them, none after the last), weights, activations and
// gradients stored in bfloat16 (`model`) or half (`basic_model<half>`, trained with a loss
// scale), every product and sum in float (cuBLAS with CUBLAS_COMPUTE_32F), trained to map random
// inputs x to relu(x) under the mean squared error. Each member of a group
// holds a replica (its weights, its share of the batch, its gradients) and runs it on a compute
// stream of its own, beside the clique's stream where the gradients are reduced.
#pragma once

#include "../common/cublas_handle.cuh"

#include <cohort/cohort.cuh>

#include <cub/block/block_reduce.cuh>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlp {

using bf16 = __nv_bfloat16;
using half = __half;

// The two storage types through float (explicitly: the same code builds for either).
__device__ inline float wide(bf16 v) {
  return __bfloat162float(v);
}
__device__ inline float wide(half v) {
  return __half2float(v);
}
template <class T>
__device__ T narrow(float v) {
  if constexpr (std::is_same_v<T, half>)
    return __float2half(v);
  else
    return __float2bfloat16(v);
}
template <class T>
inline constexpr cudaDataType_t cuda_type_of = std::is_same_v<T, half> ? CUDA_R_16F : CUDA_R_16BF;

struct options {
  int layers = 8;
  int width = 2048;
  int batch = 8192;          // rows per step, over all members
  int micro_batches = 2;     // per member and step, accumulated before the reduction
  int warmup = 3;            // steps before the timed ones
  int steps = 20;            // timed steps
  unsigned comm_blocks = 32; // blocks per GPU the collectives may use (0: half of the SMs)
  bool nccl = false;         // the gradients reduced through NCCL instead of the p2p engine
  bool fp16 = false;         // also a half run with a dynamic loss scale (data_parallel_training)
  // data_parallel_training's one process per GPU (--nccl under a launcher):
  bool one_rank = false; // in a world of one rank on GPU 0, without a launcher
  std::string id_file;   // where rank 0 leaves the NCCL id for the others (empty: the default)

  // --layers L --width H --batch R --micro-batches M --steps S --comm-blocks B --nccl --fp16
  // --one-rank --id-file PATH
  static options parse(int argc, char** argv) {
    options o;
    for (int a = 1; a < argc; a += 2) {
      const std::string name = argv[a];
      bool* const flag = name == "--nccl"       ? &o.nccl
                         : name == "--fp16"     ? &o.fp16
                         : name == "--one-rank" ? &o.one_rank
                                                : nullptr;
      if (flag != nullptr) {
        *flag = true;
        --a; // a flag: no value follows
        continue;
      }
      if (a + 1 >= argc) throw std::invalid_argument("option " + name + " needs a value");
      if (name == "--id-file") {
        o.id_file = argv[a + 1];
        continue;
      }
      const int value = std::atoi(argv[a + 1]);
      if (name == "--layers")
        o.layers = value;
      else if (name == "--width")
        o.width = value;
      else if (name == "--batch")
        o.batch = value;
      else if (name == "--micro-batches")
        o.micro_batches = value;
      else if (name == "--steps")
        o.steps = value;
      else if (name == "--comm-blocks")
        o.comm_blocks = static_cast<unsigned>(value);
      else
        throw std::invalid_argument("unknown option " + name);
    }
    if (o.layers < 2 || o.width < 8 || o.micro_batches < 1 || o.steps < 1 ||
        o.batch % (8 * o.micro_batches) != 0)
      throw std::invalid_argument("need --layers >= 2, --width >= 8, and a batch that splits into "
                                  "micro-batches over up to 8 GPUs");
    return o;
  }
};

// True, having said so, where no GPU is visible (the examples then exit quietly).
inline bool no_gpu() {
  if (cohort::device_count() > 0) return false;
  std::puts("No GPU is visible: nothing to run.");
  return true;
}

// One cuBLAS handle bound to one stream (../common/cublas_handle.cuh: with a workspace of its
// own, so that cuBLAS never allocates during a GEMM that a bucket's all_reduce may wait for).
class blas {
 public:
  explicit blas(cohort::stream_ref stream)
      : stream_(stream)
      , handle_(stream) {}
  // C (m × n) = op(A) · op(B) + beta · C, column-major bfloat16 or half, accumulated in float.
  template <class T>
  void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, const T* a, int lda,
            const T* b, int ldb, float beta, T* c, int ldc) {
    cohort::scoped_device on(handle_.device());
    const float one = 1.0f;
    constexpr cudaDataType_t type = cuda_type_of<T>;
    check_cublas(cublasGemmEx(handle_.on(stream_), transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                              transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, a, type, lda,
                              b, type, ldb, &beta, c, type, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx", handle_.device().get());
  }

 private:
  cohort::stream_ref stream_;
  cublas_handle handle_;
};

// A value in [-1, 1) from two indices (the same on every GPU and in every run).
__host__ __device__ inline float uniform(std::size_t a, std::size_t b) {
  unsigned long long h =
      a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<float>(h >> 40) / static_cast<float>(1ull << 23) - 1.0f;
}

inline constexpr int threads = 256;
inline constexpr unsigned loss_blocks = 264;

// Element e of layer l's weights (laid out with `stride` elements a layer; the padding is 0):
// uniform in ±0.7·sqrt(6 / width), a little under He's bound, so that 8 layers start calm.
template <class T>
__global__ void init_weights(T* w, std::size_t total, std::size_t stride, int width) {
  const float bound = 0.7f * sqrtf(6.0f / static_cast<float>(width));
  const std::size_t area = static_cast<std::size_t>(width) * width;
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += gridDim.x * blockDim.x) {
    const std::size_t layer = k / stride, e = k % stride;
    w[k] = narrow<T>(e < area ? bound * uniform(1000 + layer, e) : 0.0f);
  }
}

// Rows [first, first + rows) of the batch: inputs x and targets relu(x).
template <class T>
__global__ void init_batch(T* x, T* y, std::size_t first, std::size_t rows, int width) {
  const std::size_t n = rows * width;
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const T v = narrow<T>(uniform(first + k / width, k % width));
    x[k] = v;
    y[k] = narrow<T>(fmaxf(wide(v), 0.0f));
  }
}

template <class T>
__global__ void relu(T* x, std::size_t n) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    x[k] = narrow<T>(fmaxf(wide(x[k]), 0.0f));
}

// d := d where the layer's output was positive, else 0 (ReLU's derivative).
template <class T>
__global__ void relu_backward(T* d, const T* out, std::size_t n) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    if (!(wide(out[k]) > 0.0f)) d[k] = narrow<T>(0.0f);
}

// The last layer: d = (out - y) · scale · the loss scale (1 without a scaler), and each block's
// share of Σ ½ (out - y)² (unscaled) in partial[block].
template <class T>
__global__ void __launch_bounds__(threads)
    loss_gradient(const T* out, const T* y, T* d, std::size_t n, float scale, float* partial,
                  cohort::loss_scale_view loss_scale) {
  const float factor = scale * loss_scale.scale();
  float sum = 0.0f;
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const float diff = wide(out[k]) - wide(y[k]);
    d[k] = narrow<T>(diff * factor);
    sum += 0.5f * diff * diff;
  }
  using reduce = cub::BlockReduce<float, threads>;
  __shared__ typename reduce::TempStorage scratch;
  const float block_sum = reduce(scratch).Sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = block_sum;
}

// loss += the partials, in order (the same bits in every run).
__global__ void add_partials(const float* partial, unsigned n, float* loss) {
  float sum = 0.0f;
  for (unsigned b = 0; b < n; ++b)
    sum += partial[b];
  *loss += sum;
}

// Plain SGD: w -= rate · g, in float, rounded once. Under a loss scale the gradients are
// unscaled here (times its inverse), and a step the scaler skips changes nothing.
template <class T>
__global__ void sgd(T* w, const T* g, std::size_t n, float rate,
                    cohort::loss_scale_view loss_scale) {
  if (loss_scale.skip()) return;
  const float step = rate * loss_scale.inverse_scale();
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    w[k] = narrow<T>(wide(w[k]) - step * wide(g[k]));
}

// Adam over n elements: float master weights and moments, the bfloat16 weights written from the
// master. c1, c2: the bias corrections 1 - beta1^t, 1 - beta2^t.
struct adam_step {
  float rate, beta1, beta2, epsilon, c1, c2;
};
__global__ void adam(const bf16* g, bf16* w, float* master, float* m, float* v, std::size_t n,
                     adam_step s) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const float grad = __bfloat162float(g[k]);
    const float mk = s.beta1 * m[k] + (1.0f - s.beta1) * grad;
    const float vk = s.beta2 * v[k] + (1.0f - s.beta2) * grad * grad;
    m[k] = mk;
    v[k] = vk;
    const float updated = master[k] - s.rate * (mk / s.c1) / (sqrtf(vk / s.c2) + s.epsilon);
    master[k] = updated;
    w[k] = __float2bfloat16(updated);
  }
}

__global__ void to_float(const bf16* w, float* master, std::size_t n) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    master[k] = __bfloat162float(w[k]);
}

inline cohort::launch_config grid_for(std::size_t n) {
  const std::size_t blocks = (n + threads - 1) / threads;
  return {.grid = static_cast<unsigned>(blocks < 1056 ? (blocks > 0 ? blocks : 1) : 1056),
          .block = threads};
}

// The mean loss of each of the first `steps` steps over the replicas (each with its losses and
// compute stream), scaled per element as options `o` says; waits for the compute streams. Each
// replica's sum is divided by the whole batch's elements, so that where a process holds part of
// the batch the sum of every process's values is the mean.
template <class Replicas>
std::vector<double> mean_losses(const Replicas& replicas, const options& o, int steps) {
  std::vector<double> mean(static_cast<std::size_t>(steps), 0.0);
  std::vector<float> host(static_cast<std::size_t>(o.warmup + o.steps));
  for (const auto& r : replicas) {
    r->losses[0].copy_to_host(host);
    r->compute.synchronize();
    for (int s = 0; s < steps; ++s)
      mean[s] += host[s] / (static_cast<double>(o.batch) * o.width);
  }
  return mean;
}

// The part of the batch one process holds: part `index` of `count` equal parts, which its
// members split between them. One process per GPU holds part comm.rank() of comm.size(); one
// process driving every GPU, the whole batch.
struct batch_part {
  std::size_t index = 0;
  std::size_t count = 1;
};

// Every member's replica of the model, its part of the batch and its compute stream; T is the
// storage type of the weights, activations and gradients.
template <class T>
class basic_model {
 public:
  basic_model(const cohort::device_group& group, const options& o, batch_part part = {})
      : o_(o)
      , members_(group.size())
      , rows_(static_cast<std::size_t>(o.batch) / (group.size() * part.count))
      , micro_rows_(rows_ / static_cast<std::size_t>(o.micro_batches))
      , area_(static_cast<std::size_t>(o.width) * o.width) {
    // Each layer padded to a multiple of 8 elements per member of every part: every member's
    // block of it (sharded_training) starts 16-byte aligned, as the collectives' wide path wants.
    const std::size_t unit = 8 * members_ * part.count;
    stride_ = (area_ + unit - 1) / unit * unit;
    const std::size_t activation = micro_rows_ * o.width;
    for (std::size_t i = 0; i < members_; ++i) {
      replicas_.push_back(std::make_unique<replica>(group.new_stream(i)));
      replica& r = *replicas_.back();
      cohort::stream_ref s = r.compute;
      r.weights.emplace_back(stride_ * o.layers, s);
      r.grads.emplace_back(stride_ * o.layers, s);
      r.x.emplace_back(rows_ * o.width, s);
      r.y.emplace_back(rows_ * o.width, s);
      for (int l = 0; l < o.layers; ++l)
        r.activations.emplace_back(activation, s);
      r.d.emplace_back(activation, s);
      r.d.emplace_back(activation, s);
      r.partial.emplace_back(loss_blocks, s);
      r.losses.emplace_back(static_cast<std::size_t>(o.warmup + o.steps), s);
      r.gemm = std::make_unique<blas>(s);
      cohort::launch(s, grid_for(rows_ * o.width), init_batch<T>, r.x[0].data(), r.y[0].data(),
                     (part.index * members_ + i) * rows_, rows_, o.width);
    }
  }

  std::size_t members() const { return members_; }
  std::size_t stride() const { return stride_; }
  std::size_t parameters() const { return stride_ * o_.layers; }
  int layers() const { return o_.layers; }
  cohort::stream_ref compute(std::size_t i) const { return replicas_[i]->compute; }
  std::vector<cohort::stream_ref> compute_streams() const {
    std::vector<cohort::stream_ref> s;
    for (const auto& r : replicas_)
      s.push_back(r->compute);
    return s;
  }
  T* weights(std::size_t i, int layer) { return replicas_[i]->weights[0].data() + layer * stride_; }
  T* grads(std::size_t i, int layer) { return replicas_[i]->grads[0].data() + layer * stride_; }
  std::vector<cuda::std::span<T>> layer_of(bool gradients, int layer) {
    std::vector<cuda::std::span<T>> spans;
    for (std::size_t i = 0; i < members_; ++i)
      spans.emplace_back(gradients ? grads(i, layer) : weights(i, layer), stride_);
    return spans;
  }

  // The same starting weights on every member, gradients and losses zero.
  void reset() {
    for (auto& r : replicas_) {
      cohort::launch(r->compute, grid_for(parameters()), init_weights<T>, r->weights[0].data(),
                     parameters(), stride_, o_.width);
      r->grads[0].fill_bytes(0);
      r->losses[0].fill_bytes(0);
    }
  }

  // Step `step`'s forward and backward over every micro-batch on every member, the gradients
  // accumulated; with `buckets`, layer l's bucket is handed over as soon as the last
  // micro-batch's backward has produced it (the rest of the backward overlaps its reduction).
  // With `scaler`, the loss is multiplied by its scale (read on the device: the host never waits).
  void forward_backward(int step, cohort::gradient_buckets<T>* buckets,
                        const cohort::loss_scaler* scaler = nullptr) {
    const int w = o_.width, r = static_cast<int>(micro_rows_);
    const std::size_t n = micro_rows_ * w;
    const float scale = 1.0f / static_cast<float>(rows_ * w); // the mean over this member's rows
    for (int micro = 0; micro < o_.micro_batches; ++micro) {
      const float beta = micro == 0 ? 0.0f : 1.0f; // the first micro-batch overwrites
      for (std::size_t i = 0; i < members_; ++i) {
        replica& p = *replicas_[i];
        for (int l = 0; l < o_.layers; ++l) {
          T* out = p.activations[l].data();
          p.gemm->gemm(false, false, w, r, w, weights(i, l), w, input(i, micro, l), w, 0.0f, out,
                       w);
          if (l + 1 < o_.layers) cohort::launch(p.compute, grid_for(n), relu<T>, out, n);
        }
        cohort::launch(p.compute, {.grid = loss_blocks, .block = threads}, loss_gradient<T>,
                       p.activations[o_.layers - 1].data(), p.y[0].data() + micro * n,
                       p.d[0].data(), n, scale, p.partial[0].data(),
                       scaler != nullptr ? scaler->view(i) : cohort::loss_scale_view{});
        cohort::launch(p.compute, {.grid = 1, .block = 1}, add_partials, p.partial[0].data(),
                       loss_blocks, p.losses[0].data() + step);
      }
      for (int l = o_.layers - 1; l >= 0; --l) {
        for (std::size_t i = 0; i < members_; ++i) { // dW += d · inᵀ
          replica& p = *replicas_[i];
          const T* d = p.d[(o_.layers - 1 - l) % 2].data();
          p.gemm->gemm(false, true, w, w, r, d, w, input(i, micro, l), w, beta, grads(i, l), w);
        }
        if (buckets != nullptr && micro + 1 == o_.micro_batches) buckets->ready(l);
        if (l == 0) continue;                        // the input needs no gradient
        for (std::size_t i = 0; i < members_; ++i) { // the gradient of layer l - 1's output
          replica& p = *replicas_[i];
          const T* d = p.d[(o_.layers - 1 - l) % 2].data();
          T* next = p.d[(o_.layers - l) % 2].data();
          p.gemm->gemm(true, false, w, r, w, weights(i, l), w, d, w, 0.0f, next, w);
          cohort::launch(p.compute, grid_for(n), relu_backward<T>, next,
                         p.activations[l - 1].data(), n);
        }
      }
    }
  }

  // Layer l's input on member i in micro-batch `micro`: the batch's rows, or layer l - 1's output.
  const T* input(std::size_t i, int micro, int l) const {
    const replica& p = *replicas_[i];
    return l == 0 ? p.x[0].data() + micro * micro_rows_ * o_.width : p.activations[l - 1].data();
  }

  // Plain SGD on layer `layer` of every member (their gradients already reduced); with
  // `scaler`, after its update: the gradients unscaled, the step skipped where it says so.
  void sgd_layer(int layer, float rate, const cohort::loss_scaler* scaler = nullptr) {
    for (std::size_t i = 0; i < members_; ++i)
      cohort::launch(compute(i), grid_for(stride_), mlp::sgd<T>, weights(i, layer), grads(i, layer),
                     stride_, rate,
                     scaler != nullptr ? scaler->view(i) : cohort::loss_scale_view{});
  }

  // The mean loss of each step so far, or this process's share of it where it holds part of the
  // batch (waits for the compute streams).
  std::vector<double> losses(int steps) const { return mlp::mean_losses(replicas_, o_, steps); }

  void synchronize() const {
    for (const auto& r : replicas_)
      r->compute.synchronize();
  }

  // Whether every member's weights equal member 0's, bit for bit (waits for the compute streams).
  // Data parallelism keeps the replicas identical; a missing or wrong reduction lets them drift
  // apart, while the losses could still fall and stay near one GPU's.
  bool replicas_identical() const {
    const std::vector<T> first = weights_on_host(0);
    for (std::size_t i = 1; i < members_; ++i)
      if (std::memcmp(weights_on_host(i).data(), first.data(), parameters() * sizeof(T)) != 0)
        return false;
    return true;
  }

  // Member i's weights, every layer with its padding (waits for its compute stream).
  std::vector<T> weights_on_host(std::size_t i) const {
    std::vector<T> host(parameters());
    replicas_[i]->weights[0].copy_to_host(host);
    replicas_[i]->compute.synchronize();
    return host;
  }

 private:
  // One member's buffers (vectors, since device_buffer has no empty state), declared after the
  // stream they free on so that they go before it, and the cuBLAS handle bound to it.
  struct replica {
    explicit replica(cohort::stream s)
        : compute(std::move(s)) {}
    cohort::stream compute;
    std::vector<cohort::device_buffer<T>> weights, grads, x, y, activations, d;
    std::vector<cohort::device_buffer<float>> partial, losses;
    std::unique_ptr<blas> gemm;
  };

  options o_;
  std::size_t members_, rows_, micro_rows_, area_, stride_ = 0;
  std::vector<std::unique_ptr<replica>> replicas_;
};

using model = basic_model<bf16>;

// Times `steps` calls of `step` (host-timed, every stream idle at both ends), in ms per call, of
// any model with synchronize() (this one, or sharded_training's stage 3 model).
template <class Model, class Step>
double time_steps(const Model& m, int first_step, int steps, Step&& step) {
  m.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s)
    step(first_step + s);
  m.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         steps;
}

// The largest |a - b| / |b| over two runs' losses.
// The largest relative difference between two loss curves; infinite where they differ in length
// or either holds a NaN (which fmax would skip), so that a check against it can fail.
inline double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t s = 0; s < a.size(); ++s) {
    if (a[s] == b[s]) continue;
    const double d = std::fabs(a[s] - b[s]) / std::fabs(b[s]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

} // namespace mlp
