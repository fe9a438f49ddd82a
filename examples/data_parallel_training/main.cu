// data_parallel_training — data-parallel SGD written with cohort: each step's batch is split
// across the GPUs, each GPU accumulates its gradient over several micro-batches, one all_reduce
// averages the gradients, and every GPU applies the same update to its own copy of the weights.
// The model is linear regression (y = x·w) on synthetic data with a known answer, in float or
// with the inputs stored in bfloat16 (half the memory traffic; arithmetic in float). The same
// training on one GPU must end at the same loss.
//
//   build/examples/data_parallel_training
#include <cohort/cohort.cuh>

#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int features = 512;

// Sample i's feature j and target: a fixed "true" weight vector plus a little noise.
__host__ __device__ float feature(std::size_t i, int j) {
  const unsigned h = static_cast<unsigned>(i * 2654435761u) ^ static_cast<unsigned>(j * 40503u);
  return static_cast<float>((h >> 8) % 2001) / 1000.0f - 1.0f;
}
__host__ __device__ float true_weight(int j) { return static_cast<float>(j % 17) / 16.0f - 0.5f; }

struct settings {
  std::size_t batch = 8192; // samples per step, over all GPUs
  int micro_batches = 4;    // per GPU and step: gradients accumulated before the all_reduce
  int steps = 300;
  float learning_rate = 0.05f;
};

// One GPU's part of training: its samples, its copy of the weights, its gradient.
template <class Storage>
struct replica {
  cohort::device_buffer<Storage> x;  // samples × features, row-major
  cohort::device_buffer<float> y;    // targets
  cohort::device_buffer<float> w;    // weights (every replica holds the same)
  cohort::device_buffer<float> residual;
  replica(std::size_t samples, cohort::stream_ref s)
      : x(samples * features, s), y(samples, s), w(features, s), residual(samples, s) {}
};

// Trains on `group` (each member takes batch / size samples per step) and returns the loss after
// each step (mean squared error over the step's batch).
template <class Storage>
std::vector<double> train(const cohort::device_group& group, const settings& cfg) {
  const std::size_t members = group.size();
  const std::size_t per_member = cfg.batch / members;          // samples per member and step
  const std::size_t per_micro = per_member / cfg.micro_batches; // samples per micro-batch
  cohort::p2p_clique peers(group);
  // Each member's gradient and loss, all_reduced every step: features + 1 floats.
  cohort::distributed_buffer<float> grad(group, cohort::partition::replicated(features + 1, members));
  std::vector<replica<Storage>> parts;
  for (std::size_t m = 0; m < members; ++m) {
    parts.emplace_back(per_member, group.stream(m));
    replica<Storage>& p = parts.back();
    Storage* x = p.x.data();
    float* y = p.y.data();
    const std::size_t first = m * per_member; // this member's samples of the (fixed) batch
    cohort::for_each_n(group.stream(m), per_member, [=] __device__(std::size_t i) {
      float target = 0;
      for (int j = 0; j < features; ++j) {
        const float v = feature(first + i, j);
        x[i * features + j] = static_cast<Storage>(v);
        target += v * true_weight(j);
      }
      y[i] = target + 0.01f * feature(first + i, features); // a little noise
    });
    p.w.fill_bytes(0);
  }
  std::vector<double> losses;
  std::vector<float> host(features + 1);
  for (int step = 0; step < cfg.steps; ++step) {
    for (std::size_t m = 0; m < members; ++m) {
      replica<Storage>& p = parts[m];
      const Storage* x = p.x.data();
      const float* y = p.y.data();
      const float* w = p.w.data();
      float* r = p.residual.data();
      float* g = grad.shard(m).data.data();
      grad.local(m).fill_bytes(0);
      for (int micro = 0; micro < cfg.micro_batches; ++micro) {
        const std::size_t base = static_cast<std::size_t>(micro) * per_micro;
        // residual r_i = x_i · w − y_i
        cohort::for_each_n(group.stream(m), per_micro, [=] __device__(std::size_t i) {
          float dot = 0;
          for (int j = 0; j < features; ++j)
            dot += static_cast<float>(x[(base + i) * features + j]) * w[j];
          r[base + i] = dot - y[base + i];
        });
        // g_j += Σ_i r_i x_ij, and the squared error into g[features]; accumulated over
        // micro-batches, in float whatever the storage.
        cohort::for_each_n(group.stream(m), features + 1, [=] __device__(std::size_t j) {
          float sum = 0;
          for (std::size_t i = 0; i < per_micro; ++i)
            sum += j < features ? r[base + i] * static_cast<float>(x[(base + i) * features + j])
                                : r[base + i] * r[base + i];
          g[j] += sum;
        });
      }
    }
    cohort::all_reduce(peers, grad, cohort::sum); // every member: the sums over the whole batch
    const float scale = cfg.learning_rate * 2.0f / static_cast<float>(cfg.batch);
    for (std::size_t m = 0; m < members; ++m) {
      float* w = parts[m].w.data();
      const float* g = grad.shard(m).data.data();
      cohort::for_each_n(group.stream(m), features, [=] __device__(std::size_t j) { w[j] -= scale * g[j]; });
    }
    grad.local(0).copy_to_host(host); // the loss (before this step's update)
    group.stream(0).synchronize();
    losses.push_back(host[features] / static_cast<double>(cfg.batch));
  }
  group.synchronize();
  return losses;
}

} // namespace

int main() {
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  cohort::device_group one({cohort::device_ref{0}});
  const settings cfg;
  std::printf("linear regression, %d features, batch %zu per step split over %zu %s GPU(s), %d "
              "micro-batches each, %d steps\n",
              features, cfg.batch, group.size(), group.is_emulated() ? "emulated" : "real",
              cfg.micro_batches, cfg.steps);
  bool ok = true;
  auto report = [&](const char* name, const std::vector<double>& many, const std::vector<double>& single) {
    std::printf("%s: loss %.5f at step 0, %.5f at step %d, %.6f at the end; one GPU ends at %.6f\n",
                name, many.front(), many[many.size() / 2], static_cast<int>(many.size() / 2),
                many.back(), single.back());
    const bool fell = many.back() < 0.05 * many.front();
    const bool same = std::fabs(many.back() - single.back()) <= 1e-3 * single.back() + 1e-7;
    if (!fell) std::printf("%s: the loss did not fall twentyfold\n", name);
    if (!same) std::printf("%s: data-parallel and one-GPU training disagree\n", name);
    ok = ok && fell && same;
  };
  report("float", train<float>(group, cfg), train<float>(one, cfg));
  report("bfloat16 inputs, float arithmetic", train<__nv_bfloat16>(group, cfg),
         train<__nv_bfloat16>(one, cfg));
  if (!ok) return 1;
  std::puts("data_parallel_training ok");
  return 0;
}
