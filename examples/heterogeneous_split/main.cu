// heterogeneous_split — the same work over two unequal members, split three ways: evenly
// (cohort::partition::even), by what each member is (cohort::by_capability and
// cohort::partition::weighted), and by how fast each really ran (cohort::adaptive_balancer).
// Each is timed as a whole and member by member (events on each member's stream), and its results
// are checked on the host.
//
// The work comes in two kinds: arithmetic-bound (1024 multiply-adds per element) and memory-bound
// (4), where the members compete for the memory the data are in. There a member's time depends on
// the other's share: on the real pair, GPU 1 reads its part from GPU 0's memory over NVLink, and
// the more GPU 0 does itself the slower those reads get. An adaptive split that only follows each
// member's speed then moves work the wrong way; cohort's judges each move by the whole call's time
// and goes back to the best split it has seen, so it stays at least as fast as the even split.
//
// Two pairs, where the machine has them:
//   - GPUs 0 and 1, with GPU 1 made slower by a kernel that keeps half of its SMs busy: a busy GPU
//     looks like an idle one on paper, so only the adaptive split can see it;
//   - an emulated group on GPU 0 whose members have 1/4 and 3/4 of its SMs (green contexts), which
//     stands in for unequal GPUs on one.
//
//   build/examples/heterogeneous_split
#include <cohort/cohort.cuh>

#include <cuda/atomic>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// The work: out[i] = y[i] + a * x[i], the product added `rounds` times (one fused multiply-add a
// round), over n elements. x and y hold small whole numbers, so every sum is exact and the host
// checks each element with ==.
constexpr std::size_t n = std::size_t{1} << 26;
constexpr int arithmetic_rounds = 1024, memory_rounds = 4;
constexpr float a = 2.0f;
constexpr int repetitions = 10; // timed calls per split; each figure is their median
constexpr int adapt_calls = 20; // calls the adaptive balancer learns from before it is timed

__host__ __device__ float input_x(std::size_t i) {
  return static_cast<float>(i % 1024);
}
__host__ __device__ float input_y(std::size_t i) {
  return static_cast<float>(i % 7);
}

struct axpy_rounds {
  const float* x;
  const float* y;
  float* out;
  float a;
  int rounds;
  __device__ void operator()(std::size_t i) const {
    const float xi = x[i];
    float v = y[i];
    for (int r = 0; r < rounds; ++r)
      v = fmaf(a, xi, v);
    out[i] = v;
  }
};

struct fill_inputs {
  float* x;
  float* y;
  __device__ void operator()(std::size_t i) const {
    x[i] = input_x(i);
    y[i] = input_y(i);
  }
};

// x, y and out on `origin`'s device (the group's members read and write them there).
struct workload {
  workload(cohort::stream_ref origin, int rounds)
      : x(n, origin)
      , y(n, origin)
      , out(n, origin)
      , rounds(rounds) {
    cohort::for_each_n(origin, n, fill_inputs{x.data(), y.data()});
  }

  axpy_rounds function() { return {x.data(), y.data(), out.data(), a, rounds}; }

  // Copies `out` back (it is on `origin`, which the calls joined) and counts the elements that
  // differ from the host's.
  std::size_t wrong_results() {
    host.resize(n);
    out.copy_to_host(host);
    out.stream().synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = input_y(i) + rounds * static_cast<double>(a) * input_x(i);
      wrong += host[i] != static_cast<float>(want);
    }
    return wrong;
  }

  cohort::device_buffer<float> x, y, out;
  int rounds;
  std::vector<float> host;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct measured {
  double total_ms = 0.0;         // a whole call, fork to join
  std::vector<double> member_ms; // from each member's start to its last element
};

// Times `repetitions` calls of `call()`, which enqueues one split of the work on the group's
// streams: the whole call with events on `origin`, and each member's part with events on its own
// stream (an event pair must be on one device). Medians.
template <class Call>
measured time_calls(cohort::device_group& group, cohort::stream_ref origin, Call call) {
  cohort::event start(origin.device(), cohort::event::timing::on);
  cohort::event stop(origin.device(), cohort::event::timing::on);
  std::vector<cohort::event> began, ended;
  for (std::size_t k = 0; k < group.size(); ++k) {
    began.emplace_back(group.device(k), cohort::event::timing::on);
    ended.emplace_back(group.device(k), cohort::event::timing::on);
  }
  std::vector<double> totals;
  std::vector<std::vector<double>> members(group.size());
  for (int r = 0; r < repetitions; ++r) {
    start.record(origin);
    group.fork(origin);
    for (std::size_t k = 0; k < group.size(); ++k)
      began[k].record(group.stream(k));
    call();
    for (std::size_t k = 0; k < group.size(); ++k)
      ended[k].record(group.stream(k));
    group.join(origin);
    stop.record(origin);
    stop.synchronize(); // the join makes this wait for every member too
    totals.push_back(cohort::elapsed(start, stop).count());
    for (std::size_t k = 0; k < group.size(); ++k)
      members[k].push_back(cohort::elapsed(began[k], ended[k]).count());
  }
  measured m;
  m.total_ms = median(totals);
  for (const std::vector<double>& v : members)
    m.member_ms.push_back(median(v));
  return m;
}

void report(const char* split, double share_1, const measured& m, const measured& even,
            const std::vector<std::string>& names) {
  std::printf("  %s, %.1f%% of the elements to %s: %.3f ms a call", split, 100.0 * share_1,
              names[1].c_str(), m.total_ms);
  if (&m != &even) std::printf(", %.2fx the even split's speed", even.total_ms / m.total_ms);
  std::printf(".\n    %s finished its part after %.3f ms, %s after %.3f ms.\n", names[0].c_str(),
              m.member_ms[0], names[1].c_str(), m.member_ms[1]);
}

// Runs the work over `group`'s two members split evenly, by capability and adaptively; prints what
// each took; returns how many results were wrong. The members' kernels must already be loaded
// (`warm_up`).
std::size_t compare_splits(cohort::device_group& group, cohort::stream_ref origin, workload& work,
                           const std::vector<std::string>& names, const char* capability_note) {
  const axpy_rounds f = work.function();
  std::size_t wrong = 0;

  // Each split starts from an output set to NaN, so an element no member wrote shows.
  work.out.fill_bytes(0xFF);
  const measured even = time_calls(
      group, origin, [&] { cohort::multi_device_for_each(group, cohort::indices(n), f); });
  wrong += work.wrong_results();
  report("Even split", 0.5, even, even, names);

  const std::vector<double> weights = cohort::by_capability(group);
  const cohort::partition by_capability = cohort::partition::weighted(n, weights);
  work.out.fill_bytes(0xFF);
  const measured weighted = time_calls(group, origin, [&] {
    cohort::multi_device_for_each(group, cohort::indices(n, by_capability), f);
  });
  wrong += work.wrong_results();
  std::printf("  by_capability weighs the members %.3f : %.3f%s.\n", weights[0], weights[1],
              capability_note);
  report("Split by capability", weights[1] / (weights[0] + weights[1]), weighted, even, names);

  // Calls whose splits differ need no ordering of our own: when the split moves, the balancer
  // makes each member whose range changed wait for the previous call's owners of its new indices.
  cohort::adaptive_balancer balancer(group);
  for (int i = 0; i < adapt_calls; ++i) { // each call's timing reaches the next call
    group.fork(origin);
    cohort::multi_device_for_each(group, cohort::indices(n, balancer), f);
    group.join(origin);
    origin.synchronize();
  }
  work.out.fill_bytes(0xFF);
  const measured adaptive = time_calls(group, origin, [&] {
    cohort::multi_device_for_each(group, cohort::indices(n, balancer), f);
  });
  wrong += work.wrong_results();
  const std::string label = "Adaptive split after " + std::to_string(adapt_calls) + " calls";
  report(label.c_str(), balancer.weights()[1], adaptive, even, names);
  // Printed, not checked: two timings of one split differ by a few per cent from run to run.
  std::printf("  The adaptive split ran at %.2fx the even split's speed: %s.\n",
              even.total_ms / adaptive.total_ms,
              adaptive.total_ms <= 1.03 * even.total_ms ? "at least as fast (within 3 %)"
                                                        : "SLOWER than even");

  std::printf("  Results: %zu of %zu elements wrong (checked after each split).\n\n", wrong, 3 * n);
  return wrong;
}

// Loads the work's kernels on every member. (With lazy loading, loading a kernel can wait for the
// kernels running on its device, so this must come before anything keeps a GPU busy.)
void warm_up(cohort::device_group& group, cohort::stream_ref origin, workload& work) {
  group.fork(origin);
  cohort::multi_device_for_each(group, cohort::indices(n), work.function());
  group.join(origin);
  origin.synchronize();
}

__device__ unsigned long long nanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

using system_int = cuda::atomic_ref<int, cuda::thread_scope_system>;

// Spins on arithmetic until flags[0] is set (or `limit_ns` has passed, so that it can never
// outlive a program that forgot it); block b sets flags[1 + b] once it runs.
__global__ void __launch_bounds__(1024) keep_busy(int* flags, unsigned long long limit_ns) {
  if (threadIdx.x == 0) system_int(flags[1 + blockIdx.x]).store(1, cuda::std::memory_order_relaxed);
  const unsigned long long began = nanoseconds();
  float v = static_cast<float>(threadIdx.x);
  for (;;) {
    for (int r = 0; r < 4096; ++r)
      v = fmaf(v, 0.999f, 1.0f);
    const bool stop =
        threadIdx.x == 0 && (system_int(flags[0]).load(cuda::std::memory_order_relaxed) != 0 ||
                             nanoseconds() - began > limit_ns);
    if (__syncthreads_or(stop)) break;
  }
  if (v < 0.0f) flags[0] = -1; // never true (v stays positive); keeps the arithmetic alive
}

// Keeps half of `device`'s SMs busy from construction to destruction: one block of 1024 spinning
// threads on each, with more than half an SM's shared memory so that no two share an SM. Other
// kernels run on the other half, and beside the busy blocks where threads and registers allow.
class busy_half {
 public:
  explicit busy_half(cohort::device_ref device)
      : device_(device)
      , stream_(device) {
    cohort::scoped_device on(device);
    blocks_ = std::max(1, cohort::properties(device).multiprocessors / 2);
    int per_sm = 0, per_block = 0;
    cohort::check_cuda(
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device.get()),
        "cudaDeviceGetAttribute(MaxSharedMemoryPerMultiprocessor)", device.get());
    cohort::check_cuda(
        cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.get()),
        "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)", device.get());
    const int shared = std::min(per_block, per_sm / 2 + 1024);
    cohort::check_cuda(
        cudaFuncSetAttribute(keep_busy, cudaFuncAttributeMaxDynamicSharedMemorySize, shared),
        "cudaFuncSetAttribute(keep_busy)", device.get());
    void* p = nullptr;
    cohort::check_cuda(
        cudaHostAlloc(&p, (1 + blocks_) * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc (busy flags)", device.get());
    flags_.reset(static_cast<int*>(p));
    std::fill(flags_.get(), flags_.get() + 1 + blocks_, 0);
    void* on_device = nullptr;
    cohort::check_cuda(cudaHostGetDevicePointer(&on_device, p, 0), "cudaHostGetDevicePointer",
                       device.get());
    cohort::launch(stream_,
                   {.grid = static_cast<unsigned>(blocks_),
                    .block = 1024,
                    .shared_bytes = static_cast<std::size_t>(shared)},
                   keep_busy, static_cast<int*>(on_device), 60'000'000'000ull);
    running_ = true;
    // Wait (at most 10 s) until every busy block is on an SM.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!all_started()) {
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("heterogeneous_split: the busy kernel did not start on GPU " +
                                 std::to_string(device.get()) + " within 10 s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  busy_half(const busy_half&) = delete;
  busy_half& operator=(const busy_half&) = delete;
  ~busy_half() { stop(); }

  int blocks() const { return blocks_; }

 private:
  struct free_host {
    void operator()(int* p) const noexcept { cohort::ignore_cuda_error(cudaFreeHost(p)); }
  };

  bool all_started() const {
    for (int b = 0; b < blocks_; ++b)
      if (system_int(flags_.get()[1 + b]).load(cuda::std::memory_order_relaxed) == 0) return false;
    return true;
  }

  void stop() noexcept {
    if (!running_) return;
    system_int(flags_.get()[0]).store(1, cuda::std::memory_order_relaxed);
    cohort::ignore_cuda_error(cudaStreamSynchronize(stream_.native_handle()));
    running_ = false;
  }

  cohort::device_ref device_;
  std::unique_ptr<int, free_host> flags_; // freed after the stream is destroyed
  cohort::stream stream_;
  int blocks_ = 0;
  bool running_ = false;
};

// Both kinds of work over `group`, each from its own buffers on `origin`'s device; returns how
// many results were wrong.
std::size_t compare_both_kinds(cohort::device_group& group, cohort::stream_ref origin,
                               std::vector<workload>& works, const std::vector<std::string>& names,
                               const char* capability_note) {
  std::size_t wrong = 0;
  for (workload& work : works) {
    std::printf(" %s-bound work (%d multiply-adds an element):\n",
                work.rounds == memory_rounds ? "Memory" : "Arithmetic", work.rounds);
    wrong += compare_splits(group, origin, work, names, capability_note);
  }
  return wrong;
}

std::vector<workload> both_kinds(cohort::stream_ref origin) {
  std::vector<workload> works;
  works.reserve(2);
  works.emplace_back(origin, arithmetic_rounds);
  works.emplace_back(origin, memory_rounds);
  return works;
}

int main() {
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  std::printf("The work: out = y + a*x, the product added %d times (arithmetic-bound) or %d times "
              "(memory-bound), over %zu floats.\n\n",
              arithmetic_rounds, memory_rounds, n);
  std::size_t wrong = 0;
  bool compared = false;

  // 1. Two real GPUs, the second one kept busy.
  if (cohort::device_count() >= 2) {
    cohort::device_group pair{cohort::device_ref{0}, cohort::device_ref{1}};
    if (!pair.enable_peer_access()) {
      std::puts("GPUs 0 and 1 have no peer path between them (GPU 1 would need to reach the data "
                "on GPU 0): skipping the pair of real GPUs.\n");
    } else {
      cohort::stream origin(pair.device(0));
      std::vector<workload> works = both_kinds(origin);
      for (workload& work : works)
        warm_up(pair, origin, work);
      busy_half busy(pair.device(1));
      std::printf("GPUs 0 and 1, the data on GPU 0 (GPU 1 reaches it through peer access), and "
                  "GPU 1 sharing %d of its %d SMs with a kernel that keeps them busy.\n",
                  busy.blocks(), cohort::properties(pair.device(1)).multiprocessors);
      wrong += compare_both_kinds(pair, origin, works, {"GPU 0", "GPU 1"},
                                  " (it reads what each GPU is, not how busy it is)");
      compared = true;
    }
  }

  // 2. An emulated pair of unequal members on GPU 0 (both read the one GPU's memory).
  const cohort::device_ref gpu0{0};
  if (cohort::sm_partitioning_available(gpu0)) {
    cohort::device_group uneven = cohort::device_group::emulated(gpu0, {1.0, 3.0});
    cohort::stream origin(gpu0);
    std::vector<workload> works = both_kinds(origin);
    for (workload& work : works)
      warm_up(uneven, origin, work);
    std::printf("An emulated group on GPU 0 whose members have %u and %u of its %d SMs.\n",
                uneven.sm_count(0), uneven.sm_count(1), cohort::properties(gpu0).multiprocessors);
    wrong += compare_both_kinds(uneven, origin, works,
                                {"member 0 (" + std::to_string(uneven.sm_count(0)) + " SMs)",
                                 "member 1 (" + std::to_string(uneven.sm_count(1)) + " SMs)"},
                                " (from each member's share of the SMs)");
    compared = true;
  } else {
    std::puts("GPU 0's SMs cannot be split here (green contexts need CUDA 12.5+ and a driver that "
              "has them): skipping the emulated pair of unequal members.\n");
  }

  // With nothing compared nothing was checked: the run says so as skipped (the example's test
  // reports it skipped), not ok. A part skipped while the other ran says "skipping" above and
  // the run still checks, and reports, what it ran.
  if (!compared) {
    std::printf("SKIPPED: there is no unequal pair to compare here (%s, and GPU 0's SMs cannot "
                "be split)\n",
                cohort::device_count() >= 2 ? "GPUs 0 and 1 have no peer path" : "one GPU");
    return 0;
  }
  std::printf("%zu results differ from the host's.\n", wrong);
  if (wrong != 0) return 1;
  std::puts("heterogeneous_split ok");
  return 0;
}
