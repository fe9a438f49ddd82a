// for_each_bench — multi_device_for_each and reductions against their baselines, in one run:
//   1. y = a·x + y on float (2 GiB per GPU): cohort vs thrust::for_each on one GPU, and against the
//      device-to-device copy bandwidth measured here;
//   2. strong scaling over every visible GPU: T1 / (N · TN);
//   3. host overhead of one call on a tiny range vs a cudaSetDevice + launch loop, with cohort's
//      NVTX ranges on (no tool attached) and compiled out (for_each_bench_nvtx_off, run from here);
//   4. adaptive partitioning on an emulated uneven group (1/4 and 3/4 of the SMs) vs even split;
//   5. sum of floats: multi_device_reduce vs cub::DeviceReduce::Sum on one GPU, and scaled.
// Prints Markdown tables. Usage: for_each_bench [elements per GPU, default 2^28]
#include "timing.cuh"

#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

#if !COHORT_BENCH_HOST_OVERHEAD_ONLY
struct axpy {
  float a;
  const float* x;
  float* y;
  __device__ void operator()(std::size_t i) const { y[i] = a * x[i] + y[i]; }
};
#endif

struct nothing {
  __device__ void operator()(std::size_t) const {}
};

__global__ void nothing_kernel() {}

[[maybe_unused]] void fill(cohort::device_buffer<float>& b, float v) {
  float* p = b.data();
  cohort::for_each_n(b.stream(), b.size(),
                     [=] __device__(std::size_t i) { p[i] = v + 1e-7f * (i % 1000); });
}

[[maybe_unused]] double gbps(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

[[maybe_unused]] std::string bench_cell(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

using rows = std::vector<std::pair<std::string, double>>;

// Host microseconds per call of each version, on a one-element range.
rows host_overhead(cohort::device_ref d0) {
  cohort::device_group one{d0};
  auto group_sync = [&] { one.synchronize(); };
  const cudaStream_t raw = one.stream(0).native_handle();
  rows r;
  r.emplace_back("cudaSetDevice + kernel<<<1,1>>> (baseline)",
                 bench::host_us_per_call(
                     [&] {
                       cudaSetDevice(0);
                       nothing_kernel<<<1, 1, 0, raw>>>();
                     },
                     group_sync));
  r.emplace_back("cohort::launch of the same kernel",
                 bench::host_us_per_call([&] { cohort::launch(one.stream(0), {}, nothing_kernel); },
                                         group_sync));
  r.emplace_back("cohort::for_each_n",
                 bench::host_us_per_call([&] { cohort::for_each_n(one.stream(0), 1, nothing{}); },
                                         group_sync));
  r.emplace_back(
      "cohort::multi_device_for_each over indices, group of 1",
      bench::host_us_per_call(
          [&] { cohort::multi_device_for_each(one, cohort::indices(1), nothing{}); }, group_sync));
  return r;
}

// The rows of for_each_bench_nvtx_off (built beside this program with COHORT_NVTX=0), which
// prints "<us>\t<version>" lines; none where it is missing or fails.
[[maybe_unused]] rows nvtx_off_rows(const std::string& self) {
  const std::size_t slash = self.rfind('/');
  const std::string program =
      (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) +
      "/for_each_bench_nvtx_off";
  rows r;
  std::fflush(stdout);
  FILE* pipe = popen(program.c_str(), "r");
  if (pipe == nullptr) return r;
  char line[512];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    char* tab = std::strchr(line, '\t');
    if (tab == nullptr) continue;
    std::string name(tab + 1);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r'))
      name.pop_back();
    r.emplace_back(name, std::strtod(line, nullptr));
  }
  if (pclose(pipe) != 0) r.clear();
  return r;
}

} // namespace

#if COHORT_BENCH_HOST_OVERHEAD_ONLY
// for_each_bench_nvtx_off: the host-overhead rows alone, for for_each_bench to print beside its own.
int main() {
  if (cohort::device_count() == 0) return 1;
  for (const auto& [name, us] : host_overhead(cohort::device_ref{0}))
    std::printf("%.4f\t%s\n", us, name.c_str());
  return 0;
}
#else

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("for_each_bench: no GPU visible; nothing to measure.");
    return 0;
  }
  bench::print_environment();
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (std::size_t{1} << 28);
  const cohort::device_ref d0{0};
  cohort::stream s(d0);
  const float a = 1.0001f;

  // 1. One GPU.
  {
    cohort::device_buffer<float> x(n, s), y(n, s), z(n, s);
    fill(x, 1.0f);
    fill(y, 2.0f);
    s.synchronize();
    const double bytes = 3.0 * n * sizeof(float); // read x and y, write y
    const double copy_ms = bench::time_ms(s, [&] {
      cohort::check_cuda(cudaMemcpyAsync(z.data(), x.data(), n * sizeof(float),
                                         cudaMemcpyDeviceToDevice, s.native_handle()),
                         "cudaMemcpyAsync");
    });
    const double copy_gbps = gbps(2.0 * n * sizeof(float), copy_ms);
    const axpy f{a, x.data(), y.data()};
    const double thrust_ms = bench::time_ms(s, [&] {
      thrust::for_each(thrust::cuda::par_nosync.on(s.native_handle()),
                       thrust::counting_iterator<std::size_t>(0),
                       thrust::counting_iterator<std::size_t>(n), f);
    });
    const double single_ms = bench::time_ms(s, [&] { cohort::for_each_n(s, n, f); });
    cohort::device_group one{d0};
    const double group_ms = bench::time_ms(s, [&] {
      one.fork(s);
      cohort::multi_device_for_each(one, cohort::indices(n), f);
      one.join(s);
    });
    std::printf("\n## y = a*x + y, %zu floats (%.2f GiB moved per call), GPU 0\n\n", n,
                bytes / 1073741824.0);
    std::printf("| version | ms | GB/s | vs thrust | vs copy bandwidth (%.0f GB/s) |\n", copy_gbps);
    std::printf("| --- | --- | --- | --- | --- |\n");
    auto row = [&](const char* name, double ms) {
      std::printf("| %s | %.3f | %.0f | %.3f | %.3f |\n", name, ms, gbps(bytes, ms), thrust_ms / ms,
                  gbps(bytes, ms) / copy_gbps);
    };
    row("thrust::for_each (baseline)", thrust_ms);
    row("cohort::for_each_n", single_ms);
    row("cohort::multi_device_for_each over indices, group of 1", group_ms);
  }

  // 2. Scaling over every real GPU: strong (the same total work on 1 and on N GPUs, efficiency
  // T1 / (N·TN)) and weak (the same work per GPU, efficiency T1 / TN).
  const auto gpus = cohort::devices();
  if (gpus.size() > 1) {
    auto run_on = [&](std::size_t g, std::size_t total) {
      cohort::device_group group(std::vector<cohort::device_ref>(gpus.begin(), gpus.begin() + g));
      cohort::distributed_buffer<float> x(group, total), y(group, total);
      cohort::on_each_shard(x, [&](cohort::shard<float> sh) { fill(x.local(sh.rank), 1.0f); });
      cohort::on_each_shard(y, [&](cohort::shard<float> sh) { fill(y.local(sh.rank), 2.0f); });
      group.synchronize();
      return bench::time_ms(s, [&] {
        group.fork(s);
        cohort::on_each_shard(y, [&](cohort::shard<float> ys) {
          cohort::for_each_n(ys.stream, ys.data.size(),
                             axpy{a, x.shard(ys.rank).data.data(), ys.data.data()});
        });
        group.join(s);
      });
    };
    const std::size_t total = n * gpus.size() / 2 * 2;
    std::printf("\n## strong scaling, y = a*x + y over %zu floats in all\n\n", total);
    std::printf("| GPUs | ms | efficiency T1/(N*TN) |\n| --- | --- | --- |\n");
    double t1 = 0;
    for (std::size_t g = 1; g <= gpus.size(); ++g) {
      const double ms = run_on(g, total);
      if (g == 1) t1 = ms;
      std::printf("| %zu | %.3f | %.3f |\n", g, ms, t1 / (g * ms));
    }
    std::printf("\n## weak scaling, y = a*x + y over %zu floats per GPU\n\n", n);
    std::printf("| GPUs | ms | efficiency T1/TN |\n| --- | --- | --- |\n");
    for (std::size_t g = 1; g <= gpus.size(); ++g) {
      const double ms = run_on(g, n * g);
      if (g == 1) t1 = ms;
      std::printf("| %zu | %.3f | %.3f |\n", g, ms, t1 / ms);
    }
  } else {
    std::printf("\n## scaling: one GPU visible; the multi-GPU figures come from a multi-GPU run\n");
  }

  // 3. Host overhead of one call on a one-element range, with cohort's NVTX ranges compiled in
  // (no tool attached: each range reads one static and does nothing) and compiled out
  // (COHORT_NVTX=0, the program beside this one: one program cannot mix the two).
  {
    const auto on = host_overhead(d0);
    const auto off = nvtx_off_rows(argc > 0 ? argv[0] : "");
    std::printf("\n## host time per call on a 1-element range, GPU 0, NVTX ranges on and off\n\n");
    std::printf("| version | us per call | us per call, COHORT_NVTX=0 | NVTX on - off us |\n");
    std::printf("| --- | --- | --- | --- |\n");
    for (std::size_t i = 0; i < on.size(); ++i) {
      const bool have = i < off.size();
      std::printf("| %s | %.2f | %s | %s |\n", on[i].first.c_str(), on[i].second,
                  have ? bench_cell(off[i].second).c_str() : "-",
                  have ? bench_cell(on[i].second - off[i].second).c_str() : "-");
    }
    if (off.empty())
      std::printf(
          "\n# for_each_bench_nvtx_off did not run beside this program; its column is empty\n");
  }

  // 4. Adaptive partitioning on an emulated uneven group.
  if (cohort::sm_partitioning_available(d0)) {
    auto group = cohort::device_group::emulated(d0, std::vector<double>{1.0, 3.0});
    cohort::device_buffer<float> x(n, s), y(n, s);
    fill(x, 1.0f);
    fill(y, 2.0f);
    s.synchronize();
    const axpy f{a, x.data(), y.data()};
    const double even_ms = bench::time_ms(s, [&] {
      group.fork(s);
      cohort::multi_device_for_each(group, cohort::indices(n), f);
      group.join(s);
    });
    const auto cap = cohort::by_capability(group);
    const double capability_ms = bench::time_ms(s, [&] {
      group.fork(s);
      cohort::multi_device_for_each(group, cohort::indices(n, cohort::partition::weighted(n, cap)),
                                    f);
      group.join(s);
    });
    cohort::adaptive_balancer balancer(group);
    for (int i = 0; i < 20; ++i) { // adapt: let each call's timing reach the next
      cohort::multi_device_for_each(group, cohort::indices(n, balancer), f);
      group.synchronize();
    }
    const double adaptive_ms = bench::time_ms(s, [&] {
      group.fork(s);
      cohort::multi_device_for_each(group, cohort::indices(n, balancer), f);
      group.join(s);
    });
    std::printf(
        "\n## adaptive partitioning, y = a*x + y on an emulated group with %u and %u SMs\n\n",
        group.sm_count(0), group.sm_count(1));
    std::printf("| split | share of member 1 | ms per call | speed-up vs even |\n| --- | --- | --- "
                "| --- |\n");
    std::printf("| even | 0.500 | %.3f | 1.000 |\n", even_ms);
    std::printf("| by_capability | %.3f | %.3f | %.3f |\n", cap[1] / (cap[0] + cap[1]),
                capability_ms, even_ms / capability_ms);
    std::printf("| adaptive (after 20 calls) | %.3f | %.3f | %.3f |\n", balancer.weights()[1],
                adaptive_ms, even_ms / adaptive_ms);
  } else {
    std::printf("\n## adaptive partitioning: no green contexts here to emulate unequal GPUs\n");
  }

  // 5. Reductions: sum of n floats, host-timed to the value (both wait for their result).
  {
    cohort::device_buffer<float> x(n, s), out(1, s);
    fill(x, 0.5f);
    std::size_t temp_bytes = 0;
    cub::DeviceReduce::Sum(nullptr, temp_bytes, x.data(), out.data(), n, s.native_handle());
    cohort::device_buffer<unsigned char> temp(temp_bytes, s);
    s.synchronize();
    float host_sum = 0;
    auto cub_call = [&] {
      cub::DeviceReduce::Sum(temp.data(), temp_bytes, x.data(), out.data(), n, s.native_handle());
      cudaMemcpyAsync(&host_sum, out.data(), sizeof(float), cudaMemcpyDeviceToHost,
                      s.native_handle());
      s.synchronize();
    };
    cohort::device_group one{d0};
    cohort::distributed_buffer<float> xd(one, n);
    x.copy_to(xd.local(0));
    one.synchronize();
    auto cohort_call = [&] {
      host_sum = cohort::multi_device_reduce(one, xd, 0.0f, cuda::std::plus<>{}).wait();
    };
    auto host_ms = [](const std::function<void()>& f) {
      for (int i = 0; i < 3; ++i)
        f();
      std::vector<double> v;
      for (int i = 0; i < 20; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        v.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
      }
      return bench::median(v);
    };
    const double cub_ms = host_ms(cub_call);
    const double cohort_ms = host_ms(cohort_call);
    std::printf("\n## sum of %zu floats, host-timed to the value\n\n", n);
    std::printf("| version | ms | GB/s | vs CUB |\n| --- | --- | --- | --- |\n");
    std::printf("| cub::DeviceReduce::Sum, 1 GPU (baseline) | %.3f | %.0f | 1.000 |\n", cub_ms,
                gbps(n * 4.0, cub_ms));
    std::printf("| cohort::multi_device_reduce, group of 1 | %.3f | %.0f | %.3f |\n", cohort_ms,
                gbps(n * 4.0, cohort_ms), cub_ms / cohort_ms);
    if (gpus.size() > 1) {
      cohort::device_group all(gpus);
      cohort::distributed_buffer<float> xa(all, n);
      cohort::on_each_shard(xa, [&](cohort::shard<float> sh) { fill(xa.local(sh.rank), 0.5f); });
      all.synchronize();
      const double all_ms = host_ms([&] {
        host_sum = cohort::multi_device_reduce(all, xa, 0.0f, cuda::std::plus<>{}).wait();
      });
      std::printf("| cohort::multi_device_reduce, %zu GPUs | %.3f | %.0f | %.3f |\n", gpus.size(),
                  all_ms, gbps(n * 4.0, all_ms), cub_ms / all_ms);
    }
  }
  return 0;
}
#endif
