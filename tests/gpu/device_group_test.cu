// device_group: members, emulation, fork and join ordering, synchronize.
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <set>

TEST_CASE("a group of every visible GPU has one stream per device") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::device_group group(cohort::devices());
  CHECK_FALSE(group.is_emulated());
  REQUIRE(group.size() == static_cast<std::size_t>(cohort::device_count()));
  std::set<cudaStream_t> handles;
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(group.device(i) == cohort::device_ref{static_cast<int>(i)});
    CHECK(group.stream(i).device() == group.device(i));
    // Distinct GPUs share nothing: all of a member's SMs are its own while the others run.
    const auto sms = static_cast<unsigned>(cohort::properties(group.device(i)).multiprocessors);
    CHECK(group.sm_count(i) == sms);
    CHECK(group.concurrent_sm_count(i) == sms);
    handles.insert(group.stream(i).native_handle());
  }
  CHECK(handles.size() == group.size());
  CHECK_THROWS_WITH_AS(group.concurrent_sm_count(group.size()),
                       doctest::Contains("cohort::device_group::concurrent_sm_count"),
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(group.device(group.size()),
                       doctest::Contains("cohort::device_group::device"), std::out_of_range);
  CHECK_THROWS_WITH_AS(group.stream(group.size()),
                       doctest::Contains("cohort::device_group::stream"), std::out_of_range);
}

TEST_CASE("an emulated group has N logical devices with their own streams on one GPU") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t n : {1u, 2u, 3u, 4u, 8u}) {
    auto group = cohort::device_group::emulated(cohort::device_ref{0}, n);
    CHECK(group.is_emulated());
    REQUIRE(group.size() == n);
    std::set<cudaStream_t> handles;
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(group.device(i) == cohort::device_ref{0});
      handles.insert(group.stream(i).native_handle());
    }
    CHECK(handles.size() == n);
    CHECK(group.enable_peer_access());
  }
}

TEST_CASE("every_gpu_or_emulated is every visible GPU from two up, else n emulated on GPU 0") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int visible = cohort::device_count();
  for (std::size_t n : {1u, 2u, 3u}) {
    CAPTURE(n);
    auto group = cohort::device_group::every_gpu_or_emulated(n);
    if (visible >= 2) {
      CHECK_FALSE(group.is_emulated());
      CHECK(group.devices() == cohort::devices());
    } else {
      CHECK(group.is_emulated());
      REQUIRE(group.size() == n);
      for (std::size_t i = 0; i < n; ++i)
        CHECK(group.device(i) == cohort::device_ref{0});
    }
  }
}

TEST_CASE("fork makes every member wait for the origin and join makes the origin wait for all") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t n : {2u, 3u, 4u}) {
    CAPTURE(n);
    auto group = cohort::testing::group_of(n);
    cohort::stream origin(cohort::device_ref{0});
    constexpr std::size_t count = 4096;
    // Origin writes 5 late into a buffer on device 0; each member copies it after the fork.
    cohort::device_buffer<int> seed(count, origin);
    cohort::testing::launch_write_after_delay(origin, seed.data(), count, 5, 2'000'000);
    group.fork(origin);
    std::vector<cohort::device_buffer<int>> copies;
    std::vector<cohort::device_buffer<int>> scratch; // a target for each member's delay
    for (std::size_t i = 0; i < n; ++i) {
      copies.emplace_back(count, group.stream(i));
      scratch.emplace_back(1, group.stream(i));
      REQUIRE(cudaMemcpyPeerAsync(copies[i].data(), group.device(i).get(), seed.data(), 0,
                                  count * sizeof(int),
                                  group.stream(i).native_handle()) == cudaSuccess);
      // Each member then adds one, late; the origin's read after join must see the 6.
      cohort::testing::launch_write_after_delay(group.stream(i), scratch[i].data(), 1, 0,
                                                1'000'000);
      cohort::testing::launch_add_one(group.stream(i), copies[i].data(), copies[i].data(), count);
    }
    group.join(origin);
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<int> out(count, -1);
      REQUIRE(cudaMemcpyPeerAsync(seed.data(), 0, copies[i].data(), group.device(i).get(),
                                  count * sizeof(int), origin.native_handle()) == cudaSuccess);
      REQUIRE(cudaMemcpyAsync(out.data(), seed.data(), count * sizeof(int),
                              cudaMemcpyDeviceToHost, origin.native_handle()) == cudaSuccess);
      origin.synchronize();
      CHECK(std::count(out.begin(), out.end(), 6) == static_cast<long>(count));
    }
    group.synchronize();
  }
}

TEST_CASE("synchronize waits for every member") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  std::vector<cohort::device_buffer<int>> late;
  for (std::size_t i = 0; i < group.size(); ++i) {
    late.emplace_back(256, group.stream(i));
    cohort::testing::launch_write_after_delay(group.stream(i), late[i].data(), 256,
                                              static_cast<int>(i), 1'000'000 * (i + 1));
  }
  group.synchronize();
  for (std::size_t i = 0; i < group.size(); ++i)
    CHECK(group.stream(i).ready());
}

TEST_CASE("a moved group keeps its streams") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto a = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  const cudaStream_t first = a.stream(0).native_handle();
  cohort::device_group b(std::move(a));
  CHECK(b.stream(0).native_handle() == first);
  CHECK(b.is_emulated());
}
