// p2p_bench — cohort's peer-to-peer all_reduce (one-shot, two-shot and the automatic choice)
// against raw ncclAllReduce, side by side in one binary, eager and replayed from CUDA graphs.
// nccl-tests' method: one process over every GPU, warm-ups, back-to-back calls timed by events
// on every rank's stream, the slowest rank counts; its -G mode: the same N back-to-back calls
// captured into one graph (cohort::group_graph), replayed, time per call. Host-timed: wall time
// of back-to-back calls, synchronised every 100. busbw = algbw * 2(n-1)/n. Then the link itself
// (one-way cudaMemcpyPeerAsync, the bound for busbw) and a whole step (for_each + all_reduce)
// captured once against the same step called directly. With one GPU it runs the engine on an
// emulated group of 2 (no NCCL: NCCL refuses two ranks on one GPU).
// Usage: p2p_bench [max bytes, default 1 GiB]
#include "timing.cuh"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace {

struct timing {
  double device_us = 0, graph_us = 0, host_us = 0;
};

template <class Run>
timing measure(cohort::device_group& group, Run&& run, std::size_t bytes) {
  const int iters = bytes <= (std::size_t{1} << 24) ? 50 : 20;
  timing t;
  t.device_us = bench::group_time_us(group, run, iters);
  const int per_graph = bytes <= (std::size_t{1} << 24) ? 20 : 4;
  auto graph = cohort::group_graph::capture(group, [&] {
    for (int k = 0; k < per_graph; ++k)
      run();
  });
  t.graph_us = bench::group_time_us(group, [&] { graph.launch(); }, iters / 4 + 1) / per_graph;
  const int calls = bytes <= (std::size_t{1} << 20) ? 2000 : 100;
  t.host_us = bench::host_us_per_call(
      run, [&] { group.synchronize(); }, calls, std::min(calls, 100));
  return t;
}

std::string cell(double v) { return std::to_string(v).substr(0, 8); }
std::string cell(const std::optional<double>& v) { return v ? cell(*v) : std::string("-"); }

} // namespace

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("p2p_bench: no GPU visible; nothing to measure.");
    return 0;
  }
  bench::print_environment();
  const std::size_t max_bytes =
      argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (std::size_t{1} << 30);
  const bool real = cohort::device_count() >= 2;
  cohort::device_group group = real ? cohort::device_group(cohort::devices())
                                    : cohort::device_group::emulated(cohort::device_ref{0}, 2);
  const std::size_t ranks = group.size();
  std::printf("# group: %zu member(s)%s\n", ranks,
              real ? "" : " emulated on GPU 0 (green-context SM shares); no NCCL baseline");
  // One-shot is measured up to 32 MiB to find where two-shot overtakes it.
  const std::size_t one_shot_max = std::size_t{32} << 20;
  cohort::p2p_clique peers(group, one_shot_max);
  cohort::p2p_clique automatic(group); // the default limit
  std::printf("# blocks per call at most: %u\n", automatic.max_blocks());
#if COHORT_WITH_NCCL
  std::vector<ncclComm_t> raw(ranks, nullptr);
  if (real) {
    int nccl_version = 0;
    ncclGetVersion(&nccl_version);
    std::printf("# NCCL %d.%d.%d; NCCL_NVLS_ENABLE=%s\n", nccl_version / 10000,
                nccl_version / 100 % 100, nccl_version % 100,
                std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset");
    std::vector<int> ids;
    for (cohort::device_ref d : group.devices())
      ids.push_back(d.get());
    cohort::check_nccl(ncclCommInitAll(raw.data(), static_cast<int>(ranks), ids.data()),
                       "ncclCommInitAll");
  }
#endif
  const std::size_t max_count = max_bytes / sizeof(float);
  cohort::distributed_buffer<float> data(group, cohort::partition::replicated(max_count, ranks));
  data.fill_bytes(0);
  group.synchronize();
  const double bus_factor = 2.0 * (ranks - 1) / ranks;
  std::printf("# automatic one-shot limit: %zu bytes per rank\n\n",
              cohort::detail::p2p::clique_access::automatic_one_shot_limit(automatic));
  std::printf("## all_reduce, eager and replayed from graphs (%zu ranks)\n\n", ranks);
  std::printf("| bytes | nccl us | nccl graph us | one-shot us | two-shot us | automatic us | "
              "automatic graph us | automatic busbw GB/s | nccl busbw GB/s | nccl / automatic | "
              "nccl graph / automatic graph | host-timed nccl us | host-timed automatic us |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<std::pair<std::size_t, double>> large_busbw;
  for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<cuda::std::span<float>> spans;
    for (std::size_t r = 0; r < ranks; ++r)
      spans.push_back(data.shard(r).data.first(count));
    auto p2p = [&](cohort::p2p_clique& c, cohort::p2p_algorithm a) {
      return [&spans, &c, a] { cohort::all_reduce(c, spans, cohort::sum, {.algorithm = a}); };
    };
    std::optional<timing> nccl, one;
#if COHORT_WITH_NCCL
    if (real)
      nccl = measure(
          group,
          [&] {
            cohort::check_nccl(ncclGroupStart(), "ncclGroupStart");
            for (std::size_t r = 0; r < ranks; ++r)
              cohort::check_nccl(ncclAllReduce(spans[r].data(), spans[r].data(), count, ncclFloat32,
                                               ncclSum, raw[r], group.stream(r).native_handle()),
                                 "ncclAllReduce");
            cohort::check_nccl(ncclGroupEnd(), "ncclGroupEnd");
          },
          bytes);
#endif
    if (bytes <= one_shot_max)
      one = measure(group, p2p(peers, cohort::p2p_algorithm::one_shot), bytes);
    const timing two = measure(group, p2p(peers, cohort::p2p_algorithm::two_shot), bytes);
    const timing aut = measure(group, p2p(automatic, cohort::p2p_algorithm::automatic), bytes);
    auto busbw = [&](double us) {
      return static_cast<double>(bytes) / (us * 1e-6) / 1e9 * bus_factor;
    };
    if (bytes >= (std::size_t{256} << 20)) large_busbw.emplace_back(bytes, busbw(aut.device_us));
    auto of = [](const std::optional<timing>& t, double timing::*field) {
      return t ? std::optional<double>((*t).*field) : std::nullopt;
    };
    std::printf("| %zu | %s | %s | %s | %.2f | %.2f | %.2f | %.1f | %s | %s | %s | %s | %.2f |\n",
                bytes, cell(of(nccl, &timing::device_us)).c_str(),
                cell(of(nccl, &timing::graph_us)).c_str(), cell(of(one, &timing::device_us)).c_str(),
                two.device_us, aut.device_us, aut.graph_us, busbw(aut.device_us),
                nccl ? cell(busbw(nccl->device_us)).c_str() : "-",
                nccl ? cell(nccl->device_us / aut.device_us).c_str() : "-",
                nccl ? cell(nccl->graph_us / aut.graph_us).c_str() : "-",
                cell(of(nccl, &timing::host_us)).c_str(), aut.host_us);
    std::fflush(stdout);
  }

  // The link: one-way cudaMemcpyPeerAsync from member 0 to member 1, the most busbw can reach.
  std::printf("\n## the link: one-way cudaMemcpyPeerAsync against p2p busbw\n\n");
  std::printf("| bytes | memcpy peer GB/s | automatic busbw GB/s | busbw / link |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (const auto& [bytes, bw] : large_busbw) {
    const std::size_t count = bytes / sizeof(float);
    float* from = data.shard(0).data.data();
    float* to = data.shard(1).data.data();
    const double ms = bench::time_ms(group.stream(0), [&] {
      cohort::check_cuda(cudaMemcpyPeerAsync(to, group.device(1).get(), from,
                                             group.device(0).get(), count * sizeof(float),
                                             group.stream(0).native_handle()),
                         "cudaMemcpyPeerAsync");
    });
    const double link = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    std::printf("| %zu | %.1f | %.1f | %.3f |\n", bytes, link, bw, bw / link);
  }

  // A whole step captured once against the same step called directly: the host's cost per step.
  std::printf("\n## a step (for_each + p2p all_reduce) captured into a graph against direct calls\n\n");
  std::printf("| bytes | direct host us/step | graph host us/step | direct device us/step | "
              "graph device us/step |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  for (const std::size_t bytes : {std::size_t{4096}, std::size_t{1} << 20}) {
    if (bytes > max_bytes) continue;
    const std::size_t count = bytes / sizeof(float);
    cohort::distributed_buffer<float> x(group, cohort::partition::replicated(count, ranks));
    x.fill_bytes(0);
    auto step = [&] {
      cohort::multi_device_for_each(group, x, [] __device__(float& v) { v = v * 0.5f + 1.0f; });
      cohort::all_reduce(automatic, x, cohort::avg);
    };
    auto graph = cohort::group_graph::capture(group, step);
    auto replay = [&] { graph.launch(); };
    auto sync = [&] { group.synchronize(); };
    std::printf("| %zu | %.2f | %.2f | %.2f | %.2f |\n", bytes,
                bench::host_us_per_call(step, sync, 2000, 100),
                bench::host_us_per_call(replay, sync, 2000, 100),
                bench::group_time_us(group, step, 50), bench::group_time_us(group, replay, 50));
  }
  group.synchronize();
#if COHORT_WITH_NCCL
  for (ncclComm_t c : raw)
    if (c != nullptr) ncclCommDestroy(c);
#endif
  return 0;
}
