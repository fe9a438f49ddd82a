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
//   mpirun -np 2 build/examples/data_parallel_training --nccl [--id-file /shared/job.id]
//   build/examples/data_parallel_training --nccl --one-rank
//
// With --nccl the buckets are reduced by an NCCL clique over every visible GPU (real GPUs only:
// NCCL puts one rank on a GPU; with one GPU visible, a clique of one) instead of the p2p engine.
// Started by a launcher (mpirun, srun, torchrun), --nccl runs one process per GPU instead, as
// training past one machine does: each rank trains its part of the batch on its own GPU and
// reduces the buckets through its rank of a communicator, whose NCCL id rank 0 leaves in
// --id-file (by default in /tmp, which serves one node; across nodes, a path they share); the
// losses are combined and the weights compared over the ranks, and each rank prints "rank R ok".
// --one-rank runs that path in a world of one rank on GPU 0, without a launcher.
// With --fp16 (one process only) a fourth run trains the model in half with a dynamic loss scale
// (fp16_training.cuh: cohort::loss_scaler) and prints the scale, the skipped steps and its loss
// against bfloat16's.
//
// Sizing, for 2 H200s over NVLink: 8 layers of 2048² bfloat16 are 64 MiB of gradients a step,
// which the peer-to-peer all_reduce moves as 8 calls of 8 MiB (about 37 µs each at the ~225 GB/s
// busbw docs/performance.md has for 8 MiB: ~0.3 ms a step). A step is 6 · 2048² · 8 · 8192 ≈
// 1.6 TFLOP: ~2.6 ms on one H200 at ~600 TFLOP/s of bfloat16 GEMM, ~1.3 ms on each of two, so that
// the all_reduces are ~18 % of a step without overlap, and the backward of the last micro-batch
// (~0.45 ms) is long enough to hide all of them but the first layer's. The collectives get 32
// blocks a GPU (a quarter of the SMs), so that the GEMMs they overlap keep most of the GPU.
#include "../common/launcher.cuh"
#include "fp16_training.cuh"
#include "mlp.cuh"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr float rate = 5.0f; // SGD's learning rate (steady for this model and loss, see mlp.cuh)

// A run's step time, its loss at every step, and whether every replica ended with the same weights.
struct run {
  double ms;
  std::vector<double> losses;
  bool replicas_same = true;
};

// One GPU, the whole batch: nothing to reduce. The reference every data-parallel run must match.
run train_one_gpu(cohort::device_ref device, const mlp::options& o) {
  cohort::device_group one({device});
  mlp::model single(one, o);
  single.reset();
  auto step = [&](int s) {
    single.forward_backward(s, nullptr);
    for (int l = o.layers - 1; l >= 0; --l)
      single.sgd_layer(l, rate);
  };
  for (int s = 0; s < o.warmup; ++s)
    step(s);
  const double ms = mlp::time_steps(single, o.warmup, o.steps, step);
  return {ms, single.losses(o.warmup + o.steps)};
}

// Where this process drives every member (the p2p engine or an NCCL clique), its model is the
// whole run: its losses are the world's, and its replicas are all there is to compare.
struct every_member_here {
  std::vector<double> losses(const mlp::model& model, int steps) const {
    return model.losses(steps);
  }
  bool replicas_identical(const mlp::model& model) const { return model.replicas_identical(); }
};

struct data_parallel_runs {
  run plain;        // every all_reduce after the whole backward
  run overlapped;   // each bucket's all_reduce beside the backward of the layers below it
  double reduce_ms; // the all_reduces alone, as a step has them
};

// Both data-parallel runs from the same start, the compute streams producing the gradients and
// the buckets' engine reducing them; `world` says what the losses and the replicas are over all
// processes (every_member_here, or ranks_of_world for one process per GPU).
template <class World>
data_parallel_runs train_data_parallel(mlp::model& model,
                                       cohort::gradient_buckets<mlp::bf16>& buckets,
                                       const mlp::options& o, World& world) {
  const int total = o.warmup + o.steps;
  for (int l = 0; l < o.layers; ++l)
    buckets.add(model.layer_of(/*gradients=*/true, l)); // bucket l: layer l's gradients
  auto train = [&](bool overlap) {
    model.reset();
    buckets.finish(); // the compute streams after the collectives' earlier work
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
    const double ms = mlp::time_steps(model, o.warmup, o.steps, step);
    std::vector<double> losses = world.losses(model, total);
    return run{ms, std::move(losses), world.replicas_identical(model)};
  };
  data_parallel_runs r;
  r.plain = train(false);
  r.overlapped = train(true);
  // The gradients' values no longer matter here.
  r.reduce_ms = mlp::time_steps(model, 0, o.steps, [&](int) {
    for (int l = o.layers - 1; l >= 0; --l)
      buckets.ready(l);
    buckets.finish();
  });
  return r;
}

// The timing lines: the model, then `describe_group()`'s line, then the steps of the one-GPU run
// and of the runs on `n` GPUs, and the losses.
template <class DescribeGroup>
void print_times(const mlp::options& o, const mlp::model& model, std::size_t n, bool emulated,
                 const run& single, const data_parallel_runs& r, DescribeGroup&& describe_group) {
  const double mib = static_cast<double>(model.parameters()) * sizeof(mlp::bf16) / (1 << 20);
  std::printf("model: %d layers of %d x %d, bfloat16 storage, float arithmetic; %d rows a step, "
              "%d micro-batches a GPU; %.1f MiB of gradients in %d buckets\n",
              o.layers, o.width, o.width, o.batch, o.micro_batches, mib, o.layers);
  describe_group();
  const double t1 = single.ms, t_plain = r.plain.ms, t_overlap = r.overlapped.ms;
  std::printf("step time: 1 GPU %.3f ms | %zu GPUs, all_reduce after the backward %.3f ms | "
              "%zu GPUs, bucketed all_reduce overlapping the backward %.3f ms\n",
              t1, n, t_plain, n, t_overlap);
  std::printf("all_reduce alone: %.3f ms a step (%.1f GB/s busbw), %.1f %% of the step without "
              "overlap\n",
              r.reduce_ms, 2.0 * (n - 1) / n * mib * (1 << 20) / (r.reduce_ms * 1e6),
              100.0 * r.reduce_ms / t_plain);
  std::printf("scaling efficiency T1 / (%zu Tn): %.3f without overlap, %.3f with overlap "
              "(speed-up %.2f)\n",
              n, t1 / (n * t_plain), t1 / (n * t_overlap), t1 / t_overlap);
  if (emulated)
    std::puts(
        "(emulated GPUs share one GPU: the times show that the code runs, not how it scales)");
  std::printf("loss: %.6f at step 0, %.6f at step %d (1 GPU: %.6f)\n", r.overlapped.losses.front(),
              r.overlapped.losses.back(), o.warmup + o.steps - 1, single.losses.back());
}

// The checks every mode makes, each failure said; `print` also prints how far the runs' losses
// are apart.
bool checks_pass(std::size_t n, const run& single, const data_parallel_runs& r, bool print) {
  bool ok = true;
  auto require = [&](bool condition, const char* what) {
    if (!condition) std::printf("FAILED: %s\n", what);
    ok = ok && condition;
  };
  for (const run* each : {&single, &r.plain, &r.overlapped})
    require(std::isfinite(each->losses.back()) && each->losses.back() < 0.95 * each->losses.front(),
            "the loss falls by 5 % or more");
  const double same = mlp::largest_difference(r.overlapped.losses, r.plain.losses);
  const double close = mlp::largest_difference(r.overlapped.losses, single.losses);
  if (print)
    std::printf("largest relative difference of the losses: overlap vs no overlap %.2e, %zu GPUs "
                "vs 1 GPU %.2e\n",
                same, n, close);
  require(same <= 1e-6, "overlapping changes no result");
  require(r.plain.replicas_same && r.overlapped.replicas_same,
          "every GPU's weights stay identical, bit for bit (each applied the same mean)");
  require(close <= 2e-2, "n GPUs train as one does, within bfloat16's rounding");
  return ok;
}

// One process driving every GPU (or emulated GPUs): the p2p engine, or with --nccl a clique.
int train_in_one_process(const mlp::options& o) {
  cohort::device_group group = o.nccl ? cohort::device_group(cohort::devices())
                                      : cohort::device_group::every_gpu_or_emulated(2);
  const std::size_t n = group.size();
  const run single = train_one_gpu(cohort::device_ref{0}, o);

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
  every_member_here world;
  const data_parallel_runs r = train_data_parallel(model, buckets, o, world);
  print_times(o, model, n, group.is_emulated(), single, r, [&] {
    if (o.nccl)
      std::printf("group: %zu real GPU(s); the collectives run on NCCL\n", n);
    else
      std::printf("group: %zu %s GPU(s); the collectives use %u blocks a GPU\n", n,
                  group.is_emulated() ? "emulated" : "real", peers->max_blocks());
  });
  bool ok = checks_pass(n, single, r, /*print=*/true);
  if (o.fp16) {
#if COHORT_WITH_NCCL
    const bool trained =
        o.nccl ? fp16::train(*nccl, group, o, rate, r.overlapped.losses, r.overlapped.ms)
               : fp16::train(*peers, group, o, rate, r.overlapped.losses, r.overlapped.ms);
#else
    const bool trained = fp16::train(*peers, group, o, rate, r.overlapped.losses, r.overlapped.ms);
#endif
    ok = trained && ok;
  }
  if (!ok) return 1;
  std::puts("data_parallel_training ok");
  return 0;
}

#if COHORT_WITH_NCCL

// One process per GPU: this process's model is its rank's replica and part of the batch, so the
// losses and the weights are seen whole only across the ranks, through `comm` on `stream`.
struct ranks_of_world {
  cohort::communicator& comm;
  cohort::stream_ref stream;

  // Each rank's loss is its rows' sum divided by the whole batch's elements (mlp::mean_losses):
  // the sum over the ranks is the batch's mean, the same on every rank. The same values summed
  // the same way give the same bits, so the overlapped and plain runs still compare to the bit.
  std::vector<double> losses(const mlp::model& model, int steps) {
    std::vector<double> host = model.losses(steps);
    cohort::device_buffer<double> sums(host.size(), stream);
    sums.copy_from_host(host);
    cohort::all_reduce(comm, stream, sums.span(), cohort::sum);
    sums.copy_to_host(host);
    comm.wait(stream); // bounded: a rank that never arrives throws instead of hanging
    return host;
  }

  // True where every rank's weights hash alike: each rank's 64-bit FNV-1a of its weights' bytes,
  // gathered on every rank, so that all ranks reach the same verdict. A replica that drifted by
  // one bit changes its hash.
  bool replicas_identical(const mlp::model& model) {
    const std::vector<mlp::bf16> weights = model.weights_on_host(0);
    const auto* bytes = reinterpret_cast<const unsigned char*>(weights.data());
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (std::size_t k = 0; k < weights.size() * sizeof(mlp::bf16); ++k)
      hash = (hash ^ bytes[k]) * 0x100000001b3ull;
    cohort::device_buffer<std::uint64_t> mine(1, stream), every(comm.size(), stream);
    mine.copy_from_host({&hash, 1});
    cohort::all_gather(comm, stream, std::as_const(mine).span(), every.span());
    std::vector<std::uint64_t> hashes(comm.size());
    every.copy_to_host(hashes);
    comm.wait(stream);
    for (std::uint64_t h : hashes)
      if (h != hashes[0]) return false;
    return true;
  }
};

// Where rank 0 leaves the NCCL id without --id-file: in /tmp (ranks of one node only), named
// after the launcher's run (cohort::launch_run_tag), so that jobs on one node meet no other's id.
std::string default_id_file() {
  std::string run = cohort::launch_run_tag();
  for (char& c : run)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_'; // a file name's characters only
  return "/tmp/data_parallel_training" + (run.empty() ? std::string() : "." + run) + ".id";
}

// One process per GPU: the launcher's world (mpirun, srun, torchrun), or with --one-rank a world
// of one rank on GPU 0 without a launcher. Returns the exit status.
int train_per_process(const mlp::options& o) {
  if (o.fp16) {
    std::puts("--fp16 runs in one process only: not with one process per GPU (--nccl under a "
              "launcher, or --one-rank)");
    return 2;
  }
  const std::optional<cohort::launch_environment> env = cohort::launch_environment_from();
  const int size = o.one_rank ? 1 : env->world_size;
  if (o.batch % (size * o.micro_batches) != 0) {
    std::printf("--batch %d does not split into %d micro-batches on each of %d ranks\n", o.batch,
                o.micro_batches, size);
    return 2;
  }
  if (!o.one_rank && too_few_gpus_for_ranks()) return 0;
  // Creation is bounded: if a rank never starts, the others throw timeout_error after 2 minutes.
  cohort::communicator comm =
      o.one_rank
          ? cohort::communicator::create(cohort::unique_id::create(), 1, 0, cohort::device_ref{0})
          : cohort::bootstrap_from_environment(o.id_file.empty() ? default_id_file() : o.id_file,
                                               std::chrono::minutes(2));
  const int rank = comm.rank();
  const bool print = rank == 0;
  // Every rank runs the same reference on its own GPU: the whole batch, as one GPU trains it.
  const run single = train_one_gpu(comm.device(), o);

  // This rank's replica on its GPU, holding rows [rank · rows, (rank + 1) · rows) of the batch
  // (rows = batch / size); its compute stream beside the group's, where the collectives run.
  cohort::device_group group({comm.device()});
  mlp::model model(
      group, o, {.index = static_cast<std::size_t>(rank), .count = static_cast<std::size_t>(size)});
  cohort::gradient_buckets<mlp::bf16> buckets(comm, group.stream(0), model.compute(0));
  ranks_of_world world{comm, group.stream(0)};
  const data_parallel_runs r = train_data_parallel(model, buckets, o, world);
  if (print)
    print_times(o, model, static_cast<std::size_t>(size), false, single, r, [&] {
      std::printf("world: %d process(es), one GPU each (rank 0 on GPU %d); the collectives run "
                  "on NCCL\n",
                  size, comm.device().get());
    });
  if (!checks_pass(static_cast<std::size_t>(size), single, r, print)) return 1;
  std::printf("rank %d ok\n", rank);
  if (o.one_rank) std::puts("data_parallel_training ok");
  return 0;
}

#endif

} // namespace

int main(int argc, char** argv) {
  if (mlp::no_gpu()) return 0;
  const mlp::options o = mlp::options::parse(argc, argv);
  if (o.one_rank && !o.nccl) {
    std::puts("--one-rank is the one-process-per-GPU path of --nccl: give both");
    return 2;
  }
#if COHORT_WITH_NCCL
  if (o.nccl && (o.one_rank || cohort::launch_environment_from())) return train_per_process(o);
#endif
  return train_in_one_process(o);
}
