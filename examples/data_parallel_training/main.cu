// data_parallel_training — data-parallel training of a multi-layer model (mlp.cuh: 8 layers of
// 2048 × 2048 weights, bfloat16 storage, float arithmetic, cuBLAS, a real backward pass) with the
// batch split over the GPUs, the gradients accumulated over micro-batches, and their mean taken by
// cohort::gradient_buckets: one bucket a layer, handed to the clique's stream as soon as the last
// micro-batch's backward has produced it, so that its all_reduce runs while the backward of the
// layers below goes on (as PyTorch DDP does), and each layer's SGD update runs as soon as its
// bucket is back. Three runs from the same start, each timed: one GPU with the whole batch (no
// reduction); every GPU with the all_reduces after the whole backward; every GPU with them
// overlapped. The program checks that the loss falls, that every GPU's weights stay identical to
// the bit after each multi-GPU run, and that the runs agree (the two multi-GPU runs to the bit,
// one GPU within bfloat16's rounding), and prints the step times, the share of
// the step the all_reduces take without overlap and the scaling efficiency T1 / (n · Tn).
//
//   build/examples/data_parallel_training [--layers 8 --width 2048 --batch 8192
//                                          --micro-batches 2 --steps 20 --comm-blocks 32]
//                                          [--nccl] [--fp16]
//
// With --nccl the buckets are reduced by an NCCL clique over every visible GPU (real GPUs only:
// NCCL puts one rank on a GPU; with one GPU visible, a clique of one) instead of the p2p engine.
// With --fp16 a fourth run trains the model in half with a dynamic loss scale (fp16_training.cuh:
// cohort::loss_scaler) and prints the scale, the skipped steps and its loss against bfloat16's.
//
// Sizing, for 2 H200s over NVLink: 8 layers of 2048² bfloat16 are 64 MiB of gradients a step,
// which the peer-to-peer all_reduce moves as 8 calls of 8 MiB (about 37 µs each at the ~225 GB/s
// busbw docs/performance.md has for 8 MiB: ~0.3 ms a step). A step is 6 · 2048² · 8 · 8192 ≈
// 1.6 TFLOP: ~2.6 ms on one H200 at ~600 TFLOP/s of bfloat16 GEMM, ~1.3 ms on each of two, so that
// the all_reduces are ~18 % of a step without overlap, and the backward of the last micro-batch
// (~0.45 ms) is long enough to hide all of them but the first layer's. The collectives get 32
// blocks a GPU (a quarter of the SMs), so that the GEMMs they overlap keep most of the GPU.
#include "fp16_training.cuh"
#include "mlp.cuh"

#include <cstdio>
#include <optional>
#include <tuple>
#include <utility>

int main(int argc, char** argv) {
  if (mlp::no_gpu()) return 0;
  const mlp::options o = mlp::options::parse(argc, argv);
  const int total = o.warmup + o.steps;
  const float rate = 5.0f; // SGD's learning rate (steady for this model and loss, see mlp.cuh)
  cohort::device_group group = o.nccl ? cohort::device_group(cohort::devices())
                                      : cohort::device_group::every_gpu_or_emulated(2);
  const std::size_t n = group.size();

  // One GPU, the whole batch: nothing to reduce.
  cohort::device_group one({cohort::device_ref{0}});
  mlp::model single(one, o);
  single.reset();
  auto single_step = [&](int s) {
    single.forward_backward(s, nullptr);
    for (int l = o.layers - 1; l >= 0; --l)
      single.sgd_layer(l, rate);
  };
  for (int s = 0; s < o.warmup; ++s)
    single_step(s);
  const double t1 = mlp::time_steps(single, o.warmup, o.steps, single_step);
  const std::vector<double> single_losses = single.losses(total);

  // Every GPU: the model's compute streams produce the gradients, the clique's streams reduce them.
  std::optional<cohort::p2p_clique> peers;
  if (!o.nccl) peers.emplace(group, cohort::p2p_clique_options{.max_blocks = o.comm_blocks});
  mlp::model model(group, o);
#if COHORT_WITH_NCCL
  std::optional<cohort::nccl_clique> nccl;
  if (o.nccl) nccl.emplace(group);
  cohort::gradient_buckets<mlp::bf16> buckets =
      o.nccl ? cohort::gradient_buckets<mlp::bf16>(*nccl, model.compute_streams())
             : cohort::gradient_buckets<mlp::bf16>(*peers, model.compute_streams());
#else
  if (o.nccl) {
    std::puts("--nccl needs cohort built with NCCL (COHORT_WITH_NCCL)");
    return 1;
  }
  cohort::gradient_buckets<mlp::bf16> buckets(*peers, model.compute_streams());
#endif
  for (int l = 0; l < o.layers; ++l)
    buckets.add(model.layer_of(/*gradients=*/true, l)); // bucket l: layer l's gradients
  auto train = [&](bool overlap) {
    model.reset();
    buckets.finish(); // the compute streams after the clique's earlier work
    auto step = [&](int s) {
      model.forward_backward(s, overlap ? &buckets : nullptr);
      if (!overlap) { // every all_reduce after the whole backward, and the update after them all
        for (int l = o.layers - 1; l >= 0; --l)
          buckets.ready(l);
        buckets.finish();
      }
      for (int l = o.layers - 1; l >= 0; --l) { // each layer's update once its mean is back
        buckets.wait(l);
        model.sgd_layer(l, rate);
      }
      buckets.finish();
    };
    for (int s = 0; s < o.warmup; ++s)
      step(s);
    const double t = mlp::time_steps(model, o.warmup, o.steps, step);
    return std::tuple{t, model.losses(total), model.replicas_identical()};
  };
  const auto [t_plain, plain, plain_replicas_same] = train(false);
  const auto [t_overlap, overlapped, overlapped_replicas_same] = train(true);
  // The all_reduces alone, as a step has them (the gradients' values no longer matter).
  const double t_reduce = mlp::time_steps(model, 0, o.steps, [&](int) {
    for (int l = o.layers - 1; l >= 0; --l)
      buckets.ready(l);
    buckets.finish();
  });

  const double mib = static_cast<double>(model.parameters()) * sizeof(mlp::bf16) / (1 << 20);
  std::printf("model: %d layers of %d x %d, bfloat16 storage, float arithmetic; %d rows a step, "
              "%d micro-batches a GPU; %.1f MiB of gradients in %d buckets\n",
              o.layers, o.width, o.width, o.batch, o.micro_batches, mib, o.layers);
  if (o.nccl)
    std::printf("group: %zu real GPU(s); the collectives run on NCCL\n", n);
  else
    std::printf("group: %zu %s GPU(s); the collectives use %u blocks a GPU\n", n,
                group.is_emulated() ? "emulated" : "real", peers->max_blocks());
  std::printf("step time: 1 GPU %.3f ms | %zu GPUs, all_reduce after the backward %.3f ms | "
              "%zu GPUs, bucketed all_reduce overlapping the backward %.3f ms\n",
              t1, n, t_plain, n, t_overlap);
  std::printf("all_reduce alone: %.3f ms a step (%.1f GB/s busbw), %.1f %% of the step without "
              "overlap\n",
              t_reduce, 2.0 * (n - 1) / n * mib * (1 << 20) / (t_reduce * 1e6),
              100.0 * t_reduce / t_plain);
  std::printf("scaling efficiency T1 / (%zu Tn): %.3f without overlap, %.3f with overlap "
              "(speed-up %.2f)\n",
              n, t1 / (n * t_plain), t1 / (n * t_overlap), t1 / t_overlap);
  if (group.is_emulated())
    std::puts(
        "(emulated GPUs share one GPU: the times show that the code runs, not how it scales)");
  std::printf("loss: %.6f at step 0, %.6f at step %d (1 GPU: %.6f)\n", overlapped.front(),
              overlapped.back(), total - 1, single_losses.back());

  bool ok = true;
  auto require = [&](bool condition, const char* what) {
    if (!condition) std::printf("FAILED: %s\n", what);
    ok = ok && condition;
  };
  for (const auto* run : {&single_losses, &plain, &overlapped})
    require(std::isfinite(run->back()) && run->back() < 0.95 * run->front(),
            "the loss falls by 5 % or more");
  const double same = mlp::largest_difference(overlapped, plain);
  const double close = mlp::largest_difference(overlapped, single_losses);
  std::printf("largest relative difference of the losses: overlap vs no overlap %.2e, %zu GPUs "
              "vs 1 GPU %.2e\n",
              same, n, close);
  require(same <= 1e-6, "overlapping changes no result");
  require(plain_replicas_same && overlapped_replicas_same,
          "every GPU's weights stay identical, bit for bit (each applied the same mean)");
  require(close <= 2e-2, "n GPUs train as one does, within bfloat16's rounding");
  if (o.fp16) {
#if COHORT_WITH_NCCL
    const bool trained = o.nccl ? fp16::train(*nccl, group, o, rate, overlapped, t_overlap)
                                : fp16::train(*peers, group, o, rate, overlapped, t_overlap);
#else
    const bool trained = fp16::train(*peers, group, o, rate, overlapped, t_overlap);
#endif
    ok = trained && ok;
  }
  if (!ok) return 1;
  std::puts("data_parallel_training ok");
  return 0;
}
