// fp16_training.cuh — data_parallel_training's --fp16 run: the same model and batch with half
// weights, activations and gradients, its buckets reduced as the bfloat16 run's are, trained with
// a dynamic loss scale (cohort::loss_scaler). Half has 3 more bits of precision than bfloat16 but
// a far smaller range: this model's loss is a mean over rows · width elements, so its gradients are
// about 1e-6, much of them below half's smallest normal (6e-5) and some below its smallest
// subnormal (6e-8). The loss is multiplied by the scale, the gradients divided by it in the SGD
// kernel, and a step whose gradients overflowed on any GPU is skipped by every GPU together.
#pragma once

#include "mlp.cuh"

#include <cmath>
#include <cstdio>
#include <vector>

namespace fp16 {

// Trains `group`'s replicas in half over `clique` (the p2p engine or NCCL) from the start the
// bfloat16 runs had, and checks the run against theirs: `bf16_losses`, step by step.
template <class Clique>
bool train(Clique& clique, const cohort::device_group& group, const mlp::options& o, float rate,
           const std::vector<double>& bf16_losses, double bf16_ms) {
  const int total = o.warmup + o.steps;
  mlp::basic_model<mlp::half> model(group, o);
  cohort::gradient_buckets<mlp::half> buckets(clique, model.compute_streams());
  for (int l = 0; l < o.layers; ++l)
    buckets.add(model.layer_of(/*gradients=*/true, l));
  // The scale starts where the loss gradient alone overflows half: the loss's gradient is
  // (out - y) / (rows · width) on each GPU, so 2^17 · rows · width makes it (out - y) · 2^17,
  // inf wherever |out - y| > 0.5, which some of the millions of elements are at the start. The
  // first steps are skipped, and the scale backs off (by 4 a time here, so that they cost this
  // short run few steps) until the gradients fit; it doubles after every 8 clean steps (the
  // default is 2000, for runs of many thousand steps).
  const double rows_times_width = static_cast<double>(o.batch) / group.size() * o.width;
  const float start = static_cast<float>(131072.0 * rows_times_width);
  cohort::loss_scaler scaler(buckets, {.initial_scale = start,
                                       .backoff_factor = 0.25f,
                                       .growth_interval = 8,
                                       .max_scale = std::ldexp(1.0f, 64)});
  model.reset();
  buckets.finish();
  auto step = [&](int s) {
    model.forward_backward(s, &buckets, &scaler); // buckets handed over as the backward goes
    scaler.update(buckets); // after the last bucket: the verdict every GPU acts on
    for (int l = o.layers - 1; l >= 0; --l)
      model.sgd_layer(l, rate, &scaler); // unscaled there; nothing done on a skipped step
    buckets.finish();
  };
  for (int s = 0; s < o.warmup; ++s)
    step(s);
  const double ms = mlp::time_steps(model, o.warmup, o.steps, step);
  const std::vector<double> losses = model.losses(total); // waits: the scaler's report is final
  const bool replicas_same = model.replicas_identical();
  const cohort::loss_scale_report seen = scaler.report();

  // Every step trains on the same batch, and a skipped step leaves the weights as they were: the
  // loss of the last step, measured before its update, is the loss after `updates` updates, which
  // bfloat16 reached at its step `updates`.
  const int skipped_before_last = static_cast<int>(seen.skipped) - (seen.last_skipped ? 1 : 0);
  const int updates = total - 1 - skipped_before_last;
  const double bf16_loss = bf16_losses[static_cast<std::size_t>(updates)];
  const double above = (losses.back() - bf16_loss) / bf16_loss;
  std::printf("fp16: half weights, activations and gradients; step time %.3f ms (bfloat16 "
              "%.3f ms)\n",
              ms, bf16_ms);
  std::printf("fp16: loss scale 2^%.0f at the start, 2^%.0f after %llu steps; %llu of them "
              "skipped (an inf or NaN in some GPU's gradients), by every GPU together\n",
              std::log2(start), std::log2(seen.scale), seen.steps, seen.skipped);
  std::printf("fp16: loss %.6f after %d updates, bfloat16 %.6f after as many (%+.2f %%)\n",
              losses.back(), updates, bf16_loss, 100.0 * above);

  bool ok = true;
  auto require = [&](bool condition, const char* what) {
    if (!condition) std::printf("FAILED: %s\n", what);
    ok = ok && condition;
  };
  require(seen.steps == static_cast<unsigned long long>(total), "every step was decided");
  require(seen.skipped >= 1, "the starting scale overflowed half and its step was skipped");
  require(std::isfinite(seen.scale) && seen.scale >= 1.0f, "the scale stays finite");
  require(std::isfinite(losses.back()) && losses.back() < losses.front(), "the fp16 loss falls");
  require(replicas_same, "every GPU's half weights stay identical, bit for bit (each skipped the "
                         "same steps and applied the same mean)");
  // Half rounds the weights 8 times finer than bfloat16, so it may train a little better; a scale
  // that lost the small gradients, or an unscaling off by a factor, trains worse.
  require(above <= 2e-2, "half trains as bfloat16 does after as many updates, within 2 %");
  if (ok) std::puts("fp16 with dynamic loss scaling ok");
  return ok;
}

} // namespace fp16
