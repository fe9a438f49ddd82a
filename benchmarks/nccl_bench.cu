// nccl_bench — cohort's NCCL collectives against raw NCCL calls, side by side in one binary, with
// the method of nccl-tests: one process driving every visible GPU, warm-ups, then `iters`
// back-to-back calls timed by events on every rank's stream (the slowest rank counts);
// algbw = bytes / time, busbw = algbw * 2(n-1)/n for all_reduce and (n-1)/n for all_gather and
// reduce_scatter. Prints Markdown tables; the ratio is cohort's busbw over raw NCCL's.
// Usage: nccl_bench [max bytes, default 1 GiB]
#include "timing.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("nccl_bench: no GPU visible; nothing to measure.");
    return 0;
  }
  bench::print_environment();
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  std::printf("# NCCL %d.%d.%d; NCCL_NVLS_ENABLE=%s; NCCL_P2P_DISABLE=%s; NCCL_SHM_DISABLE=%s\n",
              nccl_version / 10000, nccl_version / 100 % 100, nccl_version % 100,
              std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset",
              std::getenv("NCCL_P2P_DISABLE") ? std::getenv("NCCL_P2P_DISABLE") : "unset",
              std::getenv("NCCL_SHM_DISABLE") ? std::getenv("NCCL_SHM_DISABLE") : "unset");
  const std::size_t max_bytes =
      argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (std::size_t{1} << 30);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group); // cohort's default: creation bounded, calls as fast as raw NCCL
  cohort::nccl_clique bounded(group, cohort::default_nccl_timeout, cohort::nccl_calls::bounded);
  const std::size_t ranks = group.size();
  // The baseline: what a user of raw NCCL writes, blocking communicators from ncclCommInitAll.
  std::vector<ncclComm_t> raw_comms(ranks);
  {
    std::vector<int> ids;
    for (cohort::device_ref d : group.devices())
      ids.push_back(d.get());
    cohort::check_nccl(ncclCommInitAll(raw_comms.data(), static_cast<int>(ranks), ids.data()),
                       "ncclCommInitAll");
  }
  const double bus_factor = ranks > 1 ? 2.0 * (ranks - 1) / ranks : 1.0;

  const std::size_t max_count = max_bytes / sizeof(float);
  cohort::distributed_buffer<float> send(group, cohort::partition::replicated(max_count, ranks));
  cohort::distributed_buffer<float> recv(group, cohort::partition::replicated(max_count, ranks));
  send.fill_bytes(0);
  recv.fill_bytes(0);
  group.synchronize();

  std::printf("\n## all_reduce (sum, float), %zu rank(s) in one process\n\n", ranks);
  std::printf(
      "| bytes | raw in-place us | cohort in-place us | raw busbw GB/s | cohort busbw GB/s | "
      "ratio | raw out-of-place us | cohort out-of-place us | ratio | bounded in-place us | "
      "bounded ratio |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
    const std::size_t count = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
    const int iters = bytes <= (std::size_t{1} << 24) ? 50 : 20;
    auto raw = [&](bool in_place) {
      cohort::check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t r = 0; r < ranks; ++r) {
        float* s = send.shard(r).data.data();
        float* d = in_place ? s : recv.shard(r).data.data();
        cohort::check_nccl(ncclAllReduce(s, d, count, ncclFloat32, ncclSum, raw_comms[r],
                                         group.stream(r).native_handle()),
                           "ncclAllReduce");
      }
      cohort::check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    };
    auto ours = [&](bool in_place, cohort::nccl_clique& comms) {
      cohort::nccl_group batch;
      for (std::size_t r = 0; r < ranks; ++r) {
        auto s = send.shard(r).data.first(count);
        if (in_place)
          cohort::all_reduce(comms.rank(r), group.stream(r), s, cohort::sum);
        else
          cohort::all_reduce(comms.rank(r), group.stream(r), s, recv.shard(r).data.first(count),
                             cohort::sum);
      }
      batch.end();
    };
    const double raw_in = bench::group_time_us(
        group, [&] { raw(true); }, iters);
    const double ours_in = bench::group_time_us(
        group, [&] { ours(true, nccl); }, iters);
    const double raw_out = bench::group_time_us(
        group, [&] { raw(false); }, iters);
    const double ours_out = bench::group_time_us(
        group, [&] { ours(false, nccl); }, iters);
    const double bounded_in = bench::group_time_us(
        group, [&] { ours(true, bounded); }, iters);
    const double b = static_cast<double>(count * sizeof(float));
    auto busbw = [&](double us) { return b / (us * 1e-6) / 1e9 * bus_factor; };
    std::printf("| %zu | %.2f | %.2f | %.1f | %.1f | %.3f | %.2f | %.2f | %.3f | %.2f | %.3f |\n",
                count * sizeof(float), raw_in, ours_in, busbw(raw_in), busbw(ours_in),
                raw_in / ours_in, raw_out, ours_out, raw_out / ours_out, bounded_in,
                raw_in / bounded_in);
  }

  // all_gather and reduce_scatter at large sizes.
  std::printf("\n## all_gather and reduce_scatter (float), %zu rank(s)\n\n", ranks);
  std::printf("| collective | bytes per rank | raw us | cohort us | raw busbw GB/s | cohort busbw "
              "GB/s | ratio |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  const double gather_factor = ranks > 1 ? static_cast<double>(ranks - 1) / ranks : 1.0;
  for (std::size_t bytes = std::size_t{1} << 22; bytes * ranks <= max_bytes; bytes *= 8) {
    const std::size_t count = bytes / sizeof(float);
    const double raw_g = bench::group_time_us(
        group,
        [&] {
          cohort::check_nccl(ncclGroupStart(), "ncclGroupStart");
          for (std::size_t r = 0; r < ranks; ++r)
            cohort::check_nccl(ncclAllGather(send.shard(r).data.data(), recv.shard(r).data.data(),
                                             count, ncclFloat32, raw_comms[r],
                                             group.stream(r).native_handle()),
                               "ncclAllGather");
          cohort::check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        },
        20);
    const double ours_g = bench::group_time_us(
        group,
        [&] {
          cohort::nccl_group batch;
          for (std::size_t r = 0; r < ranks; ++r)
            cohort::all_gather(nccl.rank(r), group.stream(r), send.shard(r).data.first(count),
                               recv.shard(r).data.first(count * ranks));
          batch.end();
        },
        20);
    const double raw_s = bench::group_time_us(
        group,
        [&] {
          cohort::check_nccl(ncclGroupStart(), "ncclGroupStart");
          for (std::size_t r = 0; r < ranks; ++r)
            cohort::check_nccl(ncclReduceScatter(send.shard(r).data.data(),
                                                 recv.shard(r).data.data(), count, ncclFloat32,
                                                 ncclSum, raw_comms[r],
                                                 group.stream(r).native_handle()),
                               "ncclReduceScatter");
          cohort::check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        },
        20);
    const double ours_s = bench::group_time_us(
        group,
        [&] {
          cohort::nccl_group batch;
          for (std::size_t r = 0; r < ranks; ++r)
            cohort::reduce_scatter(nccl.rank(r), group.stream(r),
                                   send.shard(r).data.first(count * ranks),
                                   recv.shard(r).data.first(count), cohort::sum);
          batch.end();
        },
        20);
    const double total = static_cast<double>(bytes) * ranks;
    auto bw = [&](double us) { return total / (us * 1e-6) / 1e9 * gather_factor; };
    std::printf("| all_gather | %zu | %.1f | %.1f | %.1f | %.1f | %.3f |\n", bytes, raw_g, ours_g,
                bw(raw_g), bw(ours_g), raw_g / ours_g);
    std::printf("| reduce_scatter | %zu | %.1f | %.1f | %.1f | %.1f | %.3f |\n", bytes, raw_s,
                ours_s, bw(raw_s), bw(ours_s), raw_s / ours_s);
  }
  nccl.wait();
  bounded.wait();
  group.synchronize();
  for (ncclComm_t c : raw_comms)
    ncclCommDestroy(c);
  return 0;
}
