// distributed_buffer over real and emulated groups: shards where the partition says, round trips,
// kernels on every shard, mismatches rejected.
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

namespace {

void check_layout(const cohort::distributed_buffer<float>& x, const cohort::device_group& group,
                  const cohort::partition& split) {
  REQUIRE(x.shards() == group.size());
  CHECK(x.size() == split.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    const auto s = x.shard(i);
    CHECK(s.rank == i);
    CHECK(s.offset == split.offset(i));
    CHECK(s.data.size() == split.count(i));
    CHECK(s.device == group.device(i));
    CHECK(s.stream == group.stream(i));
    if (!s.data.empty()) {
      cudaPointerAttributes attributes{};
      REQUIRE(cudaPointerGetAttributes(&attributes, s.data.data()) == cudaSuccess);
      CHECK(attributes.device == group.device(i).get());
    }
  }
}

} // namespace

TEST_CASE("distributed_buffer shards, round-trips and runs a kernel per shard") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u, 4u}) {
    auto group = cohort::testing::group_of(members);
    for (std::size_t n : {0ul, 1ul, 2ul, 3ul, 5ul, 1021ul, 1000003ul}) {
      CAPTURE(members);
      CAPTURE(n);
      const auto split = cohort::partition::even(n, members);
      cohort::distributed_buffer<float> x(group, n);
      check_layout(x, group, split);
      const auto input = cohort::testing::random_values<float>(n, 11);
      x.copy_from_host(input);
      for (std::size_t i = 0; i < x.shards(); ++i) {
        auto s = x.shard(i);
        cohort::testing::launch_add_one(s.stream, s.data.data(), s.data.data(), s.data.size());
      }
      std::vector<float> out(n, cohort::testing::poison_value<float>());
      x.copy_to_host(out);
      group.synchronize();
      std::size_t wrong = 0;
      for (std::size_t k = 0; k < n; ++k)
        wrong += out[k] != input[k] + 1.0f;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("distributed_buffer follows a weighted partition") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  const auto split = cohort::partition::weighted(100003, {1.0, 2.0, 5.0});
  cohort::distributed_buffer<float> x(group, split);
  check_layout(x, group, split);
  const auto input = cohort::testing::random_values<float>(split.size(), 2);
  std::vector<float> out(split.size(), cohort::testing::poison_value<float>());
  x.copy_from_host(input);
  x.copy_to_host(out);
  group.synchronize();
  CHECK(out == input);
}

TEST_CASE("a distributed_buffer too large for one member throws naming it and frees the other "
          "shards [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2); // two GPUs, or an emulated pair on one
  const cohort::device_ref first = group.device(0), second = group.device(1);
  const std::size_t small = std::size_t{1} << 30; // fits on the first member
  const std::size_t huge = 2 * cohort::properties(second).total_memory;
  group.synchronize();
  const std::size_t free_before = cohort::memory_info(first).free;
  try {
    cohort::distributed_buffer<char> x(group, cohort::partition::from_counts({small, huge}));
    FAIL("a shard twice the size of its device was allocated");
  } catch (const cohort::cuda_error& e) {
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(e.device() == second.get());
    const std::string text = e.what();
    CHECK_MESSAGE(text.find("on device " + std::to_string(second.get())) != std::string::npos,
                  text);
    CHECK_MESSAGE(text.find("Asked for " + std::to_string(huge) + " bytes") != std::string::npos,
                  text);
    CHECK_MESSAGE(text.find("bytes are free on the device") != std::string::npos, text);
  }
  // The first member's shard was given back: its device has as much free memory as before (the
  // stream-ordered pool returns freed memory to the device at the synchronisation). The slack,
  // a quarter of the shard, absorbs what tools take meanwhile (compute-sanitizer's initcheck took
  // 128 MiB for itself here); a shard kept would show as the whole GiB.
  group.synchronize();
  const std::size_t free_after = cohort::memory_info(first).free;
  const std::size_t slack = small / 4;
  CHECK_MESSAGE(free_after + slack >= free_before,
                "free memory on device " << first.get() << " fell from " << free_before << " to "
                                         << free_after << " bytes");
  // And both devices still work.
  cohort::distributed_buffer<int> fine(group, 1000);
  fine.fill_bytes(0);
  group.synchronize();
}
