// two_gpus — the classic dual-GPU program, done with cohort: show each GPU's memory, put a 2 GiB
// buffer on each, fill on both, copy GPU 0's buffer to GPU 1 over the peer link, scale on both at
// once, check every element on the host, and say how long each step took. With one GPU it runs on
// an emulated group of 2 (two logical devices on GPU 0) and says so.
//
//   build/examples/two_gpus
//
// The textbook version of this program has a handful of classic bugs; each is named below where
// cohort (or the way this program is written) avoids it:
//   - sizes in int: 2^29 floats is 2 GiB, and the two buffers together 4 GiB; `int bytes = n * 4`
//     overflows at 2 GiB. Every count and byte size here is a std::size_t.
//   - pointer arithmetic on void*: `(void*)p + offset` counts bytes (a GNU extension) where the
//     author meant elements. Buffers here are typed (`device_buffer<float>`): `data() + i` is
//     element i.
//   - one managed allocation split by hand between the GPUs (`cudaMallocManaged` then `p` and
//     `p + n/2`), which then migrates pages back and forth under the kernels. Here each GPU
//     allocates its own memory on its own stream.
//   - a cudaSetDevice loop that leaves the wrong device current, and kernels on the legacy default
//     stream that serialise everything. Here every call runs under its own device and each GPU
//     has its own non-blocking stream (the group's).
//   - a peer copy without peer access, silently staged through host memory; and
//     cudaEventElapsedTime on events of two different devices, which is an error. Here peer access
//     is enabled explicitly and each step is timed on the stream it ran on.
#include <cohort/cohort.cuh>

#include <cuda/std/limits>

#include <cstdio>
#include <exception>
#include <vector>

namespace {

// The value GPU 0 writes at element i. The modulus is a prime below 2^24, so the value and the
// values scaled from it below are exact in float, and an element read from the wrong offset is
// caught unless the offset is a multiple of the prime.
__host__ __device__ float pattern(std::size_t i) {
  return static_cast<float>(i % 1'000'003);
}

// Each kernel is a cohort::for_each_n over one buffer on one stream. Each lambda is defined in one
// function, so a call on 1 element (the warm-up below) launches the same kernel as the real one.
void fill_with_pattern(cohort::stream_ref s, float* x, std::size_t n) {
  cohort::for_each_n(s, n, [=] __device__(std::size_t i) { x[i] = pattern(i); });
}
// Poisons a buffer with NaN: stream-ordered memory is uninitialised and may still hold a previous
// run's right answer, so a copy that never happened could otherwise pass the check.
void fill_with_nan(cohort::stream_ref s, float* x, std::size_t n) {
  cohort::for_each_n(s, n, [=] __device__(std::size_t i) {
    x[i] = cuda::std::numeric_limits<float>::quiet_NaN();
  });
}
void scale_and_add(cohort::stream_ref s, float* x, std::size_t n, float a, float b) {
  cohort::for_each_n(s, n, [=] __device__(std::size_t i) { x[i] = a * x[i] + b; });
}

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// Decimal gigabytes per second, as bandwidths are quoted.
double gb_per_s(std::size_t bytes, double ms) {
  return static_cast<double>(bytes) / ms / 1e6;
}

// Times what `enqueue` puts on `s` with two timing events recorded on `s` itself (events of two
// devices cannot be compared). Returns at once; read the time with `ms()` after a synchronise.
struct timed_step {
  cohort::event start, stop;
  explicit timed_step(cohort::device_ref d)
      : start(d, cohort::event::timing::on)
      , stop(d, cohort::event::timing::on) {}
  template <class F>
  void run(cohort::stream_ref s, F&& enqueue) {
    start.record(s);
    enqueue();
    stop.record(s);
  }
  double ms() const { return cohort::elapsed(start, stop).count(); }
};

std::size_t count_wrong(const std::vector<float>& got, float a, float b) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    wrong += got[i] != a * pattern(i) + b;
  return wrong;
}

int run() {
  const int visible = cohort::device_count();
  if (visible == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  const bool real = visible >= 2;
  // The group owns one stream per member; it is declared before the buffers, which are allocated
  // and freed on its streams and so must go first.
  cohort::device_group group =
      real ? cohort::device_group{cohort::device_ref{0}, cohort::device_ref{1}}
           : cohort::device_group::emulated(cohort::device_ref{0}, 2);
  if (real)
    std::printf("%d GPUs visible; using GPU 0 and GPU 1.\n", visible);
  else
    std::printf("1 GPU visible: running on an emulated group of 2 logical devices on GPU 0%s.\n",
                group.splits_sms() ? " (each with its own half of the SMs)" : "");

  for (std::size_t r = 0; r < (real ? group.size() : 1); ++r) {
    const cohort::device_ref d = group.device(r);
    const cohort::device_properties p = cohort::properties(d);
    const cohort::free_and_total memory = cohort::memory_info(d);
    std::printf("GPU %d: %s, %d SMs, %.2f GiB free of %.2f GiB, bus %s\n", d.get(), p.name.c_str(),
                p.multiprocessors, memory.free / gib, memory.total / gib, p.pci_bus_id.c_str());
  }

  // 2^29 floats: 2 GiB per buffer, 4 GiB in all, computed in std::size_t. Halved while the buffers
  // would not fit in what the GPU has free (both land on GPU 0 in an emulated group), so the
  // program runs on a small or busy GPU too.
  std::size_t n = std::size_t{1} << 29;
  const std::size_t per_device = real ? 1 : 2;
  const std::size_t headroom = std::size_t{256} << 20; // for CUB, the runtime, other processes
  for (std::size_t r = 0; r < group.size(); ++r)
    while (n > (std::size_t{1} << 20) &&
           per_device * n * sizeof(float) + headroom > cohort::memory_info(group.device(r)).free)
      n /= 2;
  const std::size_t bytes = n * sizeof(float);
  std::printf("one buffer of %zu floats (%.2f GiB) per member, %.2f GiB in all\n", n, bytes / gib,
              2 * bytes / gib);

  // Peer access, both ways, asked for explicitly (it is never turned on behind your back). Where
  // the GPUs have no peer path the copy below still works, staged by CUDA through host memory.
  const bool peer = group.enable_peer_access();
  if (real)
    std::printf("peer access between GPU 0 and GPU 1: %s\n",
                peer ? "enabled" : "not possible, the copy goes through host memory");

  const cohort::stream_ref s0 = group.stream(0), s1 = group.stream(1);
  cohort::device_buffer<float> x0(n, s0); // on member 0's device, allocated in s0's order
  cohort::device_buffer<float> x1(n, s1);

  // Warm-ups, untimed: CUDA loads a kernel on its first launch, and a timing that includes the
  // load says nothing about the kernel. One element each, results overwritten below.
  fill_with_pattern(s0, x0.data(), 1);
  fill_with_nan(s1, x1.data(), 1);
  scale_and_add(s0, x0.data(), 1, 1.0f, 0.0f);
  scale_and_add(s1, x1.data(), 1, 1.0f, 0.0f);

  // Step 1, on both GPUs at once: GPU 0 writes the data, GPU 1 poisons the buffer it will receive
  // into. Nothing here waits for the host: the two launches return at once and run side by side.
  timed_step fill0(x0.device()), fill1(x1.device());
  fill0.run(s0, [&] { fill_with_pattern(s0, x0.data(), n); });
  fill1.run(s1, [&] { fill_with_nan(s1, x1.data(), n); });

  // Step 2: GPU 0's buffer into GPU 1's, over the peer link. device_buffer::copy_to enqueues
  // cudaMemcpyPeerAsync on the source's stream after the work already on the target's stream (the
  // poison), and makes the target's stream wait for the copy. The copy is timed on s0, where it
  // runs; s0 first waits for s1 (join) so that the timing starts with the copy itself, after a
  // warm-up copy of one float (the first peer copy sets up the path).
  group.join(s0);
  cohort::check_cuda(cudaMemcpyPeerAsync(x1.data(), x1.device().get(), x0.data(), x0.device().get(),
                                         sizeof(float), s0.native_handle()),
                     "cudaMemcpyPeerAsync (warm-up)", x0.device().get());
  timed_step copy(x0.device());
  copy.run(s0, [&] { x0.copy_to(x1); });

  // Step 3, on both GPUs at once: GPU 0 scales its buffer by 3 (after the copy has read it, since
  // both are on s0), GPU 1 doubles what it received and adds 1 (after the copy, since copy_to made
  // s1 wait for it).
  timed_step scale0(x0.device()), scale1(x1.device());
  scale0.run(s0, [&] { scale_and_add(s0, x0.data(), n, 3.0f, 0.0f); });
  scale1.run(s1, [&] { scale_and_add(s1, x1.data(), n, 2.0f, 1.0f); });

  // Step 4: both buffers back to the host, one after the other into one host vector, and every
  // element checked. The host waits here, and only here.
  std::vector<float> host(n);
  timed_step back0(x0.device()), back1(x1.device());
  back0.run(s0, [&] { x0.copy_to_host(host); });
  group.synchronize();
  const std::size_t wrong0 = count_wrong(host, 3.0f, 0.0f);
  back1.run(s1, [&] { x1.copy_to_host(host); });
  group.synchronize();
  const std::size_t wrong1 = count_wrong(host, 2.0f, 1.0f);

  const char* member0 = real ? "GPU 0" : "member 0";
  const char* member1 = real ? "GPU 1" : "member 1";
  std::printf("step 1, fill on both at once: %s wrote %.2f GiB in %.3f ms (%.1f GB/s), "
              "%s poisoned %.2f GiB in %.3f ms (%.1f GB/s)\n",
              member0, bytes / gib, fill0.ms(), gb_per_s(bytes, fill0.ms()), member1, bytes / gib,
              fill1.ms(), gb_per_s(bytes, fill1.ms()));
  std::printf("step 2, %s copy %s -> %s: %.2f GiB in %.3f ms (%.1f GB/s)\n",
              real ? (peer ? "peer" : "host-staged") : "device-local", member0, member1,
              bytes / gib, copy.ms(), gb_per_s(bytes, copy.ms()));
  std::printf("step 3, scale on both at once: %s %.3f ms, %s %.3f ms (%.1f and %.1f GB/s read "
              "and written)\n",
              member0, scale0.ms(), member1, scale1.ms(), gb_per_s(2 * bytes, scale0.ms()),
              gb_per_s(2 * bytes, scale1.ms()));
  std::printf("step 4, copy back to pageable host memory: %s %.1f ms (%.1f GB/s), %s %.1f ms "
              "(%.1f GB/s)\n",
              member0, back0.ms(), gb_per_s(bytes, back0.ms()), member1, back1.ms(),
              gb_per_s(bytes, back1.ms()));
  std::printf("checked on the host: %zu of %zu wrong on %s, %zu of %zu wrong on %s\n", wrong0, n,
              member0, wrong1, n, member1);
  if (wrong0 != 0 || wrong1 != 0) return 1;
  std::puts("two_gpus ok");
  return 0;
}

} // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) { // cohort's errors name the call, the device and the fix
    std::fprintf(stderr, "two_gpus failed: %s\n", e.what());
    return 1;
  }
}
