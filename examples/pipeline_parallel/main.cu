// pipeline_parallel — a model cut into p stages, one per GPU, trained on micro-batches that flow
// through them: a forward pass from stage 0 to stage p - 1, then a backward pass back. Two
// schedules of the same step (same model, same micro-batches):
//   - GPipe: every stage runs the forward pass of all m micro-batches, then their backward passes,
//     so each stage keeps the activations of all m micro-batches until their backward pass;
//   - 1F1B (one forward, one backward; PipeDream-Flush, Megatron-LM's default): stage s runs
//     p - s - 1 forward passes ahead, then alternates one forward and one backward, so it keeps
//     at most p - s micro-batches' activations.
// Both leave the stages idle the same share of a step, (p - 1) / (m + p - 1) in theory; 1F1B
// needs less memory once m > p. The program prints, for m = 1 to 16 and each schedule, the step's
// time, the idle share measured (each stage's busy time, from its work timed alone, against the
// step's wall time) beside the theory, and the activations each stage held at most, counted from
// the buffers it really allocated; it checks every output and gradient against the host.
//
// Stage s runs on its member's stream; a hand-off is a copy into the next stage's (forward) or
// the previous stage's (backward) buffer and an event the other stage's stream waits on; nothing
// waits on the host. Runs on every visible GPU, or on an emulated group of 2 on GPU 0 when fewer
// than 2 are visible.
//
//   build/examples/pipeline_parallel
#include <cohort/cohort.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

// The whole batch, in floats (64 MiB per stage and buffer), and the work of one layer: stage s's
// layer is y = c * f(x), where f is `rounds` rounds of x = a * x + b on each element. Its backward
// pass gets dL/dy, returns dL/dx = c * a^rounds * dL/dy (again `rounds` rounds, so a backward
// costs about what a forward does) and adds dL/dc = dL/dy * y / c to the stage's parameter
// gradient: it needs the forward pass's output y, which is what the stage keeps between the two
// (its stash). The loss is the sum of the last stage's outputs (dL/dy = 1 there). With a = b =
// c = 1 every value is a small whole number: every float operation is exact and the host checks
// each element with ==. (a, b and c arrive at run time, so the device still does every round.)
constexpr std::size_t batch = std::size_t{1} << 24;
constexpr int rounds = 4096;
constexpr float a = 1.0f, b = 1.0f, c = 1.0f;
constexpr int threads = 256;
constexpr int repetitions = 5; // timed steps per figure; each figure is their median
constexpr std::size_t most_micro_batches = 16;

__global__ void forward_layer(cuda::std::span<const float> in, cuda::std::span<float> out, float a,
                              float b, float c, int rounds) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= in.size()) return;
  float x = in[i];
  for (int r = 0; r < rounds; ++r)
    x = fmaf(a, x, b);
  out[i] = c * x;
}

__global__ void backward_layer(cuda::std::span<const float> grad_out,
                               cuda::std::span<const float> y, cuda::std::span<float> grad_in,
                               cuda::std::span<float> grad_c, float a, float c, int rounds) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= y.size()) return;
  float g = grad_out[i];
  grad_c[i] += g * y[i] / c;
  for (int r = 0; r < rounds; ++r)
    g = fmaf(a, g, 0.0f);
  grad_in[i] = c * g;
}

__host__ __device__ float input(std::size_t i) {
  return static_cast<float>(i % 1000);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The model's input, or ones, into `batch` floats. (A free function: a __device__ lambda cannot
// be written in a constructor.)
void fill(cohort::stream_ref stream, float* to, bool ones) {
  cohort::for_each_n(stream, batch,
                     [=] __device__(std::size_t i) { to[i] = ones ? 1.0f : input(i); });
}

enum class schedule { gpipe, one_f_one_b };

const char* name_of(schedule s) {
  return s == schedule::gpipe ? "GPipe" : "1F1B";
}

// One stage's work on one micro-batch.
struct op {
  bool forward;
  std::size_t micro_batch;
};

// What stage s of p runs, in order, for m micro-batches.
std::vector<op> ops_of(schedule kind, std::size_t s, std::size_t p, std::size_t m) {
  std::vector<op> ops;
  if (kind == schedule::gpipe) {
    for (std::size_t j = 0; j < m; ++j)
      ops.push_back({true, j});
    for (std::size_t j = 0; j < m; ++j)
      ops.push_back({false, j});
    return ops;
  }
  const std::size_t ahead = std::min(p - s - 1, m); // forward passes before the first backward
  for (std::size_t j = 0; j < ahead; ++j)
    ops.push_back({true, j});
  for (std::size_t j = 0; j + ahead < m; ++j) {
    ops.push_back({true, j + ahead});
    ops.push_back({false, j});
  }
  for (std::size_t j = m - ahead; j < m; ++j)
    ops.push_back({false, j});
  return ops;
}

// The model's buffers. Whole-batch ones, the same for both schedules: each stage's input (the
// previous stage's outputs land there), its incoming and outgoing gradients, its parameter
// gradient, and the model's output. The stash, one buffer per micro-batch a stage holds between
// its forward and its backward pass, comes from a pool per stage that grows when a forward pass
// finds no free buffer: the buffers it allocated are the most activations the stage held at once.
class pipeline {
 public:
  explicit pipeline(cohort::device_group& group)
      : group_(group)
      , origin_(group.device(0))
      , start_(group.device(0), cohort::event::timing::on)
      , stop_(group.device(0), cohort::event::timing::on)
      , output_(batch, group.stream(group.size() - 1))
      , stash_(group.size())
      , free_(group.size())
      , held_(group.size()) {
    for (std::size_t s = 0; s < stages(); ++s) {
      in_.emplace_back(batch, group.stream(s));
      grad_in_.emplace_back(batch, group.stream(s));
      grad_out_.emplace_back(batch, group.stream(s));
      grad_c_.emplace_back(batch, group.stream(s));
      stage_start_.emplace_back(group.device(s), cohort::event::timing::on);
      stage_stop_.emplace_back(group.device(s), cohort::event::timing::on);
      forward_done_.emplace_back();
      backward_done_.emplace_back();
      for (std::size_t j = 0; j < most_micro_batches; ++j) {
        forward_done_.back().emplace_back(group.device(s));
        backward_done_.back().emplace_back(group.device(s));
      }
    }
    fill(group.stream(0), in_.front().data(), false);
    fill(group.stream(stages() - 1), grad_in_.back().data(), true); // dL/dy of the outputs' sum
    group.synchronize();
  }

  std::size_t stages() const { return group_.size(); }

  // Empties the stash pools (their buffers are freed) and sets the micro-batch size.
  void reset(std::size_t m) {
    group_.synchronize();
    count_ = batch / m;
    for (std::size_t s = 0; s < stages(); ++s) {
      stash_[s].clear();
      free_[s].clear();
      held_[s].assign(most_micro_batches, 0);
    }
  }
  // The stash buffers stage s allocated since the last reset: the most it held at once.
  std::size_t stash_peak(std::size_t s) const { return stash_[s].size(); }
  std::size_t micro_batch_bytes() const { return count_ * sizeof(float); }

  // Enqueues one training step in `kind`'s order. A stage's next op is enqueued once the op of
  // another stage it depends on has been (that op's event is recorded before the wait is), so
  // the events per micro-batch are never re-recorded before they are waited on.
  void step(schedule kind, std::size_t m) {
    const std::size_t p = stages();
    std::vector<std::vector<op>> ops;
    for (std::size_t s = 0; s < p; ++s)
      ops.push_back(ops_of(kind, s, p, m));
    std::vector<std::size_t> next(p, 0);
    std::vector<std::vector<bool>> forwarded(p, std::vector<bool>(m)), backwarded = forwarded;
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t s = 0; s < p; ++s)
        for (; next[s] < ops[s].size(); ++next[s], progress = true) {
          const op o = ops[s][next[s]];
          if (o.forward && s > 0 && !forwarded[s - 1][o.micro_batch]) break;
          if (!o.forward && s + 1 < p && !backwarded[s + 1][o.micro_batch]) break;
          if (o.forward) {
            if (s > 0) group_.stream(s).wait(forward_done_[s - 1][o.micro_batch]);
            run_forward(s, o.micro_batch, acquire(s, o.micro_batch));
            if (s + 1 < p) forward_done_[s][o.micro_batch].record(group_.stream(s));
            forwarded[s][o.micro_batch] = true;
          } else {
            if (s + 1 < p) group_.stream(s).wait(backward_done_[s + 1][o.micro_batch]);
            run_backward(s, o.micro_batch, held_[s][o.micro_batch]);
            free_[s].push_back(held_[s][o.micro_batch]); // reused after this, on the same stream
            if (s > 0) backward_done_[s][o.micro_batch].record(group_.stream(s));
            backwarded[s][o.micro_batch] = true;
          }
        }
    }
    for (std::size_t s = 0; s < p; ++s)
      if (next[s] != ops[s].size())
        throw std::logic_error(std::string(name_of(kind)) + "'s schedule deadlocks at stage " +
                               std::to_string(s));
  }

  // Milliseconds of one step, from the first stage's start to the last stage's end (events on an
  // origin stream that every stage forks from and joins back to).
  double time_step(schedule kind, std::size_t m) {
    start_.record(origin_);
    group_.fork(origin_);
    step(kind, m);
    group_.join(origin_);
    stop_.record(origin_);
    stop_.synchronize();
    return cohort::elapsed(start_, stop_).count();
  }

  // Milliseconds stage s takes on one micro-batch's forward or backward pass with nothing else
  // running, hand-off included (all that its stream does for that op).
  double time_alone(std::size_t s, bool forward) {
    stage_start_[s].record(group_.stream(s));
    const std::size_t slot = acquire(s, 0);
    if (forward)
      run_forward(s, 0, slot);
    else
      run_backward(s, 0, slot);
    free_[s].push_back(slot);
    stage_stop_[s].record(group_.stream(s));
    stage_stop_[s].synchronize();
    return cohort::elapsed(stage_start_[s], stage_stop_[s]).count();
  }

  // Sets every activation and gradient but the model's input and the loss's gradient to NaN,
  // and the parameter gradients to zero, so that an op that ran before its input arrived, or one
  // that was skipped, shows in the results.
  void poison() {
    for (std::size_t s = 0; s < stages(); ++s) {
      if (s > 0) in_[s].fill_bytes(0xFF);
      if (s + 1 < stages()) grad_in_[s].fill_bytes(0xFF);
      grad_out_[s].fill_bytes(0xFF);
      grad_c_[s].fill_bytes(0);
      for (cohort::device_buffer<float>& buffer : stash_[s])
        buffer.fill_bytes(0xFF);
    }
    output_.fill_bytes(0xFF);
    group_.synchronize();
  }

  // Counts the outputs, the parameter gradients and the input gradients that differ from the
  // host's closed forms (a = b = c = 1: each stage adds `rounds`; dL/dc = y; dL/dx = 1).
  std::size_t wrong_results() {
    std::vector<float> got(batch);
    std::size_t wrong = 0;
    auto compare = [&](const cohort::device_buffer<float>& buffer, auto want) {
      buffer.copy_to_host(got);
      buffer.stream().synchronize();
      for (std::size_t i = 0; i < batch; ++i)
        wrong += got[i] != want(i);
    };
    const auto after = [](std::size_t stages) {
      return [stages](std::size_t i) {
        return input(i) + static_cast<float>(stages) * static_cast<float>(rounds) * b;
      };
    };
    compare(output_, after(stages()));
    for (std::size_t s = 0; s < stages(); ++s)
      compare(grad_c_[s], after(s + 1));
    compare(grad_out_.front(), [](std::size_t) { return 1.0f; });
    return wrong;
  }

 private:
  std::size_t acquire(std::size_t s, std::size_t j) {
    if (free_[s].empty()) {
      stash_[s].emplace_back(count_, group_.stream(s));
      free_[s].push_back(stash_[s].size() - 1);
    }
    held_[s][j] = free_[s].back();
    free_[s].pop_back();
    return held_[s][j];
  }

  // Copies `count_` floats on stage s's stream (between devices or within one).
  void hand_off(std::size_t s, float* to, cohort::device_ref to_device, const float* from,
                const char* what) {
    cohort::scoped_device on(group_.device(s));
    cohort::check_cuda(cudaMemcpyPeerAsync(to, to_device.get(), from, group_.device(s).get(),
                                           count_ * sizeof(float),
                                           group_.stream(s).native_handle()),
                       what, group_.device(s).get());
  }

  unsigned blocks() const { return static_cast<unsigned>((count_ + threads - 1) / threads); }

  // Stage s's forward pass of micro-batch j into stash buffer `slot`, then the output on to the
  // next stage's input (or the model's output).
  void run_forward(std::size_t s, std::size_t j, std::size_t slot) {
    cohort::device_buffer<float>& y = stash_[s][slot];
    cohort::launch(group_.stream(s), {.grid = blocks(), .block = threads}, forward_layer,
                   in_[s].span().subspan(j * count_, count_), y.span(), a, b, c, rounds);
    const bool last = s + 1 == stages();
    hand_off(s, (last ? output_ : in_[s + 1]).data() + j * count_, group_.device(last ? s : s + 1),
             y.data(), "cudaMemcpyPeerAsync (activations to the next stage)");
  }

  // Stage s's backward pass of micro-batch j from stash buffer `slot`, then its input gradient
  // back to the previous stage.
  void run_backward(std::size_t s, std::size_t j, std::size_t slot) {
    cohort::launch(group_.stream(s), {.grid = blocks(), .block = threads}, backward_layer,
                   grad_in_[s].span().subspan(j * count_, count_), stash_[s][slot].span(),
                   grad_out_[s].span().subspan(j * count_, count_),
                   grad_c_[s].span().subspan(j * count_, count_), a, c, rounds);
    if (s == 0) return;
    hand_off(s, grad_in_[s - 1].data() + j * count_, group_.device(s - 1),
             grad_out_[s].data() + j * count_,
             "cudaMemcpyPeerAsync (gradients to the previous stage)");
  }

  cohort::device_group& group_;
  cohort::stream origin_;
  cohort::event start_, stop_;
  cohort::device_buffer<float> output_;
  std::vector<cohort::device_buffer<float>> in_, grad_in_, grad_out_, grad_c_;
  std::vector<std::vector<cohort::device_buffer<float>>> stash_; // the pools
  std::vector<std::vector<std::size_t>> free_;                   // free buffers of each pool
  std::vector<std::vector<std::size_t>> held_; // each micro-batch's buffer, per stage
  std::vector<cohort::event> stage_start_, stage_stop_;
  std::vector<std::vector<cohort::event>> forward_done_, backward_done_; // per micro-batch
  std::size_t count_ = batch;
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
                "idle share below is not the schedules' bubble.\n",
                p);
  std::printf("The batch is %zu floats; each stage's forward and backward pass each run %d rounds "
              "of a multiply-add on every one, and hand their results on.\n\n",
              batch, rounds);

  pipeline net(group);
  std::size_t wrong = 0, wrong_peaks = 0;
  for (std::size_t m : {1, 2, 4, 8, 16}) {
    const std::size_t count = batch / m;
    net.reset(m);
    // Each stage's forward and backward pass on one micro-batch, alone; busy is the sum over the
    // stages of m times the two.
    double busy_ms = 0.0;
    for (std::size_t s = 0; s < p; ++s)
      for (const bool forward : {true, false}) {
        (void)net.time_alone(s, forward); // warm-up
        std::vector<double> ms;
        for (int r = 0; r < repetitions; ++r)
          ms.push_back(net.time_alone(s, forward));
        busy_ms += static_cast<double>(m) * median(ms);
      }
    const double theory = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
    std::printf("%2zu micro-batch(es) of %zu floats (the stages' busy time: %.3f ms; in theory "
                "each schedule leaves them idle %.1f%% of a step):\n",
                m, count, busy_ms / static_cast<double>(p), 100.0 * theory);
    for (const schedule kind : {schedule::gpipe, schedule::one_f_one_b}) {
      net.reset(m);
      (void)net.time_step(kind, m); // warm-up: the stash pools grow to their peak here
      std::vector<double> ms;
      for (int r = 0; r < repetitions; ++r)
        ms.push_back(net.time_step(kind, m));
      const double step_ms = median(ms);
      // Once more from poisoned buffers, checked against the host.
      net.poison();
      (void)net.time_step(kind, m);
      const std::size_t wrong_here = net.wrong_results();
      wrong += wrong_here;
      const double idle = 1.0 - busy_ms / (static_cast<double>(p) * step_ms);
      std::printf("   %-5s step %8.3f ms, idle %5.1f%%; stash held at most, per stage:",
                  name_of(kind), step_ms, 100.0 * idle);
      for (std::size_t s = 0; s < p; ++s) {
        // What the schedule promises: GPipe all m, 1F1B at most p - s.
        const std::size_t bound = kind == schedule::gpipe ? m : std::min(m, p - s);
        wrong_peaks += net.stash_peak(s) != bound;
        std::printf(" %zu (%.1f MiB)", net.stash_peak(s),
                    static_cast<double>(net.stash_peak(s) * net.micro_batch_bytes()) / (1 << 20));
      }
      std::printf("; %zu results wrong\n", wrong_here);
    }
  }
  std::printf("\n%zu results differ from the host's (outputs, parameter and input gradients, "
              "checked for every schedule and micro-batch count); %zu stages held a stash other "
              "than their schedule's (GPipe m, 1F1B min(m, p - s)).\n",
              wrong, wrong_peaks);
  if (wrong != 0 || wrong_peaks != 0) return 1;
  std::puts("pipeline_parallel ok");
  return 0;
}
