// zero3_model.cuh — data_parallel_training's model (../data_parallel_training/mlp.cuh: the same
// layers, batch, loss and starting weights) with its weights sharded over the GPUs, as ZeRO
// stage 3 holds them: member i keeps block i of every layer's weights and of its gradients, and
// cohort::sharded_parameters all-gathers a layer's whole weights into a transient buffer just
// before its forward (one layer ahead, while the layer before computes), again before its
// backward, and releases them after; each layer's gradients are reduce-scattered into the
// owners' blocks as soon as its backward has made them.
#pragma once

#include "../data_parallel_training/mlp.cuh"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

namespace zero3 {

using mlp::bf16;

// Member `first / block`'s shard of every layer: element e of layer l as mlp::init_weights makes
// it for a replica (the padding past the layer's area 0), at l * block + (e - first).
__global__ void init_shards(bf16* w, int layers, std::size_t block, std::size_t first, int width) {
  const float bound = 0.7f * sqrtf(6.0f / static_cast<float>(width));
  const std::size_t area = static_cast<std::size_t>(width) * width, total = layers * block;
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += gridDim.x * blockDim.x) {
    const std::size_t layer = k / block, e = first + k % block;
    w[k] = __float2bfloat16(e < area ? bound * mlp::uniform(1000 + layer, e) : 0.0f);
  }
}

// The same arithmetic as mlp.cuh's kernels of these names (and no loss scale).
__global__ void init_batch(bf16* x, bf16* y, std::size_t first, std::size_t rows, int width) {
  const std::size_t n = rows * width;
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const bf16 v = __float2bfloat16(mlp::uniform(first + k / width, k % width));
    x[k] = v;
    y[k] = __float2bfloat16(fmaxf(__bfloat162float(v), 0.0f));
  }
}
__global__ void relu(bf16* x, std::size_t n) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    x[k] = __float2bfloat16(fmaxf(__bfloat162float(x[k]), 0.0f));
}
__global__ void relu_backward(bf16* d, const bf16* out, std::size_t n) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    if (!(__bfloat162float(out[k]) > 0.0f)) d[k] = __float2bfloat16(0.0f);
}
__global__ void __launch_bounds__(mlp::threads)
    loss_gradient(const bf16* out, const bf16* y, bf16* d, std::size_t n, float scale,
                  float* partial) {
  float sum = 0.0f;
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const float diff = __bfloat162float(out[k]) - __bfloat162float(y[k]);
    d[k] = __float2bfloat16(diff * scale);
    sum += 0.5f * diff * diff;
  }
  using reduce = cub::BlockReduce<float, mlp::threads>;
  __shared__ typename reduce::TempStorage scratch;
  const float block_sum = reduce(scratch).Sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = block_sum;
}
// The micro-batches' reduced gradients added up: sum = g (the first) or sum + g, rounded once.
__global__ void accumulate(const bf16* g, bf16* sum, std::size_t n, bool first) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    sum[k] = first ? g[k] : __float2bfloat16(__bfloat162float(sum[k]) + __bfloat162float(g[k]));
}

class model {
 public:
  model(const cohort::device_group& group, const mlp::options& o)
      : o_(o)
      , group_(&group)
      , members_(group.size())
      , rows_(static_cast<std::size_t>(o.batch) / group.size())
      , micro_rows_(rows_ / static_cast<std::size_t>(o.micro_batches))
      , area_(static_cast<std::size_t>(o.width) * o.width) {
    for (std::size_t i = 0; i < members_; ++i) {
      replicas_.push_back(std::make_unique<replica>(group.new_stream(i)));
      replica& r = *replicas_.back();
      cohort::stream_ref s = r.compute;
      r.x.emplace_back(rows_ * o.width, s);
      r.y.emplace_back(rows_ * o.width, s);
      for (int l = 0; l < o.layers; ++l)
        r.activations.emplace_back(micro_rows_ * o.width, s);
      r.d.emplace_back(micro_rows_ * o.width, s);
      r.d.emplace_back(micro_rows_ * o.width, s);
      r.partial.emplace_back(mlp::loss_blocks, s);
      r.losses.emplace_back(static_cast<std::size_t>(o.warmup + o.steps), s);
      r.gemm = std::make_unique<mlp::blas>(s);
      cohort::launch(s, mlp::grid_for(rows_ * o.width), init_batch, r.x[0].data(), r.y[0].data(),
                     i * rows_, rows_, o.width);
    }
  }

  // Allocates every member's shards of the weights and gradients (and, with micro-batches, of
  // their sum) and hands each layer to `params`: a layer of width² parameters.
  void attach(cohort::sharded_parameters<bf16>& params) {
    block_ = params.shard_size(area_);
    const std::size_t n = block_ * o_.layers;
    for (auto& r : replicas_) {
      r->weights.emplace_back(n, r->compute);
      r->grads.emplace_back(n, r->compute);
      if (o_.micro_batches > 1) r->sums.emplace_back(n, r->compute);
    }
    for (int l = 0; l < o_.layers; ++l) {
      std::vector<cuda::std::span<bf16>> w, g;
      for (auto& r : replicas_) {
        w.emplace_back(r->weights[0].data() + l * block_, block_);
        g.emplace_back(r->grads[0].data() + l * block_, block_);
      }
      params.add(area_, std::move(w), std::move(g));
    }
  }

  std::size_t members() const { return members_; }
  std::size_t block() const { return block_; }
  cohort::stream_ref compute(std::size_t i) const { return replicas_[i]->compute; }
  std::vector<cohort::stream_ref> compute_streams() const {
    std::vector<cohort::stream_ref> s;
    for (const auto& r : replicas_)
      s.push_back(r->compute);
    return s;
  }
  // Member i's block of layer l: its weights, and the step's mean gradient of it.
  bf16* weights(std::size_t i, int l) { return replicas_[i]->weights[0].data() + l * block_; }
  bf16* gradient(std::size_t i, int l) {
    replica& r = *replicas_[i];
    return (r.sums.empty() ? r.grads[0].data() : r.sums[0].data()) + l * block_;
  }
  // Bytes a member holds for its shards of the weights, and of the gradients (with their sum).
  std::size_t weight_bytes() const { return replicas_[0]->weights[0].size_bytes(); }
  std::size_t gradient_bytes() const {
    const replica& r = *replicas_[0];
    return r.grads[0].size_bytes() + (r.sums.empty() ? 0 : r.sums[0].size_bytes());
  }
  // The most the group's members held at once in transient buffers (sampled after each gather).
  std::size_t transient_peak() const { return peak_; }

  // The same starting weights as mlp's model (each member its block of them), losses zero.
  void reset() {
    for (std::size_t i = 0; i < members_; ++i) {
      replica& r = *replicas_[i];
      cohort::launch(r.compute, mlp::grid_for(block_ * o_.layers), init_shards, r.weights[0].data(),
                     o_.layers, block_, i * block_, o_.width);
      r.losses[0].fill_bytes(0);
    }
    base_.clear();
    for (std::size_t i = 0; i < members_; ++i)
      base_.push_back(group_->memory_held(i).bytes);
  }

  // Step `step`'s forward and backward over every micro-batch: each layer gathered before its
  // forward and again before its backward, one layer ahead; its gradients reduce-scattered as
  // soon as they are made. With micro-batches the reduced blocks are summed on the compute streams.
  void forward_backward(int step, cohort::sharded_parameters<bf16>& params) {
    const int w = o_.width, r = static_cast<int>(micro_rows_), layers = o_.layers;
    const std::size_t n = micro_rows_ * w;
    const float scale = 1.0f / static_cast<float>(rows_ * w); // the mean over this member's rows
    for (int micro = 0; micro < o_.micro_batches; ++micro) {
      gather(params, 0, cohort::gather_for::forward);
      for (int l = 0; l < layers; ++l) {
        if (l + 1 < layers) gather(params, l + 1, cohort::gather_for::forward);
        params.wait(l);
        for (std::size_t i = 0; i < members_; ++i) {
          replica& p = *replicas_[i];
          bf16* out = p.activations[l].data();
          p.gemm->gemm(false, false, w, r, w, params.full(l, i).data(), w, input(i, micro, l), w,
                       0.0f, out, w);
          if (l + 1 < layers) cohort::launch(p.compute, mlp::grid_for(n), relu, out, n);
        }
        params.release(l);
      }
      for (std::size_t i = 0; i < members_; ++i) {
        replica& p = *replicas_[i];
        cohort::launch(p.compute, {.grid = mlp::loss_blocks, .block = mlp::threads}, loss_gradient,
                       p.activations[layers - 1].data(), p.y[0].data() + micro * n, p.d[0].data(),
                       n, scale, p.partial[0].data());
        cohort::launch(p.compute, {.grid = 1, .block = 1}, mlp::add_partials, p.partial[0].data(),
                       mlp::loss_blocks, p.losses[0].data() + step);
      }
      gather(params, layers - 1, cohort::gather_for::backward);
      for (int l = layers - 1; l >= 0; --l) {
        if (l > 0) gather(params, l - 1, cohort::gather_for::backward);
        params.wait(l);
        for (std::size_t i = 0; i < members_; ++i) { // dW = d · inᵀ, the whole layer's
          replica& p = *replicas_[i];
          p.gemm->gemm(false, true, w, w, r, p.d[(layers - 1 - l) % 2].data(), w,
                       input(i, micro, l), w, 0.0f, params.full_gradients(l, i).data(), w);
        }
        params.reduce_gradients(l); // its mean, block i to member i, while the backward goes on
        for (std::size_t i = 0; l > 0 && i < members_; ++i) { // the gradient of l - 1's output
          replica& p = *replicas_[i];
          const bf16* d = p.d[(layers - 1 - l) % 2].data();
          bf16* next = p.d[(layers - l) % 2].data();
          p.gemm->gemm(true, false, w, r, w, params.full(l, i).data(), w, d, w, 0.0f, next, w);
          cohort::launch(p.compute, mlp::grid_for(n), relu_backward, next,
                         p.activations[l - 1].data(), n);
        }
        params.release(l);
      }
      for (int l = 0; o_.micro_batches > 1 && l < layers; ++l) {
        params.wait(l);
        for (std::size_t i = 0; i < members_; ++i)
          cohort::launch(compute(i), mlp::grid_for(block_), accumulate,
                         replicas_[i]->grads[0].data() + l * block_, gradient(i, l), block_,
                         micro == 0);
      }
    }
  }

  // The mean loss of each step so far (waits for the compute streams).
  std::vector<double> losses(int steps) const { return mlp::mean_losses(replicas_, o_, steps); }
  void synchronize() const {
    for (const auto& r : replicas_)
      r->compute.synchronize();
  }

 private:
  struct replica {
    explicit replica(cohort::stream s)
        : compute(std::move(s)) {}
    cohort::stream compute;
    std::vector<cohort::device_buffer<bf16>> weights, grads, sums, x, y, activations, d;
    std::vector<cohort::device_buffer<float>> partial, losses;
    std::unique_ptr<mlp::blas> gemm;
  };

  // Layer l's input on member i in micro-batch `micro`: the batch's rows, or layer l - 1's output.
  const bf16* input(std::size_t i, int micro, int l) const {
    const replica& p = *replicas_[i];
    return l == 0 ? p.x[0].data() + micro * micro_rows_ * o_.width : p.activations[l - 1].data();
  }

  // A gather, and what the members' transient buffers hold after it (the group counts them).
  void gather(cohort::sharded_parameters<bf16>& params, int l, cohort::gather_for purpose) {
    params.gather(l, purpose);
    std::size_t held = 0;
    for (std::size_t i = 0; i < members_; ++i)
      held += group_->memory_held(i).bytes - base_[i];
    peak_ = std::max(peak_, held / members_);
  }

  mlp::options o_;
  const cohort::device_group* group_;
  std::size_t members_, rows_, micro_rows_, area_, block_ = 0, peak_ = 0;
  std::vector<std::size_t> base_;
  std::vector<std::unique_ptr<replica>> replicas_;
};

} // namespace zero3
