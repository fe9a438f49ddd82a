// The launch shapes the algorithms compute on the host before they launch, checked without a GPU
// over sizes from 0 to past 2^40: a reduction's blocks and their ranges of steps (every item read
// by one block, ranges in order and even, no block without items, never more blocks than the
// partial slots, a block for every step while there are slots), and the element form's grid and
// pieces (every element in one tile of one launch, no launch past CUDA's limit) and its kernel (told
// the runs are aligned only where they are).
#include <cohort/algorithms/detail/for_each_kernels.cuh>
#include <cohort/algorithms/detail/reduce_plan.cuh>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace {

std::vector<std::size_t> counts_to_check(std::size_t tile) {
  std::vector<std::size_t> counts = {0, 1, 2, 3, 7, 31, 1009, 7919, 1000003};
  for (std::size_t base : {tile, 8 * tile, 1056 * 8 * tile, std::size_t(1) << 20,
                           std::size_t(1) << 31, std::size_t(1) << 32, std::size_t(1) << 41})
    for (std::size_t d : {std::size_t(0), std::size_t(1)}) {
      counts.push_back(base - d);
      counts.push_back(base + d);
    }
  return counts;
}

template <class U>
void check_reduce_plans() {
  constexpr std::size_t tile = 32 * cohort::detail::reduce_items_per_lane<U>;
  constexpr std::size_t step = cohort::detail::reduce_step_tiles;
  for (const unsigned max_blocks : {1u, 8u, 132u * 4u, 1000003u})
    for (const std::size_t count : counts_to_check(tile)) {
      CAPTURE(max_blocks);
      CAPTURE(count);
      const unsigned blocks = cohort::detail::plan_reduce<U>(count, max_blocks);
      if (count == 0) {
        CHECK(blocks == 0);
        continue;
      }
      REQUIRE(blocks >= 1);
      CHECK(blocks <= max_blocks);
      // A block for every step while there are slots; never one without a step.
      const std::size_t step_items = tile * step;
      const std::size_t steps = (count + step_items - 1) / step_items;
      CHECK(blocks == std::min<std::size_t>(max_blocks, steps));
      // The kernel's item ranges under this plan: [first_step(b), first_step(b + 1)) steps, the
      // last cut at count. Each block has items; together they are [0, count), in order.
      using cohort::detail::block_first_step;
      const auto items_from = [&](std::size_t b) {
        return std::min(block_first_step(b, blocks, steps) * step_items, count);
      };
      CHECK(items_from(0) == 0);
      CHECK(items_from(blocks) == count);
      CHECK(items_from(blocks - 1) < count);
      for (const std::size_t b : {std::size_t{0}, std::size_t{blocks / 2}})
        CHECK(items_from(b) < items_from(b + 1));
    }
}

// Block b's steps [first(b), first(b + 1)): they start at 0, end at the last step, follow one
// another, and differ in size by one at most, with no overflow past 2^40 steps.
TEST_CASE("a reduction's blocks take contiguous, even ranges of the steps") {
  using cohort::detail::block_first_step;
  for (const std::size_t blocks : {std::size_t(1), std::size_t(7), std::size_t(528)})
    for (const std::size_t steps : {blocks, blocks + 1, 2 * blocks + 1, std::size_t(1000003),
                                    std::size_t(1) << 36, (std::size_t(1) << 44) + 3}) {
      CAPTURE(blocks);
      CAPTURE(steps);
      CHECK(block_first_step(0, blocks, steps) == 0);
      CHECK(block_first_step(blocks, blocks, steps) == steps);
      std::size_t smallest = steps, largest = 0;
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t size =
            block_first_step(b + 1, blocks, steps) - block_first_step(b, blocks, steps);
        smallest = std::min(smallest, size);
        largest = std::max(largest, size);
      }
      CHECK(smallest >= 1);
      CHECK(largest - smallest <= 1);
      CHECK(largest == (steps + blocks - 1) / blocks);
    }
}

template <class T>
void check_element_grids() {
  constexpr std::size_t tile = cohort::detail::for_each_tile<T>;
  const std::size_t piece = cohort::detail::for_each_piece<T>;
  CHECK(piece % tile == 0);
  CHECK(piece / tile <= 0x7fffffffu); // CUDA's grid limit in x
  std::vector<std::size_t> sizes = counts_to_check(tile);
  for (const std::size_t n : {piece - 1, piece, piece + 1, 2 * piece + tile + 1})
    sizes.push_back(n);
  for (const std::size_t n : sizes) {
    CAPTURE(n);
    // The host launches pieces of at most for_each_piece elements, each for_each_grid tiles.
    std::size_t covered = 0;
    for (std::size_t done = 0; done < n; done += piece) {
      const std::size_t count = std::min(piece, n - done);
      const unsigned grid = cohort::detail::for_each_grid<T>(count);
      REQUIRE(grid >= 1);
      CHECK(std::size_t(grid) * tile >= count);
      CHECK(std::size_t(grid - 1) * tile < count);
      covered += count;
    }
    CHECK(covered == n);
  }
}

} // namespace

TEST_CASE("a reduction's plan reads every item once, in at most the blocks it has slots for") {
  check_reduce_plans<unsigned char>();
  check_reduce_plans<float>();
  check_reduce_plans<double>();
  check_reduce_plans<std::size_t>();
  struct wide {
    double v[6];
  };
  check_reduce_plans<wide>();
}

TEST_CASE("the element form's grids cover every element once, each launch within CUDA's limit") {
  check_element_grids<unsigned char>();
  check_element_grids<short>();
  check_element_grids<float>();
  check_element_grids<double>();
  struct wide {
    double v[3];
  };
  check_element_grids<wide>();
}

namespace {

struct no_op {
  template <class T>
  __device__ void operator()(T&) const {}
};

// The element form's kernel for a shard from `data + offset` (in elements): told the runs are
// aligned exactly where the shard starts on a multiple of a run's bytes.
template <class T>
bool takes_aligned_kernel(const T* data, std::size_t offset) {
  return cohort::detail::for_each_elements_at<T, no_op>(data + offset) ==
         &cohort::detail::for_each_elements<T, true, no_op>;
}

} // namespace

TEST_CASE("the element form is told runs are aligned only where the shard's first run is") {
  alignas(16) static unsigned char bytes[64];
  for (std::size_t offset = 0; offset < 8; ++offset) {
    CAPTURE(offset);
    CHECK(takes_aligned_kernel(bytes, offset) == (offset % 4 == 0));
    CHECK(takes_aligned_kernel(reinterpret_cast<const short*>(bytes), offset) == (offset % 2 == 0));
  }
  // Types whose run is their own alignment have one kernel only, whatever the address.
  static_assert(!cohort::detail::for_each_aligns<float>);
  static_assert(!cohort::detail::for_each_aligns<double>);
  struct three {
    unsigned char v[3];
  };
  static_assert(!cohort::detail::for_each_aligns<three>); // a run of 3 bytes: no wider access
  struct pair {
    float a, b;
  };
  static_assert(cohort::detail::for_each_aligns<pair>); // 8 bytes, aligned to 4
  static_assert(cohort::detail::for_each_aligns<const unsigned char>);
}
