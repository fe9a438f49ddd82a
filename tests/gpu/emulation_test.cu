// Emulated groups: logical devices on one GPU with disjoint SM shares (green contexts), uneven
// shares standing in for unequal GPUs, and kernels that wait on each other across logical devices
// without deadlock.
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/atomic>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace {

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

} // namespace

TEST_CASE("an emulated group splits the GPU's SMs into disjoint shares") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!cohort::sm_partitioning_available(d)) {
    cohort::testing::skip("this CUDA driver has no green contexts");
    return;
  }
  const unsigned total = static_cast<unsigned>(cohort::properties(d).multiprocessors);
  for (std::size_t n : {2u, 3u, 4u}) {
    CAPTURE(n);
    auto group = cohort::device_group::emulated(d, n);
    REQUIRE(group.splits_sms());
    unsigned sum = 0;
    std::vector<std::set<unsigned>> used;
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(group.sm_count(i) > 0);
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

TEST_CASE("uneven SM weights give shares in proportion") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!cohort::sm_partitioning_available(d)) {
    cohort::testing::skip("this CUDA driver has no green contexts");
    return;
  }
  auto group = cohort::device_group::emulated(d, std::vector<double>{1.0, 3.0});
  REQUIRE(group.size() == 2);
  const double ratio = static_cast<double>(group.sm_count(1)) / group.sm_count(0);
  CHECK(ratio > 2.5);
  CHECK(ratio < 3.6);
  CHECK(sms_used(group.stream(1)).size() > sms_used(group.stream(0)).size());
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
    cohort::check_cuda(cudaFuncGetAttributes(&attributes, set_flag), "cudaFuncGetAttributes", d.get());
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
  if (!cohort::sm_partitioning_available(d)) {
    cohort::testing::skip("this CUDA driver has no green contexts");
    return;
  }
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(d, std::vector<double>{1.0, -2.0}),
                       doctest::Contains("weight 1 is"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(d, 100000),
                       doctest::Contains("SMs split into only"), std::invalid_argument);
}

TEST_CASE("COHORT_NO_SM_PARTITIONING=1 turns SM shares off and emulated groups still work") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  if (!cohort::sm_partitioning_available(d)) {
    cohort::testing::skip("this CUDA driver has no green contexts");
    return;
  }
  REQUIRE(setenv("COHORT_NO_SM_PARTITIONING", "1", 1) == 0);
  const bool available = cohort::sm_partitioning_available(d);
  auto group = cohort::device_group::emulated(d, 2);
  REQUIRE(unsetenv("COHORT_NO_SM_PARTITIONING") == 0);
  CHECK_FALSE(available);
  CHECK_FALSE(group.splits_sms());
  CHECK(group.size() == 2);
  cohort::device_buffer<int> x(4, group.stream(1));
  x.fill_bytes(0);
  group.synchronize();
  CHECK(cohort::sm_partitioning_available(d)); // back once the variable is gone
}
