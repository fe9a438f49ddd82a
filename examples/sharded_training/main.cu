// sharded_training — data_parallel_training's model (../data_parallel_training/mlp.cuh) trained
// with Adam, whose float master weights and two moments are 12 bytes a parameter, two ways on
// every GPU from the same start:
//   data parallel: every GPU holds the whole optimizer state; the gradients are all_reduced;
//   sharded (ZeRO): GPU i holds the optimizer state and master weights of block i of each layer
//     only (1/n of them): cohort::gradient_buckets reduce-scatters each layer's gradients while
//     the backward goes on, so that GPU i gets the mean of its block, GPU i updates that block,
//     and `gather` all-gathers the updated bfloat16 weights to every GPU.
// The program checks that the optimizer memory of the sharded run, measured in the devices'
// memory pools, is 1/n of the data-parallel one and that the losses are equal within rounding (both reduce in float in rank
// order and round once, so they come out the same), that both follow one GPU trained on the whole
// batch within bfloat16's rounding (as data_parallel_training checks), and prints the losses and
// the step times.
//
//   build/examples/sharded_training [--layers 8 --width 2048 --batch 8192 --micro-batches 2
//                                    --steps 20 --comm-blocks 32]
#include "../data_parallel_training/mlp.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace {

// Adam's state for `elements` parameters on each member, zero moments.
struct adam_state {
  std::vector<cohort::device_buffer<float>> master, m, v;
  adam_state(const mlp::model& model, std::size_t elements) {
    for (std::size_t i = 0; i < model.members(); ++i) {
      master.emplace_back(elements, model.compute(i));
      m.emplace_back(elements, model.compute(i));
      v.emplace_back(elements, model.compute(i));
      m.back().fill_bytes(0);
      v.back().fill_bytes(0);
    }
  }
  std::size_t bytes_per_member() const {
    return master[0].size_bytes() + m[0].size_bytes() + v[0].size_bytes();
  }
  // Adam on `n` elements of member i: the gradients and weights from g and w, the state from
  // element `first` of its own.
  void update(cohort::stream_ref s, std::size_t i, const mlp::bf16* g, mlp::bf16* w,
              std::size_t first, std::size_t n, const mlp::adam_step& step) {
    cohort::launch(s, mlp::grid_for(n), mlp::adam, g, w, master[i].data() + first,
                   m[i].data() + first, v[i].data() + first, n, step);
  }
};

// The bytes in use in the stream-ordered memory pools of the group's devices (device_buffer
// allocates from them), after the group's work so far: what the optimizer state really takes, as
// the allocator sees it, not what the program meant to allocate.
std::size_t pool_bytes_in_use(const mlp::model& model, const cohort::device_group& group) {
  model.synchronize();
  std::vector<int> seen;
  std::size_t total = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const int device = group.device(i).get();
    if (std::find(seen.begin(), seen.end(), device) != seen.end()) continue; // emulated members
    seen.push_back(device);
    cudaMemPool_t pool = nullptr;
    unsigned long long used = 0;
    cohort::check_cuda(cudaDeviceGetMemPool(&pool, device), "cudaDeviceGetMemPool", device);
    cohort::check_cuda(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used),
                       "cudaMemPoolGetAttribute", device);
    total += used;
  }
  return total;
}

mlp::adam_step adam_at(int step, float rate) {
  const float beta1 = 0.9f, beta2 = 0.999f;
  return {rate,
          beta1,
          beta2,
          1e-8f,
          1.0f - std::pow(beta1, static_cast<float>(step + 1)),
          1.0f - std::pow(beta2, static_cast<float>(step + 1))};
}

} // namespace

int main(int argc, char** argv) {
  if (mlp::no_gpu()) return 0;
  const mlp::options o = mlp::options::parse(argc, argv);
  const int total = o.warmup + o.steps;
  const float rate = 0.05f / static_cast<float>(o.width); // Adam's learning rate
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  const std::size_t n = group.size();
  cohort::p2p_clique peers(group, cohort::p2p_clique_options{.max_blocks = o.comm_blocks});
  mlp::model model(group, o);
  const std::size_t stride = model.stride(), block = stride / n; // a layer, and a GPU's block
  const int layers = o.layers;

  // Data parallel: all of every layer's state on every member.
  std::vector<double> dp_losses;
  double t_dp = 0;
  std::size_t dp_bytes = 0;
  long long dp_measured = 0; // signed: a pool that shrank would show as a negative growth
  {
    cohort::gradient_buckets<mlp::bf16> buckets(peers, model.compute_streams());
    for (int l = 0; l < layers; ++l)
      buckets.add(model.layer_of(/*gradients=*/true, l));
    model.reset();
    const std::size_t before = pool_bytes_in_use(model, group);
    adam_state state(model, model.parameters());
    dp_bytes = state.bytes_per_member();
    dp_measured =
        static_cast<long long>(pool_bytes_in_use(model, group)) - static_cast<long long>(before);
    for (std::size_t i = 0; i < n; ++i)
      cohort::launch(model.compute(i), mlp::grid_for(model.parameters()), mlp::to_float,
                     model.weights(i, 0), state.master[i].data(), model.parameters());
    buckets.finish();
    auto step = [&](int s) {
      model.forward_backward(s, &buckets);
      for (int l = layers - 1; l >= 0; --l) {
        buckets.wait(l);
        for (std::size_t i = 0; i < n; ++i)
          state.update(model.compute(i), i, model.grads(i, l), model.weights(i, l), l * stride,
                       stride, adam_at(s, rate));
      }
      buckets.finish();
    };
    for (int s = 0; s < o.warmup; ++s)
      step(s);
    t_dp = mlp::time_steps(model, o.warmup, o.steps, step);
    dp_losses = model.losses(total);
  }

  // Sharded: member i's state covers block i of each layer, at l * block in its own buffers.
  std::vector<double> zero_losses;
  double t_zero = 0;
  std::size_t zero_bytes = 0;
  long long zero_measured = 0;
  {
    cohort::gradient_buckets<mlp::bf16> shards(
        peers, model.compute_streams(), {.reduction = cohort::bucket_reduction::reduce_scatter});
    for (int l = 0; l < layers; ++l)
      shards.add(model.layer_of(/*gradients=*/true, l));
    model.reset();
    const std::size_t before = pool_bytes_in_use(model, group);
    adam_state state(model, block * layers);
    zero_bytes = state.bytes_per_member();
    zero_measured =
        static_cast<long long>(pool_bytes_in_use(model, group)) - static_cast<long long>(before);
    for (std::size_t i = 0; i < n; ++i)
      for (int l = 0; l < layers; ++l)
        cohort::launch(model.compute(i), mlp::grid_for(block), mlp::to_float,
                       model.weights(i, l) + i * block, state.master[i].data() + l * block, block);
    shards.finish();
    auto step = [&](int s) {
      model.forward_backward(s, &shards); // each bucket reduce-scattered as its layer is done
      for (int l = layers - 1; l >= 0; --l) {
        shards.wait(l);
        for (std::size_t i = 0; i < n; ++i) {
          const cuda::std::span<mlp::bf16> mine = shards.shard(l, i); // block i of the mean
          state.update(model.compute(i), i, mine.data(), model.weights(i, l) + i * block, l * block,
                       block, adam_at(s, rate));
        }
        shards.gather(l, model.layer_of(/*gradients=*/false, l)); // every block to every GPU
      }
      shards.finish();
    };
    for (int s = 0; s < o.warmup; ++s)
      step(s);
    t_zero = mlp::time_steps(model, o.warmup, o.steps, step);
    zero_losses = model.losses(total);
  }

  // One GPU, the whole batch, the whole optimizer state, nothing to reduce: the reference both
  // runs above are checked against, as data_parallel_training checks its runs (a data-parallel
  // run that matched a sharded one that was wrong the same way would pass the check between
  // them). Run last, so that its memory is no part of the pools' measures above.
  std::vector<double> single_losses;
  {
    cohort::device_group one({cohort::device_ref{0}});
    mlp::model single(one, o);
    single.reset();
    adam_state state(single, single.parameters());
    cohort::launch(single.compute(0), mlp::grid_for(single.parameters()), mlp::to_float,
                   single.weights(0, 0), state.master[0].data(), single.parameters());
    const std::size_t single_stride = single.stride();
    for (int s = 0; s < total; ++s) {
      single.forward_backward(s, nullptr);
      for (int l = layers - 1; l >= 0; --l)
        state.update(single.compute(0), 0, single.grads(0, l), single.weights(0, l),
                     l * single_stride, single_stride, adam_at(s, rate));
    }
    single_losses = single.losses(total);
  }

  std::printf("model: %d layers of %d x %d, bfloat16 storage, float arithmetic, Adam; %zu %s "
              "GPU(s), %d rows a step\n",
              layers, o.width, o.width, n, group.is_emulated() ? "emulated" : "real", o.batch);
  std::printf("optimizer memory per GPU (master weights + 2 moments, float): data parallel %.1f "
              "MiB, sharded %.1f MiB = %.4f of it (1/n = %.4f)\n",
              dp_bytes / 1048576.0, zero_bytes / 1048576.0,
              static_cast<double>(zero_bytes) / dp_bytes, 1.0 / n);
  const double measured_share =
      static_cast<double>(zero_measured) / static_cast<double>(dp_measured);
  std::printf("as the memory pools saw it, all GPUs together: data parallel %.1f MiB, sharded %.1f "
              "MiB = %.4f of it\n",
              dp_measured / 1048576.0, zero_measured / 1048576.0, measured_share);
  std::printf("step time: data parallel %.3f ms, sharded %.3f ms\n", t_dp, t_zero);
  const double difference = mlp::largest_difference(zero_losses, dp_losses);
  std::printf("loss: %.6f at step 0, %.6f at step %d (data parallel %.6f); largest relative "
              "difference %.2e\n",
              zero_losses.front(), zero_losses.back(), total - 1, dp_losses.back(), difference);
  const double vs_one = std::max(mlp::largest_difference(zero_losses, single_losses),
                                 mlp::largest_difference(dp_losses, single_losses));
  std::printf("1 GPU, the whole batch: loss %.6f at step %d; largest relative difference of the "
              "%zu-GPU runs from it %.2e\n",
              single_losses.back(), total - 1, n, vs_one);

  bool ok = true;
  auto require = [&](bool condition, const char* what) {
    if (!condition) std::printf("FAILED: %s\n", what);
    ok = ok && condition;
  };
  // Measured, not computed: the pools must have grown by at least the state each run made on every
  // member, and the sharded run's growth must be 1/n of the data-parallel one's (within the
  // pools' rounding of each allocation).
  require(dp_measured >= static_cast<long long>(n * dp_bytes) &&
              zero_measured >= static_cast<long long>(n * zero_bytes),
          "the memory pools saw the optimizer state allocated");
  // Each of the 3 buffers of each member may be rounded up by the pool (2 MiB granules).
  const double slack = 3.0 * static_cast<double>(n) * 2.0 * 1048576.0;
  require(std::fabs(static_cast<double>(zero_measured) - static_cast<double>(dp_measured) / n) <=
              slack,
          "the sharded optimizer state, as the memory pools saw it, is 1/n of the data-parallel "
          "one");
  require(difference <= 1e-6, "the sharded losses equal the data-parallel ones within rounding");
  // The tolerance data_parallel_training allows between n GPUs and one: the mean gradient comes
  // out of a different reduction order and is rounded to bfloat16, and Adam carries that on.
  require(vs_one <= 2e-2, "n GPUs train as one does, within bfloat16's rounding");
  require(std::isfinite(zero_losses.back()) && zero_losses.back() < 0.95 * zero_losses.front(),
          "the loss falls by 5 % or more");
  if (!ok) return 1;
  std::puts("sharded_training ok");
  return 0;
}
