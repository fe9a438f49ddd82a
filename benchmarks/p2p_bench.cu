// p2p_bench — cohort's peer-to-peer all_reduce (one-shot, two-shot and the automatic choice)
// against raw ncclAllReduce, side by side in one binary: nccl-tests' method (one process over
// every GPU, warm-ups, back-to-back calls timed by events on every rank's stream, the slowest
// rank counts), and host-timed (wall time of back-to-back calls, synchronised every 100).
// busbw = algbw * 2(n-1)/n. With one GPU it runs the engine on an emulated group of 2 (no NCCL:
// NCCL refuses two ranks on one GPU).
// Usage: p2p_bench [max bytes, default 1 GiB]
#include "timing.cuh"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace {

struct timing {
  double device_us = 0, host_us = 0;
};

template <class Run>
timing measure(const cohort::device_group& group, Run&& run, std::size_t bytes) {
  const int iters = bytes <= (std::size_t{1} << 24) ? 50 : 20;
  timing t;
  t.device_us = bench::group_time_us(group, run, iters);
  const int calls = bytes <= (std::size_t{1} << 20) ? 2000 : 100;
  t.host_us = bench::host_us_per_call(
      run, [&] { group.synchronize(); }, calls, std::min(calls, 100));
  return t;
}

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
              automatic.automatic_one_shot_limit());
  std::printf(
      "| bytes | nccl us | one-shot us | two-shot us | automatic us | automatic busbw GB/s | "
      "nccl busbw GB/s | nccl / automatic | host-timed nccl us | host-timed automatic us |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
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
    auto cell = [](const std::optional<timing>& t, bool host) {
      return t ? std::to_string(host ? t->host_us : t->device_us).substr(0, 8) : std::string("-");
    };
    std::printf("| %zu | %s | %s | %.2f | %.2f | %.1f | %s | %s | %s | %.2f |\n", bytes,
                cell(nccl, false).c_str(), cell(one, false).c_str(), two.device_us, aut.device_us,
                busbw(aut.device_us),
                nccl ? std::to_string(busbw(nccl->device_us)).substr(0, 6).c_str() : "-",
                nccl ? std::to_string(nccl->device_us / aut.device_us).substr(0, 5).c_str() : "-",
                cell(nccl, true).c_str(), aut.host_us);
    std::fflush(stdout);
  }
  group.synchronize();
#if COHORT_WITH_NCCL
  for (ncclComm_t c : raw)
    if (c != nullptr) ncclCommDestroy(c);
#endif
  return 0;
}
