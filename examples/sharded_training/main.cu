// sharded_training — data_parallel_training's model (../data_parallel_training/mlp.cuh) trained
// with Adam, whose float master weights and two moments are 12 bytes a parameter, from the same
// start in these ways:
//   data parallel: every GPU holds the whole optimizer state; the gradients are all_reduced;
//   ZeRO stage 2 (--stage 2, the default): GPU i holds the optimizer state and master weights of
//     block i of each layer only (1/n of them): cohort::gradient_buckets reduce-scatters each
//     layer's gradients while the backward goes on, so that GPU i gets the mean of its block (in
//     place: the gradient buffer stays whole, as the backward writes it), GPU i updates that
//     block, and `gather` all-gathers the updated bfloat16 weights to every GPU;
//   ZeRO stage 3 (--stage 3, run beside the two above): GPU i also holds only block i of each
//     layer's weights and gradients (zero3_model.cuh): cohort::sharded_parameters all-gathers a
//     layer's whole weights into a transient buffer before its forward and again before its
//     backward, one layer ahead while the layer before computes, releases them after, and
//     reduce-scatters each layer's gradients into the owners' blocks.
// The program checks that the optimizer memory of the sharded runs, measured in the devices'
// memory pools, is 1/n of the data-parallel one, that stage 2's losses equal data parallel's
// within rounding (both reduce in float in rank order and round once), and that every run follows
// one GPU trained on the whole batch within bfloat16's rounding (as data_parallel_training
// checks); with --stage 3 also that stage 3's weights and gradients take 1/n of data parallel's
// memory, with at most two layers' weights and gradients gathered at once, and that its losses
// equal data parallel's within bfloat16's rounding (its micro-batches' gradients are reduced one
// by one and summed in bfloat16). It prints the memory per GPU, the losses and the step times.
//
//   build/examples/sharded_training [--stage 2|3] [--layers 8 --width 2048 --batch 8192
//                                    --micro-batches 2 --steps 20 --comm-blocks 32] [--nccl]
//
// With --nccl the collectives run on an NCCL clique over every visible GPU (one rank a GPU)
// instead of the p2p engine.
#include "../data_parallel_training/mlp.cuh"
#include "zero3_model.cuh"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

// Adam's state for `elements` parameters on each member, zero moments.
struct adam_state {
  std::vector<cohort::device_buffer<float>> master, m, v;
  template <class Model>
  adam_state(const Model& model, std::size_t elements) {
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
// allocates from them), after the model's work so far: what the state really takes, as the
// allocator sees it, not what the program meant to allocate.
template <class Model>
long long pool_bytes_in_use(const Model& model, const cohort::device_group& group) {
  model.synchronize();
  std::vector<int> seen;
  unsigned long long total = 0;
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
  return static_cast<long long>(total);
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

// `--stage 2|3` taken out of the arguments (mlp::options::parse reads the rest); 2 if not given.
int take_stage(int& argc, char** argv) {
  int stage = 2;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--stage") != 0) continue;
    if (a + 1 >= argc || (std::strcmp(argv[a + 1], "2") != 0 && std::strcmp(argv[a + 1], "3") != 0))
      throw std::invalid_argument("--stage takes 2 or 3");
    stage = argv[a + 1][0] - '0';
    for (int b = a; b + 2 <= argc; ++b)
      argv[b] = argv[b + 2];
    argc -= 2;
    --a;
  }
  return stage;
}

// What one way of training measured: the loss of every step, the time of a step, and what a GPU
// holds for the model's weights, its gradients, Adam's state (bytes), and the most it held at
// once in transient gathered buffers.
struct run {
  std::vector<double> losses;
  double ms = 0;
  std::size_t weights = 0, gradients = 0, optimizer = 0, transient = 0;
  long long measured = 0; // the pools' growth, all GPUs together, for what the run holds sharded
};

// The collectives' engine: cohort's p2p clique, or (--nccl) an NCCL clique.
struct engines {
  std::optional<cohort::p2p_clique> peers;
#if COHORT_WITH_NCCL
  std::optional<cohort::nccl_clique> nccl;
#endif
  engines(const cohort::device_group& group, const mlp::options& o) {
#if COHORT_WITH_NCCL
    if (o.nccl) {
      nccl.emplace(group);
      return;
    }
#else
    if (o.nccl) throw std::invalid_argument("--nccl needs cohort built with NCCL");
#endif
    peers.emplace(group, cohort::p2p_clique_options{.max_blocks = o.comm_blocks});
  }
  cohort::gradient_buckets<mlp::bf16> buckets(std::vector<cohort::stream_ref> compute,
                                              cohort::gradient_bucket_options options = {}) {
#if COHORT_WITH_NCCL
    if (nccl) return {*nccl, std::move(compute), options};
#endif
    return {*peers, std::move(compute), options};
  }
  cohort::sharded_parameters<mlp::bf16> parameters(std::vector<cohort::stream_ref> compute,
                                                   cohort::sharded_parameter_options options) {
#if COHORT_WITH_NCCL
    if (nccl) return {*nccl, std::move(compute), std::move(options)};
#endif
    return {*peers, std::move(compute), std::move(options)};
  }
};

// Data parallel (stage 0) or ZeRO stage 2 on the replicas of `model`.
run replicated(engines& e, mlp::model& model, const cohort::device_group& group,
               const mlp::options& o, float rate, bool sharded) {
  const std::size_t n = group.size(), stride = model.stride(), block = stride / n;
  const int layers = o.layers;
  run r;
  cohort::gradient_buckets<mlp::bf16> buckets = e.buckets(
      model.compute_streams(), {.reduction = sharded ? cohort::bucket_reduction::reduce_scatter
                                                     : cohort::bucket_reduction::all_reduce});
  for (int l = 0; l < layers; ++l)
    buckets.add(model.layer_of(/*gradients=*/true, l));
  model.reset();
  const long long before = pool_bytes_in_use(model, group);
  adam_state state(model, sharded ? block * layers : model.parameters());
  r.measured = pool_bytes_in_use(model, group) - before;
  r.weights = r.gradients = model.parameters() * sizeof(mlp::bf16);
  r.optimizer = state.bytes_per_member();
  // Member i's state covers the whole model, or block i of each layer at l * block.
  for (std::size_t i = 0; i < n; ++i)
    for (int l = 0; l < layers; ++l)
      cohort::launch(model.compute(i), mlp::grid_for(block), mlp::to_float,
                     model.weights(i, l) + (sharded ? i * block : 0),
                     state.master[i].data() + (sharded ? l * block : l * stride),
                     sharded ? block : stride);
  buckets.finish();
  auto step = [&](int s) {
    model.forward_backward(s, &buckets); // each bucket reduced as its layer is done
    for (int l = layers - 1; l >= 0; --l) {
      buckets.wait(l);
      for (std::size_t i = 0; i < n; ++i) {
        if (!sharded) {
          state.update(model.compute(i), i, model.grads(i, l), model.weights(i, l), l * stride,
                       stride, adam_at(s, rate));
          continue;
        }
        const cuda::std::span<mlp::bf16> mine = buckets.shard(l, i); // block i of the mean
        state.update(model.compute(i), i, mine.data(), model.weights(i, l) + i * block, l * block,
                     block, adam_at(s, rate));
      }
      if (sharded) buckets.gather(l, model.layer_of(/*gradients=*/false, l)); // to every GPU
    }
    buckets.finish();
  };
  for (int s = 0; s < o.warmup; ++s)
    step(s);
  r.ms = mlp::time_steps(model, o.warmup, o.steps, step);
  r.losses = model.losses(o.warmup + o.steps);
  return r;
}

// ZeRO stage 3: weights, gradients and Adam's state all sharded (zero3_model.cuh).
run stage3(engines& e, const cohort::device_group& group, const mlp::options& o, float rate) {
  const std::size_t n = group.size();
  const int layers = o.layers;
  run r;
  zero3::model model(group, o);
  std::vector<cohort::memory_resource_ref> memory; // the transient buffers, counted by the group
  for (std::size_t i = 0; i < n; ++i)
    memory.push_back(group.memory_resource(i));
  cohort::sharded_parameters<mlp::bf16> params =
      e.parameters(model.compute_streams(), {.memory = memory});
  const long long before = pool_bytes_in_use(model, group);
  model.attach(params);
  const std::size_t block = model.block();
  adam_state state(model, block * layers);
  r.measured = pool_bytes_in_use(model, group) - before;
  r.weights = model.weight_bytes();
  r.gradients = model.gradient_bytes();
  r.optimizer = state.bytes_per_member();
  model.reset();
  for (std::size_t i = 0; i < n; ++i)
    cohort::launch(model.compute(i), mlp::grid_for(block * layers), mlp::to_float,
                   model.weights(i, 0), state.master[i].data(), block * layers);
  params.finish();
  auto step = [&](int s) {
    model.forward_backward(s, params);
    for (int l = layers - 1; l >= 0; --l) {
      params.wait(l); // its gradients' blocks reduced (and summed over the micro-batches)
      for (std::size_t i = 0; i < n; ++i)
        state.update(model.compute(i), i, model.gradient(i, l), model.weights(i, l), l * block,
                     block, adam_at(s, rate));
    }
    params.finish(); // the next step's gathers read the updated shards
  };
  for (int s = 0; s < o.warmup; ++s)
    step(s);
  r.ms = mlp::time_steps(model, o.warmup, o.steps, step);
  r.losses = model.losses(o.warmup + o.steps);
  r.transient = model.transient_peak();
  return r;
}

// One GPU, the whole batch, the whole optimizer state, nothing to reduce: the reference the runs
// above are checked against, as data_parallel_training checks its runs (a data-parallel run that
// matched a sharded one that was wrong the same way would pass the check between them).
std::vector<double> one_gpu(const mlp::options& o, float rate) {
  cohort::device_group one({cohort::device_ref{0}});
  mlp::model single(one, o);
  single.reset();
  adam_state state(single, single.parameters());
  cohort::launch(single.compute(0), mlp::grid_for(single.parameters()), mlp::to_float,
                 single.weights(0, 0), state.master[0].data(), single.parameters());
  const std::size_t stride = single.stride();
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    single.forward_backward(s, nullptr);
    for (int l = o.layers - 1; l >= 0; --l)
      state.update(single.compute(0), 0, single.grads(0, l), single.weights(0, l), l * stride,
                   stride, adam_at(s, rate));
  }
  return single.losses(o.warmup + o.steps);
}

double mib(double bytes) {
  return bytes / 1048576.0;
}

} // namespace

int main(int argc, char** argv) {
  if (mlp::no_gpu()) return 0;
  const int stage = take_stage(argc, argv);
  const mlp::options o = mlp::options::parse(argc, argv);
  const int total = o.warmup + o.steps;
  const float rate = 0.05f / static_cast<float>(o.width); // Adam's learning rate
  cohort::device_group group = o.nccl ? cohort::device_group(cohort::devices())
                                      : cohort::device_group::every_gpu_or_emulated(2);
  const std::size_t n = group.size();
  engines e(group, o);

  // The replicated runs, one model reset between them; stage 3 in a model of its own. Each run's
  // memory is measured while it alone holds optimizer state; one GPU runs last.
  run dp, z2, z3;
  mlp::model model(group, o); // kept until the end: its memory's frees race no pool measure
  dp = replicated(e, model, group, o, rate, /*sharded=*/false);
  z2 = replicated(e, model, group, o, rate, /*sharded=*/true);
  model.synchronize(); // the last run's state freed before stage 3 measures the pools
  if (stage == 3) z3 = stage3(e, group, o, rate);
  const std::vector<double> single_losses = one_gpu(o, rate);

  std::printf("model: %d layers of %d x %d, bfloat16 storage, float arithmetic, Adam; %zu %s "
              "GPU(s)%s, %d rows a step\n",
              o.layers, o.width, o.width, n, group.is_emulated() ? "emulated" : "real",
              o.nccl ? " over NCCL" : "", o.batch);
  std::printf("memory per GPU, MiB    weights  gradients  optimizer  gathered (peak)\n");
  auto row = [&](const char* name, const run& r, bool gathers) {
    std::printf("  %-18s %9.1f  %9.1f  %9.1f  ", name, mib(r.weights), mib(r.gradients),
                mib(r.optimizer));
    if (gathers)
      std::printf("%9.1f\n", mib(r.transient));
    else
      std::printf("%9s\n", "-");
  };
  row("data parallel", dp, false);
  row("ZeRO stage 2", z2, false);
  if (stage == 3) row("ZeRO stage 3", z3, true);
  std::printf("optimizer memory per GPU (master weights + 2 moments, float): data parallel %.1f "
              "MiB, sharded %.1f MiB = %.4f of it (1/n = %.4f)\n",
              mib(dp.optimizer), mib(z2.optimizer),
              static_cast<double>(z2.optimizer) / dp.optimizer, 1.0 / n);
  const double measured_share = static_cast<double>(z2.measured) / static_cast<double>(dp.measured);
  std::printf("as the memory pools saw it, all GPUs together: data parallel %.1f MiB, sharded %.1f "
              "MiB = %.4f of it\n",
              mib(dp.measured), mib(z2.measured), measured_share);
  std::printf("step time: data parallel %.3f ms, sharded %.3f ms\n", dp.ms, z2.ms);
  const double difference = mlp::largest_difference(z2.losses, dp.losses);
  std::printf("loss: %.6f at step 0, %.6f at step %d (data parallel %.6f); largest relative "
              "difference %.2e\n",
              z2.losses.front(), z2.losses.back(), total - 1, dp.losses.back(), difference);
  double vs_one = std::max(mlp::largest_difference(z2.losses, single_losses),
                           mlp::largest_difference(dp.losses, single_losses));
  const double z3_vs_dp = stage == 3 ? mlp::largest_difference(z3.losses, dp.losses) : 0.0;
  if (stage == 3) {
    vs_one = std::max(vs_one, mlp::largest_difference(z3.losses, single_losses));
    std::printf("stage 3 per GPU against data parallel: weights %.4f, gradients %.4f, optimizer "
                "%.4f of it (1/n = %.4f), and up to %.1f MiB gathered at once\n",
                static_cast<double>(z3.weights) / dp.weights,
                static_cast<double>(z3.gradients) / dp.gradients,
                static_cast<double>(z3.optimizer) / dp.optimizer, 1.0 / n, mib(z3.transient));
    std::printf("step time: stage 3 %.3f ms, stage 2 %.3f ms (stage 3 / stage 2 = %.2f)\n", z3.ms,
                z2.ms, z3.ms / z2.ms);
    std::printf("stage 3 loss: %.6f at step %d (data parallel %.6f); largest relative difference "
                "from data parallel %.2e\n",
                z3.losses.back(), total - 1, dp.losses.back(), z3_vs_dp);
  }
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
  require(dp.measured >= static_cast<long long>(n * dp.optimizer) &&
              z2.measured >= static_cast<long long>(n * z2.optimizer),
          "the memory pools saw the optimizer state allocated");
  // Each of the 3 buffers of each member may be rounded up by the pool (2 MiB granules).
  const double granule = 2.0 * 1048576.0;
  require(std::fabs(static_cast<double>(z2.measured) - static_cast<double>(dp.measured) / n) <=
              3.0 * n * granule,
          "the sharded optimizer state, as the memory pools saw it, is 1/n of the data-parallel "
          "one");
  require(difference <= 1e-6, "the sharded losses equal the data-parallel ones within rounding");
  // The tolerance data_parallel_training allows between n GPUs and one: the mean gradient comes
  // out of a different reduction order and is rounded to bfloat16, and Adam carries that on.
  require(vs_one <= 2e-2, "n GPUs train as one does, within bfloat16's rounding");
  require(std::isfinite(z2.losses.back()) && z2.losses.back() < 0.95 * z2.losses.front(),
          "the loss falls by 5 % or more");
  if (stage == 3) {
    // The shards of the weights, the gradients (and their sum) and Adam's 3 buffers, on every
    // member, as the pools saw them: each buffer rounded up to at most one granule.
    const std::size_t held = z3.weights + z3.gradients + z3.optimizer;
    require(z3.measured >= static_cast<long long>(n * held) &&
                static_cast<double>(z3.measured) <= n * (held + 6.0 * granule),
            "the memory pools saw stage 3's shards allocated, and no more");
    // A shard is the layer's 1/n, rounded up to 16 bytes.
    const double share = 1.0 / n + 16.0 * o.layers / static_cast<double>(dp.weights);
    require(static_cast<double>(z3.weights) / dp.weights <= share &&
                static_cast<double>(z3.optimizer) / dp.optimizer <= share,
            "stage 3 holds 1/n of the weights and of the optimizer state a GPU");
    // At most two layers gathered at once, each with its gradients: the gathers were released.
    const double layer = static_cast<double>(z3.weights) / o.layers * n;
    require(z3.transient > 0 && z3.transient <= 4.0 * layer,
            "stage 3 gathers at most two layers (weights and gradients) at once");
    require(z3_vs_dp <= 2e-2, "stage 3 trains as data parallel does, within bfloat16's rounding");
    require(std::isfinite(z3.losses.back()) && z3.losses.back() < 0.95 * z3.losses.front(),
            "stage 3's loss falls by 5 % or more");
  }
  if (!ok) return 1;
  std::printf("sharded_training ok%s\n", stage == 3 ? " (stage 3)" : "");
  return 0;
}
