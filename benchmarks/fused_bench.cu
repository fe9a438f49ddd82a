// fused_bench — the tail of a tensor-parallel layer (all_reduce of bf16 partial outputs, residual
// add, RMSNorm) fused into one kernel per GPU through a cohort::p2p_handle, against the unfused
// sequence (cohort's p2p all_reduce accumulating in float, then a norm kernel; and NCCL's
// all_reduce then the same norm where NCCL and 2+ GPUs are there), for hidden sizes 4096 and 8192
// and 1 to 128 tokens. Eager: back-to-back calls timed by events on every rank's stream, the
// slowest rank counts (benchmarks/timing.cuh). Graph: 20 calls captured into one
// cohort::group_graph, replayed, time per call. Goal on 2 H200s: fused >= 1.3 x unfused up to
// 128 KiB per rank. With one GPU it runs on an emulated pair (no NCCL).
// Usage: fused_bench
#include "../examples/fused_layer_tail/layer_tail.cuh"
#include "timing.cuh"

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace {

struct timing {
  double eager_us = 0, graph_us = 0;
};

timing measure(cohort::device_group& group, const std::function<void()>& run) {
  timing t;
  t.eager_us = bench::group_time_us(group, run, 200);
  constexpr int per_graph = 20;
  auto graph = cohort::group_graph::capture(group, [&] {
    for (int k = 0; k < per_graph; ++k)
      run();
  });
  t.graph_us = bench::group_time_us(
                   group, [&] { graph.launch(); }, 20) /
               per_graph;
  return t;
}

} // namespace

int main() {
  if (cohort::device_count() == 0) {
    std::puts("fused_bench: no GPU visible; nothing to measure.");
    return 0;
  }
  bench::print_environment();
  const bool real = cohort::device_count() >= 2;
  cohort::device_group group = real ? cohort::device_group(cohort::devices())
                                    : cohort::device_group::emulated(cohort::device_ref{0}, 2);
  std::printf("# group: %zu member(s)%s\n", group.size(),
              real ? "" : " emulated on GPU 0 (green-context SM shares); no NCCL baseline");
  cohort::p2p_clique peers(group);
#if COHORT_WITH_NCCL
  std::unique_ptr<cohort::nccl_clique> nccl;
  if (real) nccl = std::make_unique<cohort::nccl_clique>(group);
#endif
  constexpr int max_tokens = 128;

  std::printf("\n## fused layer tail against unfused (us per call)\n\n");
  std::printf("| hidden | tokens | KiB per rank | unfused us | fused us | speed-up | unfused graph "
              "us | fused graph us | graph speed-up | nccl+norm us |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const int hidden : {4096, 8192}) {
    layer_tail::layer layer(group, peers, max_tokens, hidden);
    std::vector<std::vector<layer_tail::bf16>> partial(
        group.size(),
        std::vector<layer_tail::bf16>(std::size_t(max_tokens) * hidden, __float2bfloat16(0.25f)));
    layer.load(
        partial,
        std::vector<layer_tail::bf16>(std::size_t(max_tokens) * hidden, __float2bfloat16(0.5f)),
        std::vector<layer_tail::bf16>(std::size_t(hidden), __float2bfloat16(1.0f)));
    for (int tokens = 1; tokens <= max_tokens; tokens *= 2) {
      const timing unfused = measure(group, [&] { layer.unfused(tokens); });
      const timing fused = measure(group, [&] { layer.fused(tokens); });
      std::string nccl_cell = "-";
#if COHORT_WITH_NCCL
      if (nccl)
        nccl_cell = std::to_string(bench::group_time_us(
                                       group, [&] { layer.unfused_nccl(*nccl, tokens); }, 200))
                        .substr(0, 8);
#endif
      std::printf("| %d | %d | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", hidden,
                  tokens, std::size_t(tokens) * hidden * sizeof(layer_tail::bf16) / 1024,
                  unfused.eager_us, fused.eager_us, unfused.eager_us / fused.eager_us,
                  unfused.graph_us, fused.graph_us, unfused.graph_us / fused.graph_us,
                  nccl_cell.c_str());
    }
  }
  std::printf("\n# goal on 2 H200s: speed-up >= 1.3 up to 128 KiB per rank, eager and graph\n");
  return 0;
}
