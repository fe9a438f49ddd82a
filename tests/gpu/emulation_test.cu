// Emulated groups: logical devices on one GPU with disjoint SM shares (green contexts), uneven
// shares standing in for unequal GPUs, and kernels that wait on each other across logical devices
// without deadlock.
#include "held_stream.cuh"
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/atomic>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

namespace {

struct no_op {
  __device__ void operator()(std::size_t) const {}
};

// One call's read-modify-write of x[i]: the result depends on the order of the calls. Indices in
// the first half are slow (about 20 us each), so that a member holding them measures slower.
__host__ __device__ inline unsigned host_step(unsigned v, std::size_t i, std::size_t n,
                                              unsigned call) {
  (void)i;
  (void)n;
  return v * 2654435761u + call + 1;
}
struct step {
  unsigned* x;
  std::size_t n;
  unsigned call;
  __device__ void operator()(std::size_t i) const {
    if (i < n / 2) {
      const unsigned long long began = cohort::testing::global_nanoseconds();
      while (cohort::testing::global_nanoseconds() - began < 1'000'000)
        ;
    }
    x[i] = host_step(x[i], i, n, call);
  }
};

__device__ unsigned current_sm() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__global__ void record_sm(unsigned* sm_of_block) {
  if (threadIdx.x == 0) sm_of_block[blockIdx.x] = current_sm();
  // Stay resident a little so blocks spread over every SM the stream may use.
  const unsigned long long start = cohort::testing::global_nanoseconds();
  while (cohort::testing::global_nanoseconds() - start < 20'000)
    ;
}

// The SMs a kernel on `stream` ran on.
std::set<unsigned> sms_used(cohort::stream_ref stream) {
  const int blocks = 4096;
  cohort::device_buffer<unsigned> ids(blocks, stream);
  {
    cohort::scoped_device on(stream.device());
    record_sm<<<blocks, 64, 0, stream.native_handle()>>>(ids.data());
    cohort::check_launch("record_sm", stream.device().get());
  }
  std::vector<unsigned> host(blocks);
  ids.copy_to_host(host);
  stream.synchronize();
  return {host.begin(), host.end()};
}

// Waits (up to 5 s) for `flag` to become 1; reports in `timed_out` if it never did.
__global__ void wait_for_flag(int* flag, int* timed_out) {
  cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
  const unsigned long long start = cohort::testing::global_nanoseconds();
  while (f.load(cuda::memory_order_acquire) == 0) {
    if (cohort::testing::global_nanoseconds() - start > 5'000'000'000ull) {
      atomicExch(timed_out, 1);
      return;
    }
    __nanosleep(500);
  }
}

__global__ void set_flag(int* flag) {
  cuda::atomic_ref<int, cuda::thread_scope_device> f(*flag);
  f.store(1, cuda::memory_order_release);
}

// Whether `device` splits into SM shares; reports the case skipped where it does not.
bool has_green_contexts(cohort::device_ref device) {
  if (cohort::sm_partitioning_available(device)) return true;
  cohort::testing::skip("this CUDA driver has no green contexts");
  return false;
}

} // namespace

TEST_CASE("an emulated group splits the GPU's SMs into disjoint shares") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!has_green_contexts(d)) return;
  const unsigned total = static_cast<unsigned>(cohort::properties(d).multiprocessors);
  for (std::size_t n : {2u, 3u, 4u}) {
    CAPTURE(n);
    auto group = cohort::device_group::emulated(d, n);
    REQUIRE(group.splits_sms());
    unsigned sum = 0;
    std::vector<std::set<unsigned>> used;
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(group.sm_count(i) > 0);
      CHECK(group.concurrent_sm_count(i) == group.sm_count(i)); // its own share, all of it
      sum += group.sm_count(i);
      used.push_back(sms_used(group.stream(i)));
      CHECK(used.back().size() <= group.sm_count(i));
      CHECK(used.back().size() >= group.sm_count(i) / 2); // the kernel spread over its share
    }
    CHECK(sum <= total);
    CHECK(sum >= total - total / 10); // little is left unused
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j) {
        std::vector<unsigned> both;
        std::set_intersection(used[i].begin(), used[i].end(), used[j].begin(), used[j].end(),
                              std::back_inserter(both));
        CHECK(both.empty());
      }
  }
}

// new_stream(i) is for work beside the member's stream (a compute stream beside communication):
// a stream of its own, on the member's device, inside the member's SM share.
TEST_CASE("new_stream gives a member another stream in its own SM share") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!has_green_contexts(d)) return;
  auto group = cohort::device_group::emulated(d, 2);
  REQUIRE(group.splits_sms());
  for (std::size_t i = 0; i < group.size(); ++i) {
    CAPTURE(i);
    cohort::stream extra = group.new_stream(i);
    CHECK(extra.device() == group.device(i));
    CHECK(extra.native_handle() != group.stream(i).native_handle());
    const std::set<unsigned> mine = sms_used(extra);
    const std::set<unsigned> other = sms_used(group.stream(1 - i));
    CHECK(mine.size() <= group.sm_count(i));
    std::vector<unsigned> both;
    std::set_intersection(mine.begin(), mine.end(), other.begin(), other.end(),
                          std::back_inserter(both));
    CHECK(both.empty());
  }
  // A real group's new stream is a plain stream of the member's device.
  cohort::device_group real{d};
  cohort::stream plain = real.new_stream(0);
  CHECK(plain.device() == d);
  CHECK(plain.native_handle() != real.stream(0).native_handle());
  cohort::device_buffer<int> y(16, plain);
  y.fill_bytes(0);
  plain.synchronize();
}

TEST_CASE("uneven SM weights give shares in proportion") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!has_green_contexts(d)) return;
  auto group = cohort::device_group::emulated(d, std::vector<double>{1.0, 3.0});
  REQUIRE(group.size() == 2);
  const double ratio = static_cast<double>(group.sm_count(1)) / group.sm_count(0);
  CHECK(ratio > 2.5);
  CHECK(ratio < 3.6);
  CHECK(sms_used(group.stream(1)).size() > sms_used(group.stream(0)).size());
  // Braced weights, a single one too: `{2.0}` went to the count form and did not compile
  // (narrowing); a one-integer list stays a count.
  auto one = cohort::device_group::emulated(d, {2.0});
  CHECK(one.size() == 1);
  CHECK(one.splits_sms());
  auto braced = cohort::device_group::emulated(d, {1.0, 3.0});
  CHECK(braced.sm_count(1) == group.sm_count(1));
  CHECK(cohort::device_group::emulated(d, {3}).size() == 3);
}

TEST_CASE("a kernel waiting on another logical device's kernel does not deadlock") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!cohort::sm_partitioning_available(d)) {
    cohort::testing::skip("without green contexts logical devices share SMs; see device_group");
    return;
  }
  auto group = cohort::device_group::emulated(d, 2);
  cohort::device_buffer<int> state(2, group.stream(0)); // [flag, timed_out]
  state.fill_bytes(0);
  group.stream(0).synchronize();
  {
    cohort::scoped_device on(d);
    // Load both kernels first: with CUDA's lazy loading, loading a kernel while another one runs
    // can wait for that one to finish, which would turn this wait into a deadlock of its own.
    cudaFuncAttributes attributes{};
    cohort::check_cuda(cudaFuncGetAttributes(&attributes, set_flag), "cudaFuncGetAttributes",
                       d.get());
    cohort::check_cuda(cudaFuncGetAttributes(&attributes, wait_for_flag), "cudaFuncGetAttributes",
                       d.get());
    // Far more waiting blocks than member 0's SMs hold: without SM shares they could fill the
    // GPU and keep member 1's setter from ever running.
    wait_for_flag<<<64 * group.sm_count(0), 256, 0, group.stream(0).native_handle()>>>(
        state.data(), state.data() + 1);
    cohort::check_launch("wait_for_flag", d.get());
    set_flag<<<1, 1, 0, group.stream(1).native_handle()>>>(state.data());
    cohort::check_launch("set_flag", d.get());
  }
  std::vector<int> host(2, -1);
  group.synchronize();
  state.copy_to_host(host);
  group.stream(0).synchronize();
  CHECK(host[0] == 1);
  CHECK(host[1] == 0);
}

TEST_CASE("emulated groups reject weights that cannot split") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!has_green_contexts(d)) return;
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(d, std::vector<double>{1.0, -2.0}),
                       doctest::Contains("weight 1 is"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(d, 100000),
                       doctest::Contains("SMs split into only"), std::invalid_argument);
}

TEST_CASE("COHORT_NO_SM_PARTITIONING=1 turns SM shares off and emulated groups still work") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!has_green_contexts(d)) return;
  std::optional<cohort::device_group> made, weighted;
  bool available = true;
  {
    const cohort::testing::environment_guard off("COHORT_NO_SM_PARTITIONING", "1");
    available = cohort::sm_partitioning_available(d);
    made.emplace(cohort::device_group::emulated(d, 2));
    // Weighted groups too (they made green contexts regardless, defeating the variable).
    weighted.emplace(cohort::device_group::emulated(d, std::vector<double>{1.0, 3.0}));
  } // the variable is back as it was, even if a REQUIRE or a throw ended the scope
  cohort::device_group& group = *made;
  CHECK_FALSE(available);
  CHECK_FALSE(group.splits_sms());
  CHECK(group.size() == 2);
  const unsigned total = static_cast<unsigned>(cohort::properties(d).multiprocessors);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(group.sm_count(i) == total);                // the whole GPU may run member i's kernels
    CHECK(group.concurrent_sm_count(i) == total / 2); // but the two members' kernels share it
  }
  CHECK_FALSE(weighted->splits_sms());
  CHECK(weighted->size() == 2);
  cohort::device_buffer<int> x(4, group.stream(1));
  x.fill_bytes(0);
  group.synchronize();
  CHECK(cohort::sm_partitioning_available(d)); // back once the variable is gone
}

TEST_CASE("emulated weights are checked as device_group::emulated's 'sm_weights'") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  // Checked before green contexts are asked for, so this holds where they are missing too.
  for (const std::vector<double>& bad :
       {std::vector<double>{1.0, 0.0}, std::vector<double>{-1.0}, std::vector<double>{1.0, NAN}}) {
    CHECK_THROWS_WITH_AS(cohort::device_group::emulated(d, bad),
                         doctest::Contains("cohort::device_group::emulated: argument 'sm_weights': "
                                           "weight"),
                         std::invalid_argument);
  }
  if (cohort::sm_partitioning_available(d))
    CHECK_THROWS_WITH_AS(cohort::device_group::emulated(d, std::vector<double>(100000, 1.0)),
                         doctest::Contains("cohort::device_group::emulated: argument 'sm_weights'"),
                         std::invalid_argument);
}

TEST_CASE("a balancer of another group is reported as the algorithm's index 'range'") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  auto other = cohort::device_group::emulated(cohort::device_ref{0}, 2); // same size, other streams
  cohort::adaptive_balancer balancer(other);
  CHECK_THROWS_WITH_AS(cohort::multi_device_for_each(group, cohort::indices(10, balancer), no_op{}),
                       doctest::Contains("cohort::multi_device_for_each: argument 'range'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)balancer.next_split(group, 10),
                       doctest::Contains("cohort::adaptive_balancer::next_split: argument 'group'"),
                       std::invalid_argument);
}

// A timed call whose member 1 threw before its stop (its work never enqueued): the next call read
// member 1's never-recorded stop event and threw cudaErrorInvalidResourceHandle, and so did every
// call after it. The measure is now dropped and the next call timed again.
TEST_CASE("a balancer whose timed call failed part-way drops that measure and keeps working") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::adaptive_balancer balancer(group);
  (void)balancer.next_split(group, 1000);
  balancer.start(0, group.stream(0));
  balancer.stop(0, group.stream(0));
  balancer.start(1, group.stream(1)); // member 1's work threw here
  group.synchronize();
  for (int call = 0; call < 3; ++call) {
    CAPTURE(call);
    cohort::partition split = cohort::partition::even(1, 1);
    CHECK_NOTHROW(split = balancer.next_split(group, 1000));
    CHECK(split.size() == 1000);
    for (std::size_t m = 0; m < group.size(); ++m) {
      balancer.start(m, group.stream(m));
      balancer.stop(m, group.stream(m));
    }
    group.synchronize();
  }
  const auto& weights = balancer.weights();
  CHECK(weights.size() == 2);
  CHECK(weights[0] + weights[1] == doctest::Approx(1.0));
}

// Its events would be recorded into the graph, and the next eager call would read them: refused
// by name before anything is enqueued, and the balancer works after.
TEST_CASE("a balancer's next_split is refused under capture, by name") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::adaptive_balancer balancer(group);
  CHECK_THROWS_WITH_AS(
      cohort::group_graph::capture(group, [&] { (void)balancer.next_split(group, 1000); }),
      doctest::Contains("adaptive_balancer::next_split: member 0"), std::logic_error);
  for (std::size_t i = 0; i < group.size(); ++i)
    CHECK_FALSE(group.stream(i).is_capturing());
  CHECK(balancer.next_split(group, 1000).size() == 1000);
}

TEST_CASE("calls split by a balancer that moves indices are ordered after their last owner") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  auto group = cohort::device_group::emulated(d, 2);
  cohort::stream origin(d);
  const std::size_t n = 1 << 16;
  cohort::device_buffer<unsigned> x(n, origin);
  const auto start = cohort::testing::random_values<int>(n, 91);
  std::vector<unsigned> host(start.begin(), start.end());
  x.copy_from_host(host);
  origin.synchronize();
  // Jumps straight to the measured speeds, so that the first measurement moves the split.
  cohort::adaptive_balancer balancer(group, 1.0);
  // Warm-up outside the balancer: the kernels are loaded before anything keeps the GPU busy.
  cohort::multi_device_for_each(group, cohort::indices(n), step{x.data(), n, 0});
  group.synchronize();
  for (std::size_t i = 0; i < n; ++i)
    host[i] = host_step(host[i], i, n, 0);

  // Call 1 (timed): member 0 holds the slow first half (a millisecond a thread). Member 1's part
  // waits behind a hold the test releases, so that call 2 finds call 1's timing not yet in and
  // keeps the same split, whatever the machine's speed. The hold is ahead of member 1's timing
  // events, and it can only slow member 0 (where a tool runs the two members' kernels by turns),
  // so the split moves toward member 1 either way.
  cohort::testing::held_stream hold_1(group.stream(1));
  cohort::multi_device_for_each(group, cohort::indices(n, balancer), step{x.data(), n, 1});
  cohort::event first_done(d), first_done_0(d);
  first_done.record(group.stream(1));
  first_done_0.record(group.stream(0)); // before the hold on member 0's stream
  // Call 2 (same split): member 0's part waits behind a second hold.
  cohort::testing::held_stream hold_0(group.stream(0));
  cohort::multi_device_for_each(group, cohort::indices(n, balancer), step{x.data(), n, 2});
  const std::vector<double> before = balancer.weights();
  // Call 3: call 1's timing is in, so member 1 takes part of member 0's indices while call 2's
  // member 0 has not yet written them. Without ordering, member 1 writes them first.
  hold_1.release();
  first_done.synchronize();
  first_done_0.synchronize();
  cohort::multi_device_for_each(group, cohort::indices(n, balancer), step{x.data(), n, 3});
  const std::vector<double> after = balancer.weights();
  // The state the case needs, checked before anything is let go: call 2's member 0 part had not
  // run when call 3 was enqueued (a hold that timed out let it run), and the split moved away from
  // member 0, the member made slower (by any amount: how far depends on the machine's speed).
  const bool still_held = hold_0.busy();
  hold_0.release();
  // Everything queued must finish before a failed check unwinds and frees what it writes.
  group.synchronize();
  CAPTURE(before[0]);
  CAPTURE(after[0]);
  REQUIRE_MESSAGE(still_held, "call 2 ran before call 3 was enqueued, so nothing was tested");
  REQUIRE_MESSAGE(after[0] < before[0], "the split did not move toward member 1");
  REQUIRE(cohort::partition::weighted(n, after).count(0) <
          cohort::partition::weighted(n, before).count(0));
  for (unsigned call = 1; call <= 3; ++call)
    for (std::size_t i = 0; i < n; ++i)
      host[i] = host_step(host[i], i, n, call);
  std::vector<unsigned> got(n);
  x.copy_to_host(got);
  origin.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += got[i] != host[i];
  CHECK_MESSAGE(wrong == 0, wrong << " of " << n << " elements saw the calls out of order");
}

TEST_CASE("move-assigning an emulated group frees its old streams before their green contexts") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::stream own(d);
  cohort::device_buffer<int> out(1 << 12, own);
  out.fill_bytes(cohort::testing::poison_byte);
  own.synchronize();
  auto group = cohort::device_group::emulated(d, 3);
  // Work still queued on the old members' streams when they go.
  for (std::size_t k = 0; k < group.size(); ++k)
    cohort::testing::launch_write_after_delay(group.stream(k), out.data(), out.size(), 7,
                                              50'000'000ull);
  group = cohort::device_group::emulated(d, 2);
  CHECK(group.size() == 2);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
  std::vector<int> host(out.size());
  out.copy_to_host(host);
  own.synchronize();
  CHECK(std::count(host.begin(), host.end(), 7) == static_cast<long>(host.size()));
  // The new members work.
  cohort::device_buffer<int> y(16, group.stream(1));
  y.fill_bytes(0);
  group.synchronize();
  // A group moved into itself stays whole.
  cohort::device_group& same = group;
  group = std::move(same);
  CHECK(group.size() == 2);
  group.synchronize();
}
