// managed_buffer: one managed allocation over a group, each shard advised to and prefetched on its
// member's device, usable by every algorithm and through one pointer. Small sizes only: a test
// never asks for more managed memory than the device has free.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

namespace {

__global__ void read_everything(const float* all, std::size_t n, double* out) {
  double sum = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += static_cast<double>(all[i]);
  atomicAdd(out, sum);
}

int range_attribute(const void* p, std::size_t bytes, cudaMemRangeAttribute attribute) {
  int value = -7;
  REQUIRE(cudaMemRangeGetAttribute(&value, sizeof value, attribute, p, bytes) == cudaSuccess);
  return value;
}

} // namespace

TEST_CASE("a managed buffer's shards live on their members, and every algorithm takes it") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    const std::size_t n = 1'000'003;
    cohort::managed_buffer<float> x(group, n);
    REQUIRE(x.size() == n);
    REQUIRE(x.shards() == members);
    group.synchronize();
    for (std::size_t i = 0; i < members; ++i) {
      const auto s = x.shard(i);
      CHECK(s.data.data() == x.span().data() + x.split().offset(i));
      CHECK(s.stream == group.stream(i));
      const std::size_t bytes = s.data.size_bytes();
      CHECK(range_attribute(s.data.data(), bytes, cudaMemRangeAttributePreferredLocationId) ==
            group.device(i).get());
      CHECK(range_attribute(s.data.data(), bytes, cudaMemRangeAttributeLastPrefetchLocationId) ==
            group.device(i).get());
    }
    // The host writes through the one pointer; the members compute on their shards.
    const auto host = cohort::testing::random_values<float>(n, 40 + members);
    std::copy(host.begin(), host.end(), x.span().data());
    x.prefetch();
    cohort::multi_device_for_each(group, x, [] __device__(float& v) { v = 2.0f * v + 1.0f; });
    auto sum = cohort::multi_device_transform_reduce(group, x, 0.0, cuda::std::plus<>{},
                                                     [] __device__(float v) { return double(v); });
    double want = 0.0;
    for (float v : host)
      want += 2.0 * static_cast<double>(v) + 1.0;
    CHECK(sum.wait() == doctest::Approx(want).epsilon(1e-9));
    // A kernel on member 0 reads every shard, the others' included, through the mapping.
    cohort::device_buffer<double> out(1, group.stream(0));
    out.fill_bytes(0);
    cohort::launch(group.stream(0), {.grid = 1, .block = 256}, read_everything,
                   static_cast<const float*>(x.span().data()), n, out.data());
    double got = 0.0;
    out.copy_to_host(std::span<double>(&got, 1));
    group.synchronize();
    CHECK(got == doctest::Approx(want).epsilon(1e-9));
    for (std::size_t i = 0; i < n; i += 99'991) // the host reads the results back, too
      CHECK(x.span()[i] == 2.0f * host[i] + 1.0f);
  }
}

TEST_CASE("a managed buffer refuses what it cannot hold and a prefetch on another device") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  // Past the devices' free memory: refused before anything is allocated.
  std::size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  try {
    cohort::managed_buffer<std::uint64_t> huge(group, 2 * total / sizeof(std::uint64_t));
    FAIL("a managed buffer larger than the free memory was made");
  } catch (const cohort::cuda_error& e) {
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(std::string(e.what()).find("bytes of managed memory") != std::string::npos);
  }
  const cohort::managed_buffer<int> empty(group, 0);
  CHECK(empty.size() == 0);
  CHECK(empty.span().data() == nullptr);
  CHECK_THROWS_WITH_AS(cohort::managed_buffer<int>(group, cohort::partition::even(10, 3)),
                       doctest::Contains("cohort::managed_buffer: argument 'split'"),
                       std::invalid_argument);
  cohort::managed_buffer<int> x(group, 1000);
  CHECK_THROWS_AS(x.prefetch(2, group.stream(0)), std::out_of_range);
  if (cohort::device_count() >= 2)
    CHECK_THROWS_WITH_AS(x.prefetch(1, group.stream(0)),
                         doctest::Contains("is a stream of device 0 but shard 1 lives on device 1"),
                         std::invalid_argument);
  group.synchronize();
}
