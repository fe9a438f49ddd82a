// chunk_pipeline: chunks computed on each member's compute stream, each chunk's all_reduce on the
// member's stream, against a host reference; ordering with the work before and after a run, and
// after a computation that throws part-way.
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace {

// Every member: in (random), out (poisoned); chunk k of out becomes in * (k + 1) + rank on the
// compute stream, then is summed over the members.
void check_pipeline(std::size_t members, std::size_t count, std::size_t chunks, unsigned seed) {
  CAPTURE(members);
  CAPTURE(count);
  CAPTURE(chunks);
  auto group = cohort::testing::group_of(members);
  cohort::p2p_clique peers(group);
  cohort::chunk_pipeline overlap(group);
  REQUIRE(overlap.size() == members);
  const auto split = cohort::partition::replicated(count, members);
  cohort::distributed_buffer<int> in(group, split), out(group, split);
  const auto blocks = cohort::partition::even(count, chunks);
  // Twice: the second run's inputs are written on the members' streams after the first run,
  // which its compute streams must wait for.
  for (int run = 0; run < 2; ++run) {
    std::vector<std::vector<int>> inputs;
    for (std::size_t r = 0; r < members; ++r) {
      inputs.push_back(cohort::testing::random_values<int>(count, seed + 17 * run + r));
      in.local(r).copy_from_host(inputs.back());
    }
    out.fill_bytes(cohort::testing::poison_byte);
    std::vector<int> calls(chunks, 0);
    overlap.run(
        chunks,
        [&](const cohort::member& m, std::size_t k) {
          CHECK(m.stream == overlap.compute_stream(m.rank));
          const int* src = in.shard(m.rank).data.data() + blocks.offset(k);
          int* dst = out.shard(m.rank).data.data() + blocks.offset(k);
          const int scale = static_cast<int>(k) + 1, rank = static_cast<int>(m.rank);
          cohort::for_each_n(m.stream, blocks.count(k),
                             [=] __device__(std::size_t e) { dst[e] = src[e] * scale + rank; });
        },
        [&](std::size_t k) {
          ++calls[k];
          std::vector<cuda::std::span<int>> spans;
          for (std::size_t r = 0; r < members; ++r)
            spans.push_back(out.shard(r).data.subspan(blocks.offset(k), blocks.count(k)));
          cohort::all_reduce(peers, spans, cohort::sum);
        });
    CHECK(calls == std::vector<int>(chunks, 1));
    std::vector<int> expected(count, 0);
    for (std::size_t k = 0; k < chunks; ++k)
      for (std::size_t e = blocks.offset(k); e < blocks.offset(k) + blocks.count(k); ++e)
        for (std::size_t r = 0; r < members; ++r)
          expected[e] += inputs[r][e] * static_cast<int>(k + 1) + static_cast<int>(r);
    for (std::size_t r = 0; r < members; ++r) {
      std::vector<int> got(count);
      out.local(r).copy_to_host(got); // on the member's stream: after the last collective
      group.synchronize();
      CAPTURE(run);
      CAPTURE(r);
      CHECK(got == expected);
    }
  }
}

} // namespace

TEST_CASE("chunk_pipeline overlaps chunks' computation with their all_reduce, in order") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_pipeline(2, 1 << 20, 8, 1);
  check_pipeline(2, 1000, 7, 2); // chunks of unequal sizes
  check_pipeline(3, 65537, 3, 3);
  check_pipeline(2, 4096, 1, 4);
}

TEST_CASE("chunk_pipeline with no chunks calls nothing") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::chunk_pipeline overlap(group);
  bool called = false;
  overlap.run(
      0, [&](const cohort::member&, std::size_t) { called = true; },
      [&](std::size_t) { called = true; });
  CHECK_FALSE(called);
}

// A computation that throws part-way: member 0 has already enqueued chunk 1 (a kernel that writes
// 50 ms late) when member 1 throws. The members' streams must still wait for it: a copy on member
// 0's stream after the throw used to read the buffer before the kernel wrote it (and memory freed
// on that stream could be freed under the kernel).
TEST_CASE("chunk_pipeline whose computation throws part-way leaves the members' streams after "
          "what it enqueued") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::chunk_pipeline overlap(group);
  const std::size_t count = 4099;
  cohort::distributed_buffer<int> out(group, cohort::partition::replicated(count, 2));
  out.fill_bytes(cohort::testing::poison_byte);
  // Load the kernel first (its first launch may wait for the GPU).
  cohort::testing::launch_write_after_delay(group.stream(0), out.shard(0).data.data(), 1, 0, 0ull);
  group.synchronize();
  out.fill_bytes(cohort::testing::poison_byte);
  std::vector<std::size_t> communicated;
  CHECK_THROWS_WITH_AS(overlap.run(
                           3,
                           [&](const cohort::member& m, std::size_t k) {
                             if (k == 1 && m.rank == 1)
                               throw std::runtime_error("member 1 cannot compute chunk 1");
                             if (k == 1)
                               cohort::testing::launch_write_after_delay(
                                   m.stream, out.shard(0).data.data(), count, 7, 50'000'000ull);
                           },
                           [&](std::size_t k) { communicated.push_back(k); }),
                       "member 1 cannot compute chunk 1", std::runtime_error);
  CHECK(communicated == std::vector<std::size_t>{0});
  std::vector<int> got(count);
  out.local(0).copy_to_host(got); // on member 0's stream
  group.stream(0).synchronize();
  CHECK(std::count(got.begin(), got.end(), 7) == static_cast<std::ptrdiff_t>(count));
  group.synchronize();
}
