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

TEST_CASE("distributed_buffer rejects a partition and host spans that do not fit") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  CHECK_THROWS_WITH_AS(cohort::distributed_buffer<float>(group, cohort::partition::even(10, 3)),
                       doctest::Contains("argument 'split': has 3 parts but the group has 2"),
                       std::invalid_argument);
  cohort::distributed_buffer<float> x(group, 10);
  std::vector<float> wrong(11);
  CHECK_THROWS_WITH_AS(x.copy_from_host(wrong), doctest::Contains("argument 'source'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(x.copy_to_host(wrong), doctest::Contains("argument 'target'"),
                       std::invalid_argument);
}
