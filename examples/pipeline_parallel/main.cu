// pipeline_parallel — a model cut into p stages, one per GPU, with micro-batches flowing through
// them (GPipe's forward pass). Stage s runs its layer on its member's stream, copies its
// activations into stage s + 1's input buffer and records an event that stage s + 1's stream waits
// on; nothing waits on the host. The whole batch is timed for 1 to 16 micro-batches, and the share
// of time the stages sat idle (the "bubble") is set beside GPipe's (p - 1) / (m + p - 1).
// Runs on every visible GPU, or on an emulated group of 2 on GPU 0 when fewer than 2 are visible.
//
//   build/examples/pipeline_parallel
#include <cohort/cohort.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <vector>

// The whole batch, in floats (64 MiB of activations per stage), and the work of one layer: every
// stage runs `rounds` rounds of x = a * x + b on each activation. That takes about 1 ms per 2^22
// floats on an H200, so a layer's launch and hand-off are small beside it even at 16
// micro-batches. With a = b = 1 the values stay small whole numbers: every float operation is
// exact and the host checks each element with ==. (a and b arrive at run time, so the device
// still does every round.)
constexpr std::size_t batch = std::size_t{1} << 24;
constexpr int rounds = 8192;
constexpr float a = 1.0f, b = 1.0f;
constexpr int threads = 256;
constexpr int repetitions = 5; // timed runs per figure; each figure is their median

// One stage's layer on one micro-batch.
__global__ void layer(cuda::std::span<const float> in, cuda::std::span<float> out, float a, float b,
                      int rounds) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= in.size()) return;
  float x = in[i];
  for (int r = 0; r < rounds; ++r)
    x = fmaf(a, x, b);
  out[i] = x;
}

__host__ __device__ float input(std::size_t i) {
  return static_cast<float>(i % 1000);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The model's activations: stage s reads in[s] and writes out[s], both on member s's device and
// stream; its hand-off copies out[s] into in[s + 1]. Each buffer holds the whole batch, as
// GPipe's forward pass keeps every micro-batch's activations (for the backward pass).
class pipeline {
 public:
  explicit pipeline(cohort::device_group& group)
      : group_(group)
      , origin_(group.device(0))
      , start_(group.device(0), cohort::event::timing::on)
      , stop_(group.device(0), cohort::event::timing::on) {
    for (std::size_t s = 0; s < stages(); ++s) {
      in_.emplace_back(batch, group.stream(s));
      out_.emplace_back(batch, group.stream(s));
      handed_off_.emplace_back(group.device(s));
      stage_start_.emplace_back(group.device(s), cohort::event::timing::on);
      stage_stop_.emplace_back(group.device(s), cohort::event::timing::on);
    }
  }

  std::size_t stages() const { return group_.size(); }
  cohort::device_buffer<float>& first_input() { return in_.front(); }
  const cohort::device_buffer<float>& last_output() const { return out_.back(); }

  // Enqueues stage s's work on the micro-batch [offset, offset + count): its layer, then (on every
  // stage but the last) the copy of its activations into the next stage's input.
  void run_stage(std::size_t s, std::size_t offset, std::size_t count) {
    const auto blocks = static_cast<unsigned>((count + threads - 1) / threads);
    cohort::launch(group_.stream(s), {.grid = blocks, .block = threads}, layer,
                   in_[s].span().subspan(offset, count), out_[s].span().subspan(offset, count), a,
                   b, rounds);
    if (s + 1 == stages()) return;
    cohort::scoped_device on(group_.device(s)); // the hand-off is enqueued with it current
    const cudaStream_t stream = group_.stream(s).native_handle();
    cohort::check_cuda(cudaMemcpyPeerAsync(in_[s + 1].data() + offset, group_.device(s + 1).get(),
                                           out_[s].data() + offset, group_.device(s).get(),
                                           count * sizeof(float), stream),
                       "cudaMemcpyPeerAsync (hand-off to the next stage)", group_.device(s).get());
  }

  // Enqueues GPipe's forward pass of the whole batch as m micro-batches: each goes through stage
  // 0, 1, ..., p - 1, and stage s + 1 starts on it once stage s's hand-off has landed. One event
  // per stage boundary is enough: a wait takes the record current at the call, and stage s + 1
  // waits right after stage s recorded for the same micro-batch.
  void forward(std::size_t m) {
    const std::size_t count = batch / m;
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t s = 0; s < stages(); ++s) {
        if (s > 0) group_.stream(s).wait(handed_off_[s - 1]);
        run_stage(s, j * count, count);
        if (s + 1 < stages()) handed_off_[s].record(group_.stream(s));
      }
  }

  // Milliseconds of one forward pass in m micro-batches, from the first stage's start to the last
  // stage's end (events on an origin stream that every stage forks from and joins back to).
  double time_forward(std::size_t m) {
    start_.record(origin_);
    group_.fork(origin_);
    forward(m);
    group_.join(origin_);
    stop_.record(origin_);
    stop_.synchronize();
    return cohort::elapsed(start_, stop_).count();
  }

  // Milliseconds stage s takes on one micro-batch of `count` floats with nothing else running:
  // its layer and, where it has one, its hand-off (all that its stream does per micro-batch).
  double time_stage_alone(std::size_t s, std::size_t count) {
    stage_start_[s].record(group_.stream(s));
    run_stage(s, 0, count);
    stage_stop_[s].record(group_.stream(s));
    stage_stop_[s].synchronize();
    return cohort::elapsed(stage_start_[s], stage_stop_[s]).count();
  }

  // Sets every activation but the model's input to NaN, so that a stage that ran before its input
  // arrived, or a micro-batch that was skipped, shows in the output.
  void poison() {
    for (std::size_t s = 0; s < stages(); ++s) {
      if (s > 0) in_[s].fill_bytes(0xFF);
      out_[s].fill_bytes(0xFF);
    }
    group_.synchronize();
  }

 private:
  cohort::device_group& group_;
  cohort::stream origin_;
  cohort::event start_, stop_;
  std::vector<cohort::device_buffer<float>> in_, out_;
  std::vector<cohort::event> handed_off_, stage_start_, stage_stop_;
};

int main() {
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  const bool real = !group.is_emulated();
  const bool all_peers = group.enable_peer_access();
  const std::size_t p = group.size();

  if (real)
    std::printf("%zu stages, one on each of %zu GPUs; peer access %s.\n", p, p,
                all_peers ? "between every pair"
                          : "missing between some pairs (their hand-offs go through the host)");
  else if (group.splits_sms())
    std::printf("Fewer than 2 GPUs are visible: %zu stages on an emulated group on GPU 0, each on "
                "its own %u of its %d SMs.\n",
                p, group.sm_count(0), cohort::properties(group.device(0)).multiprocessors);
  else
    std::printf("Fewer than 2 GPUs are visible: %zu stages on an emulated group on GPU 0. Its SMs "
                "cannot be split here, so stages that run at once slow each other down and the "
                "idle share below is not GPipe's bubble.\n",
                p);
  std::printf("The batch is %zu floats; each stage runs %d rounds of x = a*x + b on every one and "
              "hands its activations on to the next stage.\n\n",
              batch, rounds);

  pipeline net(group);
  float* x = net.first_input().data();
  cohort::for_each_n(group.stream(0), batch, [=] __device__(std::size_t i) { x[i] = input(i); });
  group.synchronize();

  const std::vector<std::size_t> micro_batches{1, 2, 4, 8, 16};
  std::vector<double> totals, idle;
  std::vector<float> result(batch);
  std::size_t wrong = 0;
  for (std::size_t m : micro_batches) {
    const std::size_t count = batch / m;

    // One stage on one micro-batch, alone; t_stage is the mean over the stages.
    double stage_ms = 0.0;
    for (std::size_t s = 0; s < p; ++s) {
      (void)net.time_stage_alone(s, count); // warm-up
      std::vector<double> ms;
      for (int r = 0; r < repetitions; ++r)
        ms.push_back(net.time_stage_alone(s, count));
      stage_ms += median(ms) / static_cast<double>(p);
    }

    // The whole pipeline.
    (void)net.time_forward(m); // warm-up
    std::vector<double> ms;
    for (int r = 0; r < repetitions; ++r)
      ms.push_back(net.time_forward(m));
    const double total_ms = median(ms);

    // Once more from poisoned activations, and check every output against the host.
    net.poison();
    (void)net.time_forward(m);
    net.last_output().copy_to_host(result);
    net.last_output().stream().synchronize();
    std::size_t wrong_here = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      float want = input(i);
      for (std::size_t s = 0; s < p; ++s)
        want += static_cast<float>(rounds) * b; // a = 1: the closed form of `rounds` rounds
      wrong_here += result[i] != want;
    }
    wrong += wrong_here;

    // Busy share: m micro-batches on each of p stages, t_stage each, out of p stages' T_total.
    const double busy = static_cast<double>(m) * static_cast<double>(p) * stage_ms /
                        (static_cast<double>(p) * total_ms);
    const double gpipe = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
    totals.push_back(total_ms);
    idle.push_back(1.0 - busy);
    std::printf("%2zu micro-batch(es) of %zu floats: a stage alone takes %.3f ms per micro-batch "
                "(mean over the stages, hand-off included); the pipeline took %.3f ms (GPipe's "
                "(m+p-1) x t_stage: %.3f ms).\n",
                m, count, stage_ms, total_ms, static_cast<double>(m + p - 1) * stage_ms);
    std::printf("   The stages sat idle %.1f%% of the time; GPipe's (p-1)/(m+p-1) says %.1f%%. "
                "Outputs: %zu of %zu wrong.\n",
                100.0 * (1.0 - busy), 100.0 * gpipe, wrong_here, batch);
  }

  std::printf("\nWith %zu micro-batches instead of %zu, the same batch went through the %zu "
              "stages %.2fx as fast (%.3f ms instead of %.3f ms), and the idle share went from "
              "%.1f%% to %.1f%%.\n",
              micro_batches.back(), micro_batches.front(), p, totals.front() / totals.back(),
              totals.back(), totals.front(), 100.0 * idle.front(), 100.0 * idle.back());
  std::printf("%zu of %zu outputs differ from the host's (checked once for every micro-batch "
              "count).\n",
              wrong, batch * micro_batches.size());
  if (wrong != 0) return 1;
  std::puts("pipeline_parallel ok");
  return 0;
}
