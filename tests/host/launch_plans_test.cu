// The launch shapes the algorithms compute on the host before they launch, checked without a GPU
// over sizes from 0 to past 2^40: a reduction's blocks and items per warp (every item read by one
// warp, no block without items, never more blocks than the partial slots, few tiles not spread
// thin), and the element form's grid and pieces (every element in one tile of one launch, no
// launch past CUDA's limit).
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
  constexpr std::size_t warps = cohort::detail::reduce_block_warps;
  for (const unsigned max_blocks : {1u, 8u, 132u * 8u, 1000003u})
    for (const std::size_t count : counts_to_check(tile)) {
      CAPTURE(max_blocks);
      CAPTURE(count);
      const cohort::detail::reduce_launch plan = cohort::detail::plan_reduce<U>(count, max_blocks);
      if (count == 0) {
        CHECK(plan.blocks == 0);
        continue;
      }
      REQUIRE(plan.blocks >= 1);
      CHECK(plan.blocks <= max_blocks);
      CHECK(plan.per_warp % tile == 0);
      const std::size_t per_block = plan.per_warp * warps;
      // Every item is some warp's, and the last block has items of its own.
      CHECK(per_block * plan.blocks >= count);
      CHECK(per_block * (plan.blocks - 1) < count);
      // Many tiles are shared evenly over all the warps the slots allow; few go to warps of at
      // least reduce_min_tiles_per_warp tiles each (the last may have fewer).
      const std::size_t tiles = (count + tile - 1) / tile;
      const std::size_t all_warps = std::size_t(max_blocks) * warps;
      const std::size_t min_tiles = cohort::detail::reduce_min_tiles_per_warp;
      const std::size_t per_warp_tiles = plan.per_warp / tile;
      const std::size_t busy_warps = (tiles + per_warp_tiles - 1) / per_warp_tiles;
      if (tiles >= min_tiles * all_warps)
        CHECK(per_warp_tiles == (tiles + all_warps - 1) / all_warps);
      else
        CHECK(busy_warps <= (tiles + min_tiles - 1) / min_tiles);
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
