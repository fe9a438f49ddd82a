// The in-order reduction where values are small enough for four tiles a load: an affine fold
// (associative, not commutative, exact in 32-bit arithmetic) notices an item skipped, taken twice
// or taken out of order. Sizes at the edges of a lane's load, a warp's tile, a warp's run and a
// block's step, a last step part-filled, and up to 2^24 + 3 (many steps a block); a group of one
// and an emulated or real group of three; pairs read whole, 32-bit items lifted by a transform
// from an aligned buffer and from a view one item off 16-byte alignment, into a pending value and
// into a device_result; and the index form. Values too wide for two sets of a step's results, too,
// and the kernel given more blocks than it has steps.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/std/span>

#include <algorithm>
#include <cstddef>
#include <random>
#include <vector>

namespace {

// x -> a * x + b modulo 2^32; `a` odd, so no map absorbs what came before it.
struct affine {
  unsigned a, b;
};
static_assert(sizeof(affine) == 8); // four tiles a step: the path under test

// f, then g.
__host__ __device__ inline affine then(affine f, affine g) {
  return {g.a * f.a, g.a * f.b + g.b};
}

struct compose {
  __device__ affine operator()(const affine& f, const affine& g) const { return then(f, g); }
};
struct lift_item {
  __host__ __device__ affine operator()(unsigned x) const { return {x * 2u + 1u, x ^ 0x9e3779b9u}; }
};
// The items the index form folds: i spread over 32 bits.
__host__ __device__ inline unsigned hash_index(std::size_t i) {
  return static_cast<unsigned>(i * 2654435761u);
}
struct lift_index {
  __device__ affine operator()(std::size_t i) const { return lift_item{}(hash_index(i)); }
};

const affine init = {5u, 11u};

affine fold_on_host(const std::vector<unsigned>& items) {
  affine r = init;
  for (unsigned x : items)
    r = then(r, lift_item{}(x));
  return r;
}

void check_same(const affine& got, const affine& expected) {
  CHECK(got.a == expected.a);
  CHECK(got.b == expected.b);
}

std::vector<unsigned> random_items(std::size_t n, unsigned seed) {
  std::mt19937 engine(seed);
  std::vector<unsigned> items(n);
  for (unsigned& x : items)
    x = engine();
  return items;
}

// The same fold in a value too wide to keep two sets of a step's results (above 64 bytes): a block
// then waits twice a step, and a warp loads its tiles one at a time.
struct wide {
  affine f;
  unsigned payload[22]; // carried through: zero in, zero out
};
static_assert(sizeof(wide) > 64);
struct compose_wide {
  __device__ wide operator()(const wide& x, const wide& y) const {
    wide r{then(x.f, y.f), {}};
    for (int i = 0; i < 22; ++i)
      r.payload[i] = x.payload[i] | y.payload[i];
    return r;
  }
};
struct lift_wide {
  __device__ wide operator()(unsigned x) const { return {lift_item{}(x), {}}; }
};

// Around a lane's load (4 items), a warp's tile (128), a warp's run (512), four runs (2048) and a
// block's step (4096) of 32-bit items; three steps and a last one whose first run is whole, second
// a tile and 7 items, others empty (12935); then sizes of many steps and blocks.
// clang-format off
const std::size_t order_sizes[] = {0, 1, 3, 4, 127, 128, 129, 511, 512, 513, 2047, 2049, 4096, 4099,
                                   12935, 65537, 1000003, (1u << 22) + 5, (1u << 24) + 3};
// clang-format on

} // namespace

TEST_CASE("in-order reductions of small values take every item once, in order") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 3u}) {
    const cohort::device_group group = cohort::testing::group_of(members);
    cohort::device_result<affine> result(group);
    for (std::size_t n : order_sizes) {
      CAPTURE(members);
      CAPTURE(n);
      const std::vector<unsigned> items = random_items(n, 7 + static_cast<unsigned>(n));
      const affine expected = fold_on_host(items);

      cohort::distributed_buffer<unsigned> x(group, n);
      x.copy_from_host(items);
      check_same(
          cohort::multi_device_transform_reduce(group, x, init, compose{}, lift_item{}).wait(),
          expected);

      std::vector<affine> lifted(n);
      for (std::size_t i = 0; i < n; ++i)
        lifted[i] = lift_item{}(items[i]);
      cohort::distributed_buffer<affine> pairs(group, n);
      pairs.copy_from_host(lifted);
      check_same(cohort::multi_device_reduce(group, pairs, init, compose{}).wait(), expected);

      // Each member's shard one item past a 16-byte boundary: the lanes load item by item.
      std::vector<cohort::device_buffer<unsigned>> memory;
      std::vector<cuda::std::span<unsigned>> spans;
      for (std::size_t k = 0; k < group.size(); ++k) {
        const std::size_t count = x.split().count(k), offset = x.split().offset(k);
        std::vector<unsigned> padded(count + 1, 0xa5a5a5a5u);
        std::copy(items.begin() + offset, items.begin() + offset + count, padded.begin() + 1);
        memory.emplace_back(count + 1, group.stream(k));
        memory.back().copy_from_host(padded);
        memory.back().stream().synchronize(); // the host vector goes at the end of the scope
        spans.emplace_back(memory.back().data() + 1, count);
      }
      const cohort::distributed_view<unsigned> off(group, spans);
      cohort::multi_device_transform_reduce(group, off, init, compose{}, lift_item{}, result);
      check_same(result.get(), expected);

      std::vector<unsigned> hashed(n);
      for (std::size_t i = 0; i < n; ++i)
        hashed[i] = hash_index(i);
      check_same(cohort::multi_device_transform_reduce(group, cohort::indices(n), init, compose{},
                                                       lift_index{})
                     .wait(),
                 fold_on_host(hashed));
      group.synchronize(); // before the memory is freed
    }
  }
}

TEST_CASE("in-order reductions of wide values take every item once, in order") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 3u})
    for (std::size_t n :
         {std::size_t{1}, std::size_t{1025}, std::size_t{12935}, std::size_t{1000003},
          (std::size_t{1} << 22) + 5, (std::size_t{1} << 24) + 3}) {
      CAPTURE(members);
      CAPTURE(n);
      const cohort::device_group group = cohort::testing::group_of(members);
      const std::vector<unsigned> items = random_items(n, 11 + static_cast<unsigned>(n));
      cohort::distributed_buffer<unsigned> x(group, n);
      x.copy_from_host(items);
      const wide got = cohort::multi_device_transform_reduce(group, x, wide{init, {}},
                                                             compose_wide{}, lift_wide{})
                           .wait();
      check_same(got.f, fold_on_host(items));
      CHECK(std::all_of(std::begin(got.payload), std::end(got.payload),
                        [](unsigned v) { return v == 0; }));
    }
}

TEST_CASE("an in-order kernel given more blocks than steps leaves the blocks past them empty, "
          "and its last block folds the slots and sets the count back to zero") {
  COHORT_SKIP_UNLESS_GPUS(1);
  using cohort::detail::maybe;
  using slot = maybe<affine>;
  const cohort::stream stream(cohort::device_ref{0});
  // Two steps of 8-byte items and a part of a third; plan_reduce would launch three blocks.
  constexpr std::size_t step =
      32 * cohort::detail::reduce_items_per_lane<affine> * cohort::detail::reduce_step_tiles;
  const std::size_t n = 2 * step + 37;
  const unsigned blocks = 7;
  std::vector<affine> lifted(n);
  const std::vector<unsigned> items = random_items(n, 5);
  for (std::size_t i = 0; i < n; ++i)
    lifted[i] = lift_item{}(items[i]);
  cohort::device_buffer<affine> input(n, stream);
  input.copy_from_host(lifted);
  cohort::device_buffer<slot> partials(blocks, stream);
  cohort::device_buffer<unsigned> arrivals(1, stream);
  arrivals.fill_bytes(0);
  cohort::device_buffer<affine> result(1, stream);
  using into_result = cohort::detail::into_result<affine, compose>;
  using out = cohort::detail::via_slots<affine, into_result>;
  // Twice: the last block must set the count back to zero for the second launch to fold at all.
  for (int launch = 0; launch < 2; ++launch) {
    CAPTURE(launch);
    partials.fill_bytes(0xff); // every slot says it has a value until a block writes it
    result.fill_bytes(0xff);
    cohort::launch(
        stream, {.grid = blocks, .block = cohort::detail::reduce_block_threads},
        cohort::detail::reduce_kernel<affine, const affine*, cohort::detail::identity, compose,
                                      out>,
        static_cast<const affine*>(input.data()), n, cohort::detail::identity{}, compose{},
        out{{partials.data(), arrivals.data()}, into_result{init, compose{}, result.data()}});
    std::vector<slot> slots(blocks);
    partials.copy_to_host(slots);
    std::vector<affine> got(1);
    result.copy_to_host(got);
    std::vector<unsigned> count(1, 1);
    arrivals.copy_to_host(count);
    stream.synchronize();
    for (unsigned b = 0; b < blocks; ++b) {
      CAPTURE(b);
      CHECK(slots[b].has() == (b < 3));
    }
    check_same(got[0], fold_on_host(items));
    CHECK(count[0] == 0);
  }
}
