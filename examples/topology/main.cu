// topology — what `nvidia-smi topo -m` and CUDA's p2pBandwidthLatencyTest tell, from cohort: the
// GPUs, which pairs reach each other's memory and how (cohort::topology), and what the links
// measure: peer copy bandwidth one way and both ways at once, and the latency of a small peer
// copy, between every two GPUs; each GPU's copy within its own memory for reference. Every copy
// is checked, so a figure is never printed for a copy that went wrong.
//
//   build/examples/topology
//
// The copies are cudaMemcpyPeerAsync on the source GPU's stream, timed with events on that stream
// (events of two devices cannot be compared, so a copy is always timed on one device).
#include <cohort/cohort.cuh>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr std::size_t copy_bytes = std::size_t{256} << 20; // 256 MiB, as a std::size_t
constexpr std::size_t words = copy_bytes / sizeof(std::uint32_t);
constexpr int bandwidth_reps = 10, bandwidth_warmups = 2;
constexpr int latency_reps = 100, latency_warmups = 10;

// Holds a stream's work until the host has queued all of it, so that a timing measures the GPU,
// not how fast the host enqueues (which matters for small copies: a cudaMemcpyPeerAsync call
// costs the host about as long as the copy itself). A kernel spins on a flag in pinned host memory
// that the host raises once everything is queued; it gives up after a second, in case the queue
// filled and the host is blocked (then the figure includes host time, and the program says so).
__global__ void wait_for_host(const volatile int* open, int* timed_out) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*open == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > 1'000'000'000ull) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

class host_gate {
 public:
  host_gate() {
    void* p = nullptr;
    // Portable: usable from every GPU; mapped: kernels read it in place.
    cohort::check_cuda(
        cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped),
        "cudaHostAlloc");
    flags_ = static_cast<int*>(p);
    flags_[0] = flags_[1] = 0;
  }
  ~host_gate() { cohort::ignore_cuda_error(cudaFreeHost(flags_)); }
  host_gate(const host_gate&) = delete;
  host_gate& operator=(const host_gate&) = delete;

  // Closes the gate and queues the waiting kernel on `s`.
  void close(cohort::stream_ref s) {
    std::atomic_ref<int>(flags_[0]).store(0, std::memory_order_release);
    cohort::launch(s, {}, wait_for_host, flags_, flags_ + 1);
  }
  void open() { std::atomic_ref<int>(flags_[0]).store(1, std::memory_order_release); }
  // True when a gate gave up waiting for the host since the program started.
  bool ever_timed_out() const { return std::atomic_ref<int>(flags_[1]).load() != 0; }

 private:
  int* flags_ = nullptr; // [0]: open; [1]: timed out
};

// Work enqueued on `later` from now on waits for what is already on `earlier` (any devices).
void order_after(cohort::stream_ref earlier, cohort::stream_ref later) {
  cohort::event mark(earlier.device());
  mark.record(earlier);
  later.wait(mark);
}

void copy(std::uint32_t* to, cohort::device_ref to_device, const std::uint32_t* from,
          cohort::device_ref from_device, std::size_t bytes, cohort::stream_ref s) {
  cohort::check_cuda(
      cudaMemcpyPeerAsync(to, to_device.get(), from, from_device.get(), bytes, s.native_handle()),
      "cudaMemcpyPeerAsync(to device " + std::to_string(to_device.get()) + ")", from_device.get());
}

// What each GPU holds: a source filled with its own byte value and a target to copy into.
struct gpu_buffers {
  cohort::device_buffer<std::uint32_t> source, target;
  cohort::device_buffer<unsigned long long> wrong; // the count of a check
  explicit gpu_buffers(cohort::stream_ref s)
      : source(words, s)
      , target(words, s)
      , wrong(1, s) {}
};

std::uint32_t byte_of(std::size_t gpu) {
  return static_cast<std::uint32_t>(gpu % 255 + 1);
}
std::uint32_t word_of(std::size_t gpu) {
  return byte_of(gpu) * 0x01010101u;
}

class measurement {
 public:
  measurement(const cohort::device_group& group, std::vector<gpu_buffers>& buffers)
      : group_(group)
      , buffers_(buffers) {}

  // Milliseconds per copy of `bytes` from GPU `from`'s source into GPU `to`'s target, and, when
  // `both_ways`, of `to`'s source into `from`'s target at the same time (on `to`'s stream).
  double copy_ms(std::size_t from, std::size_t to, std::size_t bytes, bool both_ways, int warmups,
                 int reps) {
    const cohort::stream_ref s = group_.stream(from), t = group_.stream(to);
    // The copies write the other GPU's target: start after everything already on both streams.
    order_after(t, s);
    if (both_ways) order_after(s, t);
    auto enqueue = [&](int count) {
      for (int k = 0; k < count; ++k) {
        copy(buffers_[to].target.data(), group_.device(to), buffers_[from].source.data(),
             group_.device(from), bytes, s);
        if (both_ways)
          copy(buffers_[from].target.data(), group_.device(from), buffers_[to].source.data(),
               group_.device(to), bytes, t);
      }
    };
    enqueue(warmups);
    cohort::event start(group_.device(from), cohort::event::timing::on);
    cohort::event stop(group_.device(from), cohort::event::timing::on);
    if (both_ways) order_after(t, s); // the warm-ups on t end before the timing starts
    gate_.close(s);
    start.record(s);
    if (both_ways) t.wait(start); // t's copies start with s's
    enqueue(reps);
    if (both_ways) order_after(t, s); // and s's stop comes after both directions
    stop.record(s);
    gate_.open();
    stop.synchronize(); // s waited for t's copies before its stop
    return cohort::elapsed(start, stop).count() / reps;
  }

  // Counts, on GPU `gpu`, the words among the first `count` of its target that are not GPU
  // `from`'s value, then poisons the target for the next copy. Waits for the result: called
  // between measurements.
  std::size_t wrong_in_target(std::size_t gpu, std::size_t from, std::size_t count = words) {
    const cohort::stream_ref s = group_.stream(gpu);
    gpu_buffers& b = buffers_[gpu];
    b.wrong.fill_bytes(0);
    const std::uint32_t* target = b.target.data();
    unsigned long long* wrong = b.wrong.data();
    const std::uint32_t want = word_of(from);
    cohort::for_each_n(s, count, [=] __device__(std::size_t i) {
      if (target[i] != want) atomicAdd(wrong, 1ull);
    });
    b.target.fill_bytes(0);
    unsigned long long found = 0;
    b.wrong.copy_to_host(std::span<unsigned long long>(&found, 1));
    s.synchronize();
    return static_cast<std::size_t>(found);
  }

  bool gate_timed_out() const { return gate_.ever_timed_out(); }

 private:
  const cohort::device_group& group_;
  std::vector<gpu_buffers>& buffers_;
  host_gate gate_;
};

double gb_per_s(std::size_t bytes, double ms) {
  return static_cast<double>(bytes) / ms / 1e6;
}

// Prints an n × n matrix; NaN entries (not measured) as "-".
void print_matrix(const char* title, const std::vector<double>& values, std::size_t n,
                  const char* format) {
  std::printf("%s\n       ", title);
  for (std::size_t to = 0; to < n; ++to)
    std::printf("  GPU %-4zu", to);
  std::puts("");
  for (std::size_t from = 0; from < n; ++from) {
    std::printf("  GPU %zu", from);
    for (std::size_t to = 0; to < n; ++to)
      if (std::isnan(values[from * n + to]))
        std::printf("  %8s", "-");
      else
        std::printf(format, values[from * n + to]);
    std::puts("");
  }
}

int run() {
  const std::vector<cohort::device_ref> gpus = cohort::devices();
  if (gpus.empty()) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  const std::size_t n = gpus.size();

  std::printf("%zu GPU(s):\n", n);
  std::puts("  GPU  name                            cc     SMs  memory (free)         "
            "peak memory bw  bus id");
  for (cohort::device_ref d : gpus) {
    const cohort::device_properties p = cohort::properties(d);
    const cohort::free_and_total memory = cohort::memory_info(d);
    std::printf("  %-3d  %-30.30s  sm_%d%d  %4d  %6.1f GiB (%6.1f)  %8.0f GB/s   %s\n", d.get(),
                p.name.c_str(), p.major, p.minor, p.multiprocessors, memory.total / 1073741824.0,
                memory.free / 1073741824.0, p.peak_memory_bandwidth_bytes_per_s() / 1e9,
                p.pci_bus_id.c_str());
  }
  std::puts(
      "  (peak memory bandwidth is the datasheet figure from the memory clock and bus width)");

  // The link matrix, as `nvidia-smi topo -m` prints it: X for the GPU itself, P2P with CUDA's
  // performance rank (lower is faster) and A where atomics on peer memory are native (as over
  // NVLink; PCIe peer links usually lack them), SYS where there is no peer path and copies are
  // staged through host memory.
  const cohort::topology topo = cohort::topology::of(gpus);
  std::puts("links (row reaches column's memory):");
  std::printf("       ");
  for (std::size_t to = 0; to < n; ++to)
    std::printf("  GPU %-4zu", to);
  std::puts("");
  for (std::size_t from = 0; from < n; ++from) {
    std::printf("  GPU %zu", from);
    for (std::size_t to = 0; to < n; ++to) {
      const cohort::peer_link& link = topo.link(from, to);
      char cell[16] = "X";
      if (link.kind == cohort::link_kind::peer)
        std::snprintf(cell, sizeof cell, "P2P r%d%s", link.performance_rank,
                      link.native_atomics ? " A" : "");
      else if (link.kind == cohort::link_kind::host)
        std::snprintf(cell, sizeof cell, "SYS");
      std::printf("  %-8s", cell);
    }
    std::puts("");
  }
  std::puts("  X: itself; P2P rN: direct peer access, CUDA performance rank N (lower is faster); "
            "A: native peer atomics; SYS: no peer path, staged through the host");
  std::printf("  every pair has a peer path: %s\n", topo.fully_connected() ? "yes" : "no");

  // One stream per GPU, and peer access both ways wherever there is a peer path (explicitly:
  // cohort never turns it on behind your back). Pairs without one are measured as CUDA stages
  // them through host memory.
  cohort::device_group group(gpus);
  group.enable_peer_access();
  std::vector<gpu_buffers> buffers;
  buffers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    buffers.emplace_back(group.stream(i));
    buffers[i].source.fill_bytes(static_cast<unsigned char>(byte_of(i)));
    buffers[i].target.fill_bytes(0);
  }
  group.synchronize();
  measurement measure(group, buffers);
  std::printf("measuring %zu copies of %zu MiB per GPU pair and within each GPU...\n",
              static_cast<std::size_t>(bandwidth_warmups + bandwidth_reps), copy_bytes >> 20);

  // One way: GPU `from`'s source into GPU `to`'s target; the diagonal is a copy within one GPU
  // (bytes copied per second; the memory itself reads and writes each byte, twice that traffic).
  // Both ways: `from` into `to` and `to` into `from` at once, both directions' bytes counted.
  // Latency: a 4-byte copy, averaged over many queued back to back.
  std::vector<double> one_way(n * n), both_ways(n * n, std::nan("")), latency_us(n * n);
  std::size_t wrong = 0;
  for (std::size_t from = 0; from < n; ++from)
    for (std::size_t to = 0; to < n; ++to) {
      const double ms =
          measure.copy_ms(from, to, copy_bytes, false, bandwidth_warmups, bandwidth_reps);
      one_way[from * n + to] = gb_per_s(copy_bytes, ms);
      wrong += measure.wrong_in_target(to, from);
      if (from != to) {
        const double both =
            measure.copy_ms(from, to, copy_bytes, true, bandwidth_warmups, bandwidth_reps);
        both_ways[from * n + to] = gb_per_s(2 * copy_bytes, both);
        wrong += measure.wrong_in_target(to, from) + measure.wrong_in_target(from, to);
      }
      latency_us[from * n + to] = 1e3 * measure.copy_ms(from, to, sizeof(std::uint32_t), false,
                                                        latency_warmups, latency_reps);
      wrong += measure.wrong_in_target(to, from, 1);
    }

  std::puts("");
  print_matrix("copy bandwidth one way, GB/s (row: source, column: target; diagonal: within "
               "the GPU)",
               one_way, n, "  %8.1f");
  if (n > 1)
    print_matrix("copy bandwidth both ways at once, GB/s (both directions' bytes)", both_ways, n,
                 "  %8.1f");
  print_matrix("latency of a 4-byte copy, us (row: source, column: target)", latency_us, n,
               "  %8.2f");
  if (n == 1)
    std::puts("one GPU: there is no pair of GPUs to measure; the figures are GPU 0's own.");
  if (measure.gate_timed_out())
    std::puts("note: the host took over a second to queue some copies; those figures include "
              "host time.");
  std::printf("checked every copied word: %zu wrong\n", wrong);
  if (wrong != 0) return 1;
  std::puts("topology ok");
  return 0;
}

} // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) { // cohort's errors name the call, the device and the fix
    std::fprintf(stderr, "topology failed: %s\n", e.what());
    return 1;
  }
}
