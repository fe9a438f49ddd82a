// fused_layer_tail — the tail of a tensor-parallel transformer layer (all_reduce of the ranks'
// bf16 partial outputs, residual add, RMSNorm) fused into one kernel per GPU through a
// cohort::p2p_handle (layer_tail.cuh), against the unfused sequence: cohort's p2p all_reduce then
// a norm kernel, and, where NCCL and two GPUs are there, NCCL's all_reduce then the same norm.
// Every path is checked against the host on random data, outputs poisoned first, then timed.
// Runs on every visible GPU (up to 8), or on an emulated pair on GPU 0 where only one is visible.
//
//   build/examples/fused_layer_tail [tokens] [hidden]      (defaults: 16 4096)
#include "layer_tail.cuh"

#include "../../benchmarks/timing.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using layer_tail::bf16;

std::vector<float> random_floats(std::size_t n, float low, float high, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> pick(low, high);
  std::vector<float> v(n);
  for (float& x : v)
    x = __bfloat162float(__float2bfloat16(pick(engine))); // exactly representable in bf16
  return v;
}

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = __float2bfloat16(v[i]);
  return out;
}

bool parse(const char* text, int& value) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 1 << 20) return false;
  value = static_cast<int>(v);
  return true;
}

int run(int tokens, int hidden) {
  const int visible = std::min(cohort::device_count(), 8);
  const bool real = visible >= 2;
  const auto all = cohort::devices();
  cohort::device_group group = real ? cohort::device_group(std::vector<cohort::device_ref>(
                                          all.begin(), all.begin() + visible))
                                    : cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::p2p_clique peers(group);
  const std::size_t n = group.size();
  std::printf("group: %zu members%s; %d tokens x %d hidden bf16 = %zu KiB per rank\n", n,
              real ? ", one per visible GPU" : ", emulated on GPU 0", tokens, hidden,
              std::size_t(tokens) * hidden * sizeof(bf16) / 1024);

  layer_tail::layer layer(group, peers, tokens, hidden);
  const std::size_t elements = std::size_t(tokens) * hidden;
  std::vector<std::vector<float>> partial;
  std::vector<std::vector<bf16>> partial_bf16;
  for (std::size_t r = 0; r < n; ++r) {
    partial.push_back(random_floats(elements, -1.0f, 1.0f, 100 + static_cast<unsigned>(r)));
    partial_bf16.push_back(to_bf16(partial.back()));
  }
  const std::vector<float> residual = random_floats(elements, -1.0f, 1.0f, 7);
  const std::vector<float> gamma = random_floats(std::size_t(hidden), 0.5f, 1.5f, 8);
  layer.load(partial_bf16, to_bf16(residual), to_bf16(gamma));

  std::vector<double> want;
  // ||out - ref|| / ||ref|| for each row (token), the worst over rows and ranks: an error per
  // element would blow up where the residual cancels the sum, and the unfused paths legitimately
  // round the sum to bf16 before adding the residual.
  auto worst_error = [&] {
    double worst = 0.0;
    for (std::size_t r = 0; r < n; ++r) {
      const std::vector<bf16> got = layer.output(r, tokens);
      for (int t = 0; t < tokens; ++t) {
        layer_tail::reference_row(partial, residual, gamma, std::size_t(t), std::size_t(hidden),
                                  want);
        double difference = 0.0, norm = 0.0;
        for (int e = 0; e < hidden; ++e) {
          const double g = __bfloat162float(got[std::size_t(t) * hidden + e]);
          if (std::isnan(g)) return 1e30;
          difference += (g - want[e]) * (g - want[e]);
          norm += want[e] * want[e];
        }
        worst = std::max(worst, std::sqrt(difference / norm));
      }
    }
    return worst;
  };

  struct path {
    const char* name;
    std::function<void()> run;
  };
  std::vector<path> paths = {{"fused (one kernel per GPU)", [&] { layer.fused(tokens); }},
                             {"cohort p2p all_reduce + norm", [&] { layer.unfused(tokens); }}};
#if COHORT_WITH_NCCL
  std::unique_ptr<cohort::nccl_clique> nccl;
  if (real) {
    nccl = std::make_unique<cohort::nccl_clique>(group);
    paths.push_back({"NCCL all_reduce + norm", [&] { layer.unfused_nccl(*nccl, tokens); }});
  }
#endif

  const double tolerance = 1.0 / 64; // bf16 operands land between 1e-3 and 1e-2 of the norm
  bool ok = true;
  std::vector<double> us;
  for (const path& p : paths) {
    layer.poison_output();
    p.run();
    const double error = worst_error();
    us.push_back(bench::group_time_us(group, p.run, 200));
    std::printf("%-32s %8.2f us per call   row error |out-ref|/|ref| %.2g%s\n", p.name, us.back(),
                error, error <= tolerance ? "" : "  (above tolerance)");
    ok = ok && error <= tolerance;
  }
  for (std::size_t k = 1; k < paths.size(); ++k)
    std::printf("fused is %.2f x as fast as %s\n", us[k] / us[0], paths[k].name);
  if (!real) std::puts("  (both members share one GPU: the figures say little about real GPUs)");
  // More tokens than the layer's buffers hold is refused before anything runs.
  try {
    layer.fused(tokens + 1);
    std::puts("fused(max_tokens + 1) was not refused");
    ok = false;
  } catch (const std::invalid_argument& e) {
    std::printf("refused: %s\n", e.what());
  }
  if (!ok) return 1;
  std::puts("fused_layer_tail ok");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int tokens = 16, hidden = 4096;
  if (argc > 3 || (argc > 1 && !parse(argv[1], tokens)) || (argc > 2 && !parse(argv[2], hidden)) ||
      hidden % layer_tail::pack != 0 || hidden > layer_tail::max_hidden) {
    std::fprintf(stderr, "usage: fused_layer_tail [tokens] [hidden, a multiple of 8 up to %d]\n",
                 layer_tail::max_hidden);
    return 2;
  }
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  try {
    return run(tokens, hidden);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fused_layer_tail: %s\n", e.what());
    return 1;
  }
}
