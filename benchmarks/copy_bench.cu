// copy_bench — cohort's peer copy (device_buffer::copy_to) against raw cudaMemcpyPeerAsync, one
// way (GPU 0 to GPU 1) and both ways at once, side by side in one binary: 5 warm-ups, 5 rounds of
// back-to-back copies timed by events on every stream involved (the slowest counts), median
// round. Two forms of copy_to:
//   - copy_to(target, stream): the copy on one stream, ordered by nothing else — what the raw call
//     does, so the ratio is what cohort's wrapper costs;
//   - copy_to(target) ("ordered"): also orders the copy after the target stream's earlier work and
//     the target stream after the copy, two cross-device dependencies per copy that raw calls
//     leave to the user; its ratio shows what that safety costs back to back.
// Buffers of each direction sit on their own streams so that the two directions can overlap.
// With one GPU, both ends are GPU 0 (a copy within the GPU).
// Usage: copy_bench [max bytes, default 1 GiB]
#include "timing.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("copy_bench: no GPU visible; nothing to measure.");
    return 0;
  }
  bench::print_environment();
  const std::size_t max_bytes =
      argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (std::size_t{1} << 30);
  const cohort::device_ref d0{0}, d1{cohort::device_count() >= 2 ? 1 : 0};
  if (d0 != d1) {
    cohort::enable_peer_access(d0, d1);
    cohort::enable_peer_access(d1, d0);
  }
  std::printf("# GPU %d <-> GPU %d%s\n\n", d0.get(), d1.get(),
              d0 == d1 ? " (one GPU: copies within it)" : "");
  cohort::stream s0(d0), s1(d1), t0(d0), t1(d1); // sources' and targets' streams
  std::printf("| bytes | raw one-way us | cohort one-way us | raw GB/s | cohort GB/s | ratio | "
              "ordered one-way us | ordered ratio | raw both-ways us | cohort both-ways us | "
              "both-ways ratio | ordered both-ways us | ordered both-ways ratio |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (std::size_t bytes = std::size_t{4} << 10; bytes <= max_bytes; bytes *= 4) {
    const std::size_t n = bytes / sizeof(float);
    cohort::device_buffer<float> a0(n, s0), a1(n, s1), b0(n, t0), b1(n, t1);
    a0.fill_bytes(1);
    a1.fill_bytes(2);
    const int iters = bytes >= (std::size_t{16} << 20) ? 20 : 100;
    const double raw_one = bench::streams_time_us(
        {s0},
        [&] {
          cohort::check_cuda(cudaMemcpyPeerAsync(b1.data(), d1.get(), a0.data(), d0.get(), bytes,
                                                 s0.native_handle()),
                             "cudaMemcpyPeerAsync", d0.get());
        },
        iters);
    const double ours_one = bench::streams_time_us(
        {s0}, [&] { a0.copy_to(b1, s0); }, iters);
    const double ordered_one = bench::streams_time_us(
        {s0, t1}, [&] { a0.copy_to(b1); }, iters);
    const double raw_both = bench::streams_time_us(
        {s0, s1},
        [&] {
          cohort::check_cuda(cudaMemcpyPeerAsync(b1.data(), d1.get(), a0.data(), d0.get(), bytes,
                                                 s0.native_handle()),
                             "cudaMemcpyPeerAsync", d0.get());
          cohort::check_cuda(cudaMemcpyPeerAsync(b0.data(), d0.get(), a1.data(), d1.get(), bytes,
                                                 s1.native_handle()),
                             "cudaMemcpyPeerAsync", d1.get());
        },
        iters);
    const double ours_both = bench::streams_time_us(
        {s0, s1},
        [&] {
          a0.copy_to(b1, s0);
          a1.copy_to(b0, s1);
        },
        iters);
    const double ordered_both = bench::streams_time_us(
        {s0, s1, t0, t1},
        [&] {
          a0.copy_to(b1);
          a1.copy_to(b0);
        },
        iters);
    auto gbps = [](double b, double us) { return b / (us * 1e-6) / 1e9; };
    std::printf(
        "| %zu | %.2f | %.2f | %.1f | %.1f | %.3f | %.2f | %.3f | %.2f | %.2f | %.3f | %.2f "
        "| %.3f |\n",
        bytes, raw_one, ours_one, gbps(bytes, raw_one), gbps(bytes, ours_one), raw_one / ours_one,
        ordered_one, raw_one / ordered_one, raw_both, ours_both, raw_both / ours_both, ordered_both,
        raw_both / ordered_both);
    std::fflush(stdout);
    // The target holds the source's bytes (the first few, checked).
    t1.synchronize();
    s0.synchronize();
    float check[4];
    const cohort::scoped_device on(d1); // a copy of pool memory, with its device current
    cohort::check_cuda(cudaMemcpy(check, b1.data(), sizeof check, cudaMemcpyDeviceToHost),
                       "cudaMemcpy", d1.get());
    float expected;
    std::memset(&expected, 1, sizeof expected);
    for (float v : check)
      if (std::memcmp(&v, &expected, sizeof v) != 0) {
        std::printf("copy_bench: a copied element is wrong\n");
        return 1;
      }
  }
  return 0;
}
