// for_each_bench — multi_device_for_each and reductions against their baselines, in one run:
//   1. y = a·x + y on float (2 GiB per GPU): cohort vs thrust::for_each on one GPU, and against the
//      device-to-device copy bandwidth measured here;
//   2. strong scaling over every visible GPU: T1 / (N · TN);
//   3. host overhead of one call on a tiny range vs a cudaSetDevice + launch loop (every version
//      timed in turns, batch by batch), with cohort's NVTX ranges on (no tool attached) and
//      compiled out (for_each_bench_nvtx_off, run from here);
//   4. adaptive partitioning on an emulated uneven group (1/4 and 3/4 of the SMs) vs even split;
//   5. sum of floats: multi_device_reduce vs cub::DeviceReduce::Sum on one GPU, and scaled;
//   6. views against buffers: multi_device_for_each (v = a·v + b) and multi_device_reduce (to the
//      host through pending::wait, and into a device_result) on the same memory, through its
//      distributed_buffer and through a distributed_view made from spans of the buffer's shards
//      (the path of the user's own memory); the ratio buffer/view should be 1;
//   7. scratch from a memory resource: multi_device_reduce (pending form) and
//      multi_device_inclusive_scan with the group's default resource (the device's pool, which
//      gives its free memory back at every synchronization) against a cudaMemPool_t of the
//      benchmark's own that keeps everything (the group keeps its scratch between calls, so the
//      two should match);
//   8. a group of one against cub::DeviceReduce, 2^20 to 2^30 elements: sums, minima and maxima
//      to the host and into device memory, and operators kept in order (one_member_reduce.cuh);
//   9. the element form at the memory roofline: v = a·v + b in place on float, double, uint32,
//      half and uint8, against the copy bandwidth measured beside it, and against a kernel of this
//      program's own that calls f on register copies loaded and stored 16 bytes at a time (what the
//      element form could reach if it gave up the element's address, as
//      cub::DeviceFor::ForEachCopyN does).
// 6, 7 and 9 run on a group of one GPU and on every GPU (an emulated pair where one is visible), the
// size argument's elements per GPU. Prints Markdown tables.
// Usage: for_each_bench [elements per GPU, default 2^28]
#include "one_member_reduce.cuh"
#include "timing.cuh"

#include <cub/device/device_reduce.cuh>
#include <cuda_fp16.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
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

#if !COHORT_BENCH_HOST_OVERHEAD_ONLY
// v = a·v + b on each element: multi_device_for_each's elements form (a < 1 and b > 0 keep the
// values near 1, never denormal, however many calls run).
struct scale_shift {
  __device__ void operator()(float& v) const { v = 0.9999f * v + 0.0001f; }
};

// A view over a buffer's own memory, made from spans of its shards as a program makes one over
// memory it allocated itself: the user's-memory path, on the same bytes as the buffer.
cohort::distributed_view<float> view_over(const cohort::device_group& group,
                                          cohort::distributed_buffer<float>& buffer) {
  std::vector<cuda::std::span<float>> spans;
  for (std::size_t k = 0; k < buffer.shards(); ++k)
    spans.push_back(buffer.shard(k).data);
  return cohort::distributed_view<float>(group, spans);
}

// A memory resource of the benchmark's own, what a tuned caching allocator gives: one
// stream-ordered pool per device that keeps all it has (release threshold UINT64_MAX), so after
// the first call no allocation maps memory again. cohort calls it with the stream's device current.
class keeping_pool {
 public:
  keeping_pool() {
    const int count = cohort::device_count();
    for (int d = 0; d < count; ++d) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = d;
      cudaMemPool_t pool = nullptr;
      cohort::check_cuda(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate", d);
      pools_.push_back(pool);
      cuuint64_t keep = UINT64_MAX;
      cohort::check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                         "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)", d);
      // Peers may reach this memory, as group.enable_peer_access() lets them reach the default
      // pool's: both sides of the comparison then take the same paths.
      for (int peer = 0; peer < count; ++peer) {
        int can = 0;
        if (peer != d)
          cohort::check_cuda(cudaDeviceCanAccessPeer(&can, peer, d), "cudaDeviceCanAccessPeer",
                             peer);
        if (can == 0) continue;
        cudaMemAccessDesc access{};
        access.location.type = cudaMemLocationTypeDevice;
        access.location.id = peer;
        access.flags = cudaMemAccessFlagsProtReadWrite;
        cohort::check_cuda(cudaMemPoolSetAccess(pool, &access, 1), "cudaMemPoolSetAccess", d);
      }
    }
  }
  keeping_pool(const keeping_pool&) = delete;
  keeping_pool& operator=(const keeping_pool&) = delete;
  ~keeping_pool() {
    for (cudaMemPool_t pool : pools_) // freed as the last allocation from it goes back
      cohort::ignore_cuda_error(cudaMemPoolDestroy(pool));
  }

  void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    int device = 0;
    cohort::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    void* p = nullptr;
    const cudaError_t status = cudaMallocFromPoolAsync(
        &p, bytes, pools_.at(static_cast<std::size_t>(device)), stream.get());
    if (status == cudaErrorMemoryAllocation)
      cohort::ignore_cuda_error(status); // null: cohort reports it as out of memory
    else
      cohort::check_cuda(status, "cudaMallocFromPoolAsync", device);
    return p;
  }
  void deallocate_async(void* p, std::size_t, std::size_t, cuda::stream_ref stream) noexcept {
    cohort::ignore_cuda_error(cudaFreeAsync(p, stream.get()));
  }

 private:
  std::vector<cudaMemPool_t> pools_;
};

// The groups of sections 6 and 7: one GPU, then every GPU (an emulated pair where one is
// visible), each with the elements it holds (the size argument per GPU).
struct group_kind {
  std::string name;
  std::function<cohort::device_group()> make;
  std::size_t elements;
};

// Section 6's rows for one group: each operation through the buffer and through a view of it.
void views_rows(cohort::device_group& group, const std::string& name, std::size_t elements,
                cohort::stream_ref origin) {
  group.enable_peer_access();
  cohort::distributed_buffer<float> x(group, elements);
  cohort::on_each_shard(x, [&](cohort::shard<float> sh) { fill(x.local(sh.rank), 1.0f); });
  cohort::distributed_view<float> v = view_over(group, x);
  cohort::device_result<float> on_gpu(group);
  group.synchronize();
  float sum = 0;
  auto row = [&](const char* operation, const std::function<void(bool)>& call) {
    const auto [buffer_ms, view_ms] = bench::paired_time_ms(
        origin,
        [&] {
          group.fork(origin);
          call(false);
          group.join(origin);
        },
        [&] {
          group.fork(origin);
          call(true);
          group.join(origin);
        });
    std::printf("| %s | %s | %.1f | %.1f | %.3f |\n", operation, name.c_str(), 1e3 * buffer_ms,
                1e3 * view_ms, buffer_ms / view_ms);
  };
  row("multi_device_for_each, v = a*v + b", [&](bool through_view) {
    if (through_view)
      cohort::multi_device_for_each(group, v, scale_shift{});
    else
      cohort::multi_device_for_each(group, x, scale_shift{});
  });
  row("multi_device_reduce sum, pending::wait", [&](bool through_view) {
    sum = through_view ? cohort::multi_device_reduce(group, v, 0.0f, cuda::std::plus<>{}).wait()
                       : cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{}).wait();
  });
  row("multi_device_reduce sum into a device_result", [&](bool through_view) {
    if (through_view)
      cohort::multi_device_reduce(group, v, 0.0f, cuda::std::plus<>{}, on_gpu);
    else
      cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{}, on_gpu);
  });
  group.synchronize();
  if (!(sum > 0))
    std::printf("# views against buffers, %s: the sum came out %g\n", name.c_str(), sum);
}

// Section 7's rows for one kind of group: the same memory (views over buffers of `with_default`)
// reduced and scanned by a group on the default resource and by one on `pool`.
void scratch_rows(const group_kind& kind, keeping_pool& pool, cohort::stream_ref origin) {
  cohort::device_group with_default = kind.make();
  cohort::device_group with_pool = kind.make();
  with_pool.set_memory_resource(pool); // before it holds anything
  with_default.enable_peer_access();
  with_pool.enable_peer_access();
  cohort::distributed_buffer<float> x(with_default, kind.elements), y(with_default, kind.elements);
  cohort::on_each_shard(x, [&](cohort::shard<float> sh) { fill(x.local(sh.rank), 0.5f); });
  with_default.synchronize();
  cohort::distributed_view<float> xd = view_over(with_default, x), yd = view_over(with_default, y);
  cohort::distributed_view<float> xp = view_over(with_pool, x), yp = view_over(with_pool, y);
  float sum = 0;
  auto row = [&](const char* operation,
                 const std::function<void(cohort::device_group&, bool)>& call) {
    const auto [default_ms, pool_ms] = bench::paired_time_ms(
        origin,
        [&] {
          with_default.fork(origin);
          call(with_default, false);
          with_default.join(origin);
        },
        [&] {
          with_pool.fork(origin);
          call(with_pool, true);
          with_pool.join(origin);
        });
    std::printf("| %s | %s | %.1f | %.1f | %.3f |\n", operation, kind.name.c_str(),
                1e3 * default_ms, 1e3 * pool_ms, pool_ms / default_ms);
  };
  row("multi_device_reduce sum, pending::wait", [&](cohort::device_group& group, bool pooled) {
    sum = cohort::multi_device_reduce(group, pooled ? xp : xd, 0.0f, cuda::std::plus<>{}).wait();
  });
  row("multi_device_inclusive_scan, x into y", [&](cohort::device_group& group, bool pooled) {
    cohort::multi_device_inclusive_scan(group, pooled ? xp : xd, pooled ? yp : yd,
                                        cuda::std::plus<>{});
  });
  // The buffers go back on with_default's streams: the pool group's work is done before.
  with_pool.synchronize();
  with_default.synchronize();
  if (!(sum > 0))
    std::printf("# scratch from a memory resource, %s: the sum came out %g\n", kind.name.c_str(),
                sum);
}
#endif

using rows = std::vector<std::pair<std::string, double>>;

// Host microseconds per call of each version, on a one-element range, measured in turns.
rows host_overhead(cohort::device_ref d0) {
  cohort::device_group one{d0};
  auto group_sync = [&] { one.synchronize(); };
  const cudaStream_t raw = one.stream(0).native_handle();
  // A pair (emulated on one GPU, the same calls as two GPUs but for the device switch) against a
  // launch on each member's stream.
  cohort::device_group pair = cohort::device_group::emulated(d0, 2);
  const cudaStream_t raw_pair[2] = {pair.stream(0).native_handle(), pair.stream(1).native_handle()};
  auto pair_sync = [&] { pair.synchronize(); };
  rows r;
  std::vector<std::pair<std::function<void()>, std::function<void()>>> timed;
  auto version = [&](std::string name, std::function<void()> call, std::function<void()> sync) {
    r.emplace_back(std::move(name), 0.0);
    timed.emplace_back(std::move(call), std::move(sync));
  };
  version(
      "cudaSetDevice + kernel<<<1,1>>> (baseline)",
      [&] {
        cudaSetDevice(0);
        nothing_kernel<<<1, 1, 0, raw>>>();
      },
      group_sync);
  version(
      "cohort::launch of the same kernel",
      [&] { cohort::launch(one.stream(0), {}, nothing_kernel); }, group_sync);
  version(
      "cohort::for_each_n", [&] { cohort::for_each_n(one.stream(0), 1, nothing{}); }, group_sync);
  version(
      "cohort::multi_device_for_each over indices, group of 1",
      [&] { cohort::multi_device_for_each(one, cohort::indices(1), nothing{}); }, group_sync);
  version(
      "cudaSetDevice + kernel<<<1,1>>> on each of 2 streams (baseline)",
      [&] {
        for (cudaStream_t member : raw_pair) {
          cudaSetDevice(0);
          nothing_kernel<<<1, 1, 0, member>>>();
        }
      },
      pair_sync);
  version(
      "cohort::multi_device_for_each over indices, emulated pair",
      [&] { cohort::multi_device_for_each(pair, cohort::indices(2), nothing{}); }, pair_sync);
  const std::vector<double> us = bench::host_us_per_call_in_turns(timed);
  for (std::size_t k = 0; k < r.size(); ++k)
    r[k].second = us[k];
  return r;
}

// Whether a row of host_overhead is a baseline: the rows after it are measured against it.
[[maybe_unused]] bool is_baseline(const std::string& name) {
  return name.rfind("cudaSetDevice", 0) == 0;
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

#if !COHORT_BENCH_HOST_OVERHEAD_ONLY
// v = a·v + b on any element type section 9 measures (the integers wrap; the others stay near 1).
struct affine {
  template <class T>
  __device__ void operator()(T& v) const {
    if constexpr (std::is_integral_v<T>)
      v = v * 3u + 1u;
    else if constexpr (std::is_floating_point_v<T>)
      v = T(0.9999) * v + T(0.0001);
    else
      v = T(0.9999f * float(v) + 0.0001f);
  }
};

// f on register copies of the elements, 16 bytes loaded and stored at a time by each thread, one
// pack a thread (a grid-stride loop only past CUDA's grid limit); the last n % (16 / sizeof(T))
// elements one by one. `data` is 16-byte aligned.
template <class T, class F>
__global__ void __launch_bounds__(256) register_copy_kernel(T* data, std::size_t n, F f) {
  constexpr std::size_t per = 16 / sizeof(T);
  struct alignas(16) pack {
    T v[per];
  };
  pack* packs = reinterpret_cast<pack*>(data);
  const std::size_t whole = n / per;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = first; i < whole; i += stride) {
    pack p = packs[i];
#pragma unroll
    for (std::size_t j = 0; j < per; ++j)
      f(p.v[j]);
    packs[i] = p;
  }
  if (first < n - whole * per) f(data[whole * per + first]);
}

// One row of section 9: T's element form on `group` against the copy bandwidth and the
// register-copy kernel, each over the same bytes.
template <class T>
void roofline_row(const group_kind& kind, const char* type, cohort::stream_ref origin) {
  cohort::device_group group = kind.make();
  const std::size_t n = kind.elements;
  cohort::distributed_buffer<T> x(group, n);
  x.fill_bytes(0);
  cohort::device_buffer<T> from(n, origin), to(n, origin);
  from.fill_bytes(0);
  group.synchronize();
  origin.synchronize();
  const double bytes = 2.0 * n * sizeof(T); // every element read and written once
  const double copy_ms = bench::time_ms(origin, [&] {
    cohort::check_cuda(cudaMemcpyAsync(to.data(), from.data(), n * sizeof(T),
                                       cudaMemcpyDeviceToDevice, origin.native_handle()),
                       "cudaMemcpyAsync");
  });
  const double cohort_ms = bench::time_ms(origin, [&] {
    group.fork(origin);
    cohort::multi_device_for_each(group, x, affine{});
    group.join(origin);
  });
  const double kernel_ms = bench::time_ms(origin, [&] {
    group.fork(origin);
    cohort::on_each_shard(x, [&](cohort::shard<T> sh) {
      if (sh.data.empty()) return;
      const std::size_t packs = sh.data.size() / (16 / sizeof(T));
      const auto grid =
          static_cast<unsigned>(std::clamp<std::size_t>((packs + 255) / 256, 1, 0x7fffffff));
      cohort::scoped_device on(sh.device);
      register_copy_kernel<<<grid, 256, 0, sh.stream.native_handle()>>>(sh.data.data(),
                                                                        sh.data.size(), affine{});
      cohort::check_cuda(cudaGetLastError(), "register_copy_kernel", sh.device.get());
    });
    group.join(origin);
  });
  std::printf("| %s | %s | %.0f | %.0f | %.3f | %.3f |\n", type, kind.name.c_str(),
              gbps(bytes, copy_ms), gbps(bytes, cohort_ms), copy_ms / cohort_ms,
              copy_ms / kernel_ms);
}
#endif

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
    std::printf("| version | us per call | over the baseline us | us per call, COHORT_NVTX=0 | "
                "NVTX on - off us |\n");
    std::printf("| --- | --- | --- | --- | --- |\n");
    double baseline = 0;
    for (std::size_t i = 0; i < on.size(); ++i) {
      const bool have = i < off.size(), base = is_baseline(on[i].first);
      if (base) baseline = on[i].second;
      std::printf("| %s | %.2f | %s | %s | %s |\n", on[i].first.c_str(), on[i].second,
                  base ? "-" : bench_cell(on[i].second - baseline).c_str(),
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

  // 6 and 7 on a group of one GPU, then on every GPU (an emulated pair on one GPU).
  std::vector<group_kind> kinds;
  kinds.push_back({"1 GPU", [&] { return cohort::device_group{d0}; }, n});
  if (gpus.size() > 1)
    kinds.push_back({std::to_string(gpus.size()) + " GPUs",
                     [&] { return cohort::device_group(gpus); }, n * gpus.size()});
  else
    kinds.push_back(
        {"emulated pair on GPU 0", [&] { return cohort::device_group::emulated(d0, 2); }, n});
  if (gpus.size() == 1)
    std::printf("\n# views and scratch: one GPU visible, so a group of one and an emulated pair "
                "on it\n");

  // 6. Views against buffers: the same memory, the same operation; a view should cost nothing.
  std::printf("\n## views against buffers: the same memory through its distributed_buffer and "
              "through a distributed_view over its shards, %zu floats per GPU\n\n",
              n);
  std::printf("| operation | group | buffer us | view us | ratio (buffer/view) |\n"
              "| --- | --- | --- | --- | --- |\n");
  for (const group_kind& kind : kinds) {
    cohort::device_group group = kind.make();
    views_rows(group, kind.name, kind.elements, s);
  }

  // 7. Scratch from a memory resource: the default pool gives its free memory back at every
  // synchronization (each timed call ends with one), a pool that keeps it does not.
  {
    keeping_pool pool; // outlives the groups that allocate from it
    std::printf("\n## scratch from a memory resource: the group's default (the device's pool) "
                "against a cudaMemPool_t that keeps its memory, %zu floats per GPU\n\n",
                n);
    std::printf("| operation | group | default us | pool us | ratio (pool/default) |\n"
                "| --- | --- | --- | --- | --- |\n");
    for (const group_kind& kind : kinds)
      scratch_rows(kind, pool, s);
  }

  // 8. A group of one against cub::DeviceReduce.
  one_member::tables(s, 30);

  // 9. The element form at the memory roofline: the same bytes copied by cudaMemcpyAsync on one
  // stream (read once, written once, as the element form reads and writes each element).
  std::printf("\n## element form at the memory roofline: v = a*v + b in place, %zu elements per "
              "GPU, against a device-to-device copy of as many bytes\n\n",
              n);
  std::printf("| element | group | copy GB/s | cohort GB/s | cohort vs copy | register-copy "
              "kernel vs copy |\n| --- | --- | --- | --- | --- | --- |\n");
  for (const group_kind& kind : kinds) {
    roofline_row<float>(kind, "float", s);
    roofline_row<double>(kind, "double", s);
    roofline_row<std::uint32_t>(kind, "uint32", s);
    roofline_row<__half>(kind, "half", s);
    roofline_row<std::uint8_t>(kind, "uint8", s);
  }
  return 0;
}
#endif
