// Multi-device scans against sequential host references, on groups of 1, 2, 3 and 5: sizes 0, 1,
// fewer than the members, primes and 2^20 + 3; in place, into another buffer, over views of the
// user's own memory, through a transform and from transform(i) over an index range; operators
// that do not commute (2x2 matrix products mod a prime), init placed first, outputs poisoned
// first, a scan captured into a graph and replayed, bad arguments refused, and scratch that
// cannot fit reported as out of memory. A group of one (one CUB scan): integer and floating
// types, half and bfloat16 into float, captured and direct calls interleaved; and a loop of scans
// that allocates nothing and makes no event once warm.
#include "scan_sort_checks.cuh"
#include "steady_state.cuh"
#include "user_memory.cuh"

#include <doctest/doctest.h>

#include <cuda/std/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using cohort::testing::first_difference;
using cohort::testing::read_back;

const std::size_t sizes[] = {0, 1, 2, 4, 7919, (std::size_t(1) << 20) + 3};
const std::size_t group_sizes[] = {1, 2, 3, 5};

constexpr std::uint32_t prime = 65521;

// A 2x2 matrix mod `prime`: its product is associative and does not commute.
struct mat {
  std::uint32_t a, b, c, d;
  bool operator==(const mat&) const = default;
};
struct mat_product {
  __host__ __device__ mat operator()(const mat& x, const mat& y) const {
    auto f = [](std::uint32_t p, std::uint32_t q, std::uint32_t r, std::uint32_t s) {
      return std::uint32_t((std::uint64_t(p) * q + std::uint64_t(r) * s) % prime);
    };
    return {f(x.a, y.a, x.b, y.c), f(x.a, y.b, x.b, y.d), f(x.c, y.a, x.d, y.c),
            f(x.c, y.b, x.d, y.d)};
  }
};

// The same matrices from an index, for the index forms.
struct mat_of_index {
  __host__ __device__ mat operator()(std::size_t i) const {
    const auto h = [](std::uint64_t v) { return std::uint32_t((v * 2654435761u + 12345) % prime); };
    return {h(i), h(i + 1), h(3 * i + 7), h(i ^ 0x5bd1)};
  }
};

std::vector<mat> random_matrices(std::size_t n, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<std::uint32_t> pick(0, prime - 1);
  std::vector<mat> m(n);
  for (mat& x : m)
    x = {pick(engine), pick(engine), pick(engine), pick(engine)};
  return m;
}

template <class T, class Op>
std::vector<T> host_inclusive(const std::vector<T>& in, Op op) {
  std::vector<T> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    out[i] = i == 0 ? in[0] : op(out[i - 1], in[i]);
  return out;
}

template <class T, class Op>
std::vector<T> host_exclusive(const std::vector<T>& in, T init, Op op) {
  std::vector<T> out(in.size());
  T carry = init;
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = carry;
    carry = op(carry, in[i]);
  }
  return out;
}

} // namespace

TEST_CASE("inclusive and exclusive scans of integers, in place and into another buffer") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cuda::std::plus<long long> plus;
  for (std::size_t members : group_sizes)
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const auto in = cohort::testing::random_values<long long>(n, 11 + unsigned(n));
      cohort::distributed_buffer<long long> x(group, n), y(group, x.split());

      x.copy_from_host(in);
      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_inclusive_scan(group, x, y, plus);
      CHECK(first_difference(read_back(group, y), host_inclusive(in, plus)) == n);
      CHECK(first_difference(read_back(group, x), in) == n); // the input is left alone

      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_exclusive_scan(group, x, y, -5, plus);
      CHECK(first_difference(read_back(group, y), host_exclusive(in, -5LL, plus)) == n);

      cohort::multi_device_inclusive_scan(group, x, plus);
      CHECK(first_difference(read_back(group, x), host_inclusive(in, plus)) == n);

      x.copy_from_host(in);
      cohort::multi_device_exclusive_scan(group, x, 7, plus);
      CHECK(first_difference(read_back(group, x), host_exclusive(in, 7LL, plus)) == n);
    }
}

// Every buffer form of the scans with `op`, the matrix product however it is written, against
// the host's: into another buffer and in place, inclusive and exclusive (init on the left).
template <class Op>
void check_matrix_scans(Op op, unsigned seed) {
  const mat_product product;
  for (std::size_t members : group_sizes)
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const auto in = random_matrices(n, seed + unsigned(n));
      const mat init{3, 1, 4, 1};
      cohort::distributed_buffer<mat> x(group, n), y(group, x.split());
      x.copy_from_host(in);
      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_inclusive_scan(group, x, y, op);
      CHECK(first_difference(read_back(group, y), host_inclusive(in, product)) == n);
      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_exclusive_scan(group, x, y, init, op);
      CHECK(first_difference(read_back(group, y), host_exclusive(in, init, product)) == n);
      cohort::multi_device_inclusive_scan(group, x, op);
      CHECK(first_difference(read_back(group, x), host_inclusive(in, product)) == n);
      x.copy_from_host(in);
      cohort::multi_device_exclusive_scan(group, x, init, op);
      CHECK(first_difference(read_back(group, x), host_exclusive(in, init, product)) == n);
    }
}

TEST_CASE("a scan whose operator does not commute keeps the order, init on the left") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_matrix_scans(mat_product{}, 3);
}

// CUB reads the operator's result type on the host, which nvcc cannot tell for an extended
// __device__ lambda: before cohort took such a lambda as returning T, none of these compiled.
TEST_CASE("an extended __device__ lambda is a scan operator, in every form") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_matrix_scans([] __device__(const mat& x, const mat& y) { return mat_product{}(x, y); }, 5);
  const mat_product product;
  const mat init{2, 7, 1, 8};
  const std::size_t n = 7919;
  std::vector<mat> of_index(n);
  for (std::size_t i = 0; i < n; ++i)
    of_index[i] = mat_of_index{}(i);
  for (std::size_t members : group_sizes) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    cohort::distributed_buffer<mat> y(group, n);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_inclusive_scan(
        group, cohort::indices(n), y,
        [] __device__(const mat& a, const mat& b) { return mat_product{}(a, b); }, mat_of_index{});
    CHECK(first_difference(read_back(group, y), host_inclusive(of_index, product)) == n);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_exclusive_scan(
        group, cohort::indices(n), y, init,
        [] __device__(auto a, auto b) { return mat_product{}(a, b); }, mat_of_index{});
    CHECK(first_difference(read_back(group, y), host_exclusive(of_index, init, product)) == n);
  }
}

TEST_CASE("scans of f(i) over indices(n), on even and uneven partitions with empty shards") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const mat_product product;
  for (std::size_t members : group_sizes)
    for (std::size_t n : {std::size_t(0), std::size_t(3), std::size_t(100003)}) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      std::vector<mat> in(n);
      for (std::size_t i = 0; i < n; ++i)
        in[i] = mat_of_index{}(i);
      // Every other member empty, where there are several: the carry skips over them.
      const std::size_t holders = (members + 1) / 2;
      std::vector<std::size_t> counts(members, 0);
      for (std::size_t k = 0; k < members; k += 2)
        counts[k] = n / holders + (k / 2 < n % holders ? 1 : 0);
      for (const cohort::partition& split :
           {cohort::partition::even(n, members), cohort::partition::from_counts(counts)}) {
        cohort::distributed_buffer<mat> out(group, split);
        out.fill_bytes(cohort::testing::poison_byte);
        cohort::multi_device_inclusive_scan(group, cohort::indices(n), out, product,
                                            mat_of_index{});
        CHECK(first_difference(read_back(group, out), host_inclusive(in, product)) == n);
        out.fill_bytes(cohort::testing::poison_byte);
        // The same split given with the range: it must be the output's.
        cohort::multi_device_exclusive_scan(group, cohort::indices(n, split), out, mat{1, 0, 0, 1},
                                            product, mat_of_index{});
        CHECK(first_difference(read_back(group, out),
                               host_exclusive(in, mat{1, 0, 0, 1}, product)) == n);
      }
    }
}

TEST_CASE("a float sum scans exactly where every partial sum is an integer below 2^24") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  const std::size_t n = (std::size_t(1) << 20) + 3;
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i)
    in[i] = float(i % 3);
  cohort::distributed_buffer<float> x(group, n);
  x.copy_from_host(in);
  cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<>{});
  CHECK(first_difference(read_back(group, x), host_inclusive(in, cuda::std::plus<float>{})) == n);
}

// A sum in float of 16-bit floats: the operator's result is wider than T.
struct float_sum {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};

float as_float(__half v) {
  return __half2float(v);
}
float as_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

// The documented result of an inclusive scan of T with a wider operator: CUB accumulates in float
// within a shard, each element rounded to T once; the carry between members is held in T (the
// shard's total rounded, then carry + total rounded). Inputs are small integers, so every float
// sum is exact and only T's roundings remain.
template <class T>
std::vector<float> host_wide_inclusive(const std::vector<float>& in,
                                       const cohort::partition& split) {
  std::vector<float> out(in.size());
  bool has_carry = false;
  float carry = 0;
  std::size_t at = 0;
  for (std::size_t k = 0; k < split.parts(); ++k) {
    const std::size_t count = split.count(k);
    if (count == 0) continue;
    float acc = has_carry ? carry : 0.0f, total = 0;
    for (std::size_t i = at; i < at + count; ++i) {
      acc += in[i];
      total += in[i];
      out[i] = as_float(from_float<T>(acc));
    }
    total = as_float(from_float<T>(total));
    carry = has_carry ? as_float(from_float<T>(carry + total)) : total;
    has_carry = true;
    at += count;
  }
  return out;
}

template <class T>
void check_wide_operator_scan() {
  for (std::size_t members : {2, 3, 5}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    const std::size_t n = 30011; // sums below half's largest finite value, 65504
    std::vector<float> in_float(n);
    std::vector<T> in(n);
    std::mt19937 random(members);
    for (std::size_t i = 0; i < n; ++i) {
      in_float[i] = float(random() % 2);
      in[i] = from_float<T>(in_float[i]);
    }
    cohort::distributed_buffer<T> x(group, n), y(group, x.split());
    const auto want = host_wide_inclusive<T>(in_float, x.split());
    auto as_floats = [](const std::vector<T>& v) {
      std::vector<float> f(v.size());
      for (std::size_t i = 0; i < v.size(); ++i)
        f[i] = as_float(v[i]);
      return f;
    };
    x.copy_from_host(in);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_inclusive_scan(group, x, y, float_sum{});
    CHECK(first_difference(as_floats(read_back(group, y)), want) == n);
    cohort::multi_device_inclusive_scan(group, x, float_sum{});
    CHECK(first_difference(as_floats(read_back(group, x)), want) == n);
  }
}

TEST_CASE("a scan of half or bfloat16 with a float operator rounds each element once") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_wide_operator_scan<__half>();
  check_wide_operator_scan<__nv_bfloat16>();
}

TEST_CASE("a scan captured into a graph replays in order with direct calls") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {2u, 3u}) { // real GPUs where there are as many
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    // A graph captures only direct copies between two GPUs (each member's carry to the next).
    REQUIRE(group.enable_peer_access());
    const std::size_t n = 1000;
    std::vector<long long> expected(n, 1);
    cohort::distributed_buffer<long long> x(group, n);
    x.copy_from_host(expected);
    const cuda::std::plus<long long> plus;
    auto graph = cohort::group_graph::capture(
        group, [&] { cohort::multi_device_inclusive_scan(group, x, plus); });
    graph.launch();
    cohort::multi_device_inclusive_scan(group, x, plus);
    graph.launch();
    for (int round = 0; round < 3; ++round)
      expected = host_inclusive(expected, plus);
    CHECK(first_difference(read_back(group, x), expected) == n);
  }
}

TEST_CASE("a scan whose members are not all in one capture is refused before it enqueues") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::vector<int> ones(1000, 1);
  cohort::distributed_buffer<int> x(group, ones.size());
  x.copy_from_host(ones);
  // Only member 1's stream captured: member 0's scan would run now and member 1's, waiting for
  // member 0's carry, only in the graph.
  cohort::testing::lone_capture capture(group, 1);
  const std::string message = cohort::testing::logic_error_message(
      [&] { cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<int>{}); });
  const std::size_t nodes = capture.end();
  CAPTURE(message);
  CHECK(message.find("multi_device_inclusive_scan: member 0") != std::string::npos);
  CHECK(nodes == 0);
  cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<int>{}); // still works
  std::vector<int> expected(ones.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = int(i + 1);
  CHECK(first_difference(read_back(group, x), expected) == expected.size());
}

TEST_CASE("scans refuse buffers of other partitions and groups before enqueuing") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  auto other = cohort::testing::group_of(2);
  cohort::distributed_buffer<int> x(group, 10);
  cohort::distributed_buffer<int> uneven(group, cohort::partition::weighted(10, {1.0, 3.0}));
  cohort::distributed_buffer<int> elsewhere(other, 10);
  // x holds random values (an input, and the output of the last call); the other outputs are
  // poisoned. A call that enqueued some members' scans before refusing would change them.
  const auto values = cohort::testing::random_values<int>(10, 17);
  x.copy_from_host(values);
  uneven.fill_bytes(cohort::testing::poison_byte);
  elsewhere.fill_bytes(cohort::testing::poison_byte);
  CHECK_THROWS_AS(cohort::multi_device_inclusive_scan(group, x, uneven, cuda::std::plus<>{}),
                  std::invalid_argument);
  CHECK_THROWS_AS(cohort::multi_device_exclusive_scan(group, x, elsewhere, 0, cuda::std::plus<>{}),
                  std::invalid_argument);
  CHECK_THROWS_AS(cohort::multi_device_inclusive_scan(group, elsewhere, cuda::std::plus<>{}),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      cohort::multi_device_inclusive_scan(group, cohort::indices(11), x, cuda::std::plus<>{},
                                          [] __device__(std::size_t i) { return int(i); }),
      std::invalid_argument);
  group.synchronize();
  other.synchronize();
  CHECK(first_difference(read_back(group, x), values) == values.size());
  std::size_t written = 0;
  for (const auto* poisoned : {&uneven, &elsewhere})
    for (std::size_t r = 0; r < poisoned->shards(); ++r)
      for (const int v : cohort::testing::shard_to_host(*poisoned, r))
        written += v != cohort::testing::poison_value<int>();
  CHECK(written == 0);
}

namespace {

// An uneven split for `members`: the last member three shares, member 1 none where there are
// three or more.
cohort::partition uneven_split(std::size_t n, std::size_t members) {
  std::vector<std::size_t> shares(members, 1);
  shares[members - 1] = 3;
  if (members >= 3) shares[1] = 0;
  std::size_t total = 0;
  for (std::size_t s : shares)
    total += s;
  std::vector<std::size_t> counts(members);
  std::size_t given = 0;
  for (std::size_t k = 0; k < members; ++k)
    given += counts[k] = n * shares[k] / total;
  counts[members - 1] += n - given;
  return cohort::partition::from_counts(counts);
}

} // namespace

TEST_CASE("scans over views of the user's own memory, in place, into views and into buffers") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cuda::std::plus<long long> plus;
  for (std::size_t members : group_sizes)
    for (std::size_t n :
         {std::size_t(0), std::size_t(1), std::size_t(7919), (std::size_t(1) << 20) + 3}) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const cohort::partition split = uneven_split(n, members);
      const auto in = cohort::testing::random_values<long long>(n, 31 + unsigned(n));
      const auto inclusive = host_inclusive(in, plus);
      cohort::testing::user_memory<long long> xm(group, split), ym(group, split);
      const cohort::distributed_view<long long> x = xm.view(), y = ym.view();
      const cohort::distributed_view<const long long> read_only = x;
      xm.copy_from_host(in);

      ym.poison();
      cohort::multi_device_inclusive_scan(group, read_only, y, plus);
      CHECK(first_difference(ym.to_host(), inclusive) == n);
      CHECK(first_difference(xm.to_host(), in) == n); // the input is left alone
      ym.poison();
      cohort::multi_device_exclusive_scan(group, x, y, -3, plus);
      CHECK(first_difference(ym.to_host(), host_exclusive(in, -3LL, plus)) == n);

      // A view into a buffer, and a buffer into a view.
      cohort::distributed_buffer<long long> b(group, split);
      b.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_inclusive_scan(group, x, b, plus);
      CHECK(first_difference(read_back(group, b), inclusive) == n);
      ym.poison();
      cohort::multi_device_exclusive_scan(group, std::as_const(b), y, 0, plus);
      CHECK(first_difference(ym.to_host(), host_exclusive(inclusive, 0LL, plus)) == n);

      // In place, and as the same spans given as input and output (in place too).
      cohort::multi_device_inclusive_scan(group, x, plus);
      CHECK(first_difference(xm.to_host(), inclusive) == n);
      xm.copy_from_host(in);
      cohort::multi_device_exclusive_scan(group, x, 5, plus);
      CHECK(first_difference(xm.to_host(), host_exclusive(in, 5LL, plus)) == n);
      xm.copy_from_host(in);
      cohort::multi_device_inclusive_scan(group, x, x, plus);
      CHECK(first_difference(xm.to_host(), inclusive) == n);
      xm.copy_from_host(in);
      cohort::multi_device_exclusive_scan(group, x, x, 2, plus,
                                          [] __device__(long long v) { return 3 * v; });
      std::vector<long long> tripled(n);
      for (std::size_t i = 0; i < n; ++i)
        tripled[i] = 3 * in[i];
      CHECK(first_difference(xm.to_host(), host_exclusive(tripled, 2LL, plus)) == n);
    }
}

namespace {
struct square_wide {
  __host__ __device__ long long operator()(int v) const { return (long long)v * v; }
};
} // namespace

TEST_CASE(
    "a transform applies to each element before the scan, and numbers convert to the output's") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cuda::std::plus<long long> plus;
  for (std::size_t members : group_sizes)
    for (std::size_t n : {std::size_t(0), std::size_t(5), std::size_t(100003)}) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const auto in = cohort::testing::random_values<int>(n, 41 + unsigned(n));
      cohort::distributed_buffer<int> x(group, uneven_split(n, members));
      cohort::distributed_buffer<long long> y(group, x.split());
      x.copy_from_host(in);
      std::vector<long long> squares(n), residues(n), wide(n);
      for (std::size_t i = 0; i < n; ++i) {
        squares[i] = (long long)in[i] * in[i];
        residues[i] = in[i] % 5;
        wide[i] = in[i];
      }

      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_inclusive_scan(group, x, y, plus, square_wide{});
      CHECK(first_difference(read_back(group, y), host_inclusive(squares, plus)) == n);
      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_exclusive_scan(group, std::as_const(x), y, 7, plus,
                                          [] __device__(int v) { return v % 5; });
      CHECK(first_difference(read_back(group, y), host_exclusive(residues, 7LL, plus)) == n);
      y.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_inclusive_scan(group, x, y, plus); // int to long long, no transform
      CHECK(first_difference(read_back(group, y), host_inclusive(wide, plus)) == n);
      CHECK(first_difference(read_back(group, x), in) == n);
    }
}

TEST_CASE("a scan of transform(i) over indices(n): offsets into an uneven buffer and a view") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cuda::std::plus<unsigned long long> plus;
  for (std::size_t members : group_sizes)
    for (std::size_t n :
         {std::size_t(0), std::size_t(2), std::size_t(7919), (std::size_t(1) << 20) + 3}) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const cohort::partition split = uneven_split(n, members);
      std::vector<unsigned long long> marks(n), values(n);
      for (std::size_t i = 0; i < n; ++i) {
        marks[i] = i % 7 == 3 ? 1 : 0;
        values[i] = i * i % 1000;
      }
      // The offsets of the marked indices, as a compaction computes them.
      cohort::distributed_buffer<unsigned long long> offsets(group, split);
      offsets.fill_bytes(cohort::testing::poison_byte);
      cohort::multi_device_exclusive_scan(group, cohort::indices(n), offsets, 0ull, plus,
                                          [] __device__(std::size_t i) { return i % 7 == 3; });
      CHECK(first_difference(read_back(group, offsets), host_exclusive(marks, 0ull, plus)) == n);

      cohort::testing::user_memory<unsigned long long> out(group, split);
      out.poison();
      cohort::multi_device_inclusive_scan(group, cohort::indices(n, split), out.view(), plus,
                                          [] __device__(std::size_t i) { return i * i % 1000; });
      CHECK(first_difference(out.to_host(), host_inclusive(values, plus)) == n);
    }
}

TEST_CASE("scans refuse an index range split otherwise than the output, and memory that partly "
          "overlaps the input") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const cuda::std::plus<int> plus;
  const auto index = [] __device__(std::size_t i) { return int(i); };
  cohort::distributed_buffer<int> x(group, 10);
  cohort::distributed_buffer<int> uneven(group, cohort::partition::weighted(10, {1.0, 3.0}));
  cohort::adaptive_balancer balancer(group);
  CHECK_THROWS_WITH_AS(
      cohort::multi_device_inclusive_scan(group, cohort::indices(10, balancer), x, plus, index),
      doctest::Contains("multi_device_inclusive_scan: argument 'input': is split by an "
                        "adaptive_balancer"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      cohort::multi_device_exclusive_scan(
          group, cohort::indices(10, cohort::partition::even(10, 2)), uneven, 0, plus, index),
      doctest::Contains("multi_device_exclusive_scan: argument 'input'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      cohort::multi_device_inclusive_scan(group, cohort::indices(9), x, plus, index),
      doctest::Contains("multi_device_inclusive_scan: argument 'output'"), std::invalid_argument);

  // Ten elements of each member's memory: input its first five, output five from its third.
  cohort::testing::user_memory<int> memory(group, cohort::partition::even(20, 2));
  std::vector<cuda::std::span<int>> first, shifted;
  for (const cuda::std::span<int>& s : memory.spans()) {
    first.push_back(s.subspan(0, 5));
    shifted.push_back(s.subspan(2, 5));
  }
  const cohort::distributed_view<int> in(group, first), out(group, shifted);
  memory.copy_from_host(std::vector<int>(20, 1));
  CHECK_THROWS_WITH_AS(cohort::multi_device_inclusive_scan(group, in, out, plus),
                       doctest::Contains("multi_device_inclusive_scan: argument 'output': shard 0 "
                                         "overlaps shard 0 of 'input'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::multi_device_exclusive_scan(group, out, in, 0, plus),
                       doctest::Contains("overlaps"), std::invalid_argument);
  // The same spans: in place, leaving the rest of the memory alone.
  cohort::multi_device_inclusive_scan(group, in, in, plus);
  const std::vector<int> expected = {1, 2, 3, 4, 5, 1, 1, 1, 1, 1, 6, 7, 8, 9, 10, 1, 1, 1, 1, 1};
  CHECK(memory.to_host() == expected);
}

// A scan's scratch (CUB's temporary storage: megabytes for 2^30 values) that the device cannot
// hand out is out of memory, as its allocation would report it, but named and before anything is
// enqueued. Before, it was a std::invalid_argument. The test holds the rest of GPU 0 ([serial]).
TEST_CASE("a scan whose scratch cannot fit is a cuda_error naming the call, device and bytes "
          "[serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  auto one = cohort::device_group::emulated(d, 1);
  cohort::distributed_buffer<long long> x(one, std::size_t(1) << 30); // 8 GiB
  // A scan of a few values first: loading CUB's kernels takes device memory too, and a kernel that
  // cannot load is another error than scratch that does not fit. Its group, buffer and scratch
  // are gone before the pool is trimmed: each held a 2 MiB page of the pool with room to spare,
  // where the scan's scratch (a megabyte or two) would fit.
  {
    auto warm = cohort::device_group::emulated(d, 1);
    cohort::distributed_buffer<long long> few(warm, 1000);
    few.fill_bytes(0);
    cohort::multi_device_inclusive_scan(warm, few, cuda::std::plus<long long>{});
    warm.synchronize();
  }
  cohort::scoped_device on(d);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess); // the warm-up's memory back in the pool
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, d.get()) == cudaSuccess);
  REQUIRE(cudaMemPoolTrimTo(pool, 0) == cudaSuccess); // nothing spare left in the pool
  std::vector<void*> held;
  // Down to small chunks: CUB's scratch for one member is a few megabytes, and cudaMalloc leaves
  // up to two of them free when it refuses a megabyte.
  for (std::size_t chunk = std::size_t(1) << 36; chunk >= (std::size_t(1) << 12);) {
    void* p = nullptr;
    if (cudaMalloc(&p, chunk) == cudaSuccess) {
      held.push_back(p);
    } else {
      (void)cudaGetLastError();
      chunk /= 2;
    }
  }
  std::string what;
  cudaError_t status = cudaSuccess;
  int device = -2;
  try {
    cohort::multi_device_inclusive_scan(one, x, cuda::std::plus<long long>{});
  } catch (const cohort::cuda_error& e) {
    what = e.what();
    status = e.status();
    device = e.device();
  }
  for (void* p : held)
    (void)cudaFree(p);
  CAPTURE(what);
  CHECK(status == cudaErrorMemoryAllocation);
  CHECK(device == 0);
  CHECK(what.find("multi_device_inclusive_scan") != std::string::npos);
  CHECK(what.find("bytes") != std::string::npos);
  cohort::multi_device_inclusive_scan(one, x, cuda::std::plus<long long>{}); // fits again
  one.synchronize();
}

namespace {

// A group of one runs one CUB scan of its shard; these check it against the host's sequential
// scans for several element types, in place and into another buffer, inclusive and exclusive.
const std::size_t one_member_sizes[] = {0, 1, 2, 3, 7919, 1000003, (std::size_t(1) << 20) + 3};

// Values whose every partial sum is exact in T: integers from random_values (|v| <= 1000), and for
// floating types small integers (partial sums of 2^20 of them stay below 2^24).
template <class T>
std::vector<T> exact_values(std::size_t n, unsigned seed) {
  const auto ints = cohort::testing::random_values<int>(n, seed);
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::is_floating_point_v<T> ? T(ints[i] % 8) : T(ints[i]);
  return v;
}

template <class T>
void check_one_member_scans(unsigned seed) {
  const auto one = cohort::testing::group_of(1);
  const cuda::std::plus<T> plus;
  for (std::size_t n : one_member_sizes) {
    CAPTURE(n);
    const auto in = exact_values<T>(n, seed + unsigned(n));
    cohort::distributed_buffer<T> x(one, n), y(one, n);
    x.copy_from_host(in);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_inclusive_scan(one, x, y, cuda::std::plus<>{});
    CHECK(first_difference(read_back(one, y), host_inclusive(in, plus)) == n);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_exclusive_scan(one, x, y, T(3), cuda::std::plus<>{});
    CHECK(first_difference(read_back(one, y), host_exclusive(in, T(3), plus)) == n);
    CHECK(first_difference(read_back(one, x), in) == n); // the input is left alone
    cohort::multi_device_inclusive_scan(one, x, cuda::std::plus<>{});
    CHECK(first_difference(read_back(one, x), host_inclusive(in, plus)) == n);
    x.copy_from_host(in);
    cohort::multi_device_exclusive_scan(one, x, T(5), cuda::std::plus<>{});
    CHECK(first_difference(read_back(one, x), host_exclusive(in, T(5), plus)) == n);
  }
}

} // namespace

TEST_CASE("a group of one scans as one CUB scan: several types, in place and into another buffer") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_one_member_scans<int>(101);
  check_one_member_scans<unsigned>(102);
  check_one_member_scans<long long>(103);
  check_one_member_scans<unsigned long long>(104);
  check_one_member_scans<float>(105);
  check_one_member_scans<double>(106);
}

TEST_CASE("a group of one scans half and bfloat16 into float, through a transform and from f(i)") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const auto one = cohort::testing::group_of(1);
  const cuda::std::plus<float> plus;
  for (std::size_t n : one_member_sizes) {
    CAPTURE(n);
    const auto values = exact_values<float>(n, 111 + unsigned(n));
    std::vector<__half> h(n);
    std::vector<__nv_bfloat16> b(n);
    std::vector<float> doubled(n), of_index(n);
    for (std::size_t i = 0; i < n; ++i) {
      h[i] = __float2half(values[i]);
      b[i] = __float2bfloat16(values[i]);
      doubled[i] = 2 * values[i];
      of_index[i] = float(i % 5);
    }
    cohort::distributed_buffer<__half> xh(one, n);
    cohort::distributed_buffer<__nv_bfloat16> xb(one, n);
    cohort::distributed_buffer<float> y(one, n);
    xh.copy_from_host(h);
    xb.copy_from_host(b);
    // Numbers convert to the output's type, each element once.
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_inclusive_scan(one, xh, y, cuda::std::plus<>{});
    CHECK(first_difference(read_back(one, y), host_inclusive(values, plus)) == n);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_exclusive_scan(one, xb, y, 1.0f, cuda::std::plus<>{});
    CHECK(first_difference(read_back(one, y), host_exclusive(values, 1.0f, plus)) == n);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_inclusive_scan(one, xh, y, cuda::std::plus<>{},
                                        [] __device__(__half v) { return 2 * __half2float(v); });
    CHECK(first_difference(read_back(one, y), host_inclusive(doubled, plus)) == n);
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_exclusive_scan(one, cohort::indices(n), y, 0.0f, cuda::std::plus<>{},
                                        [] __device__(std::size_t i) { return float(i % 5); });
    CHECK(first_difference(read_back(one, y), host_exclusive(of_index, 0.0f, plus)) == n);
  }
}

TEST_CASE("a group of one's scan captured into a graph replays in order with direct calls") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto one = cohort::testing::group_of(1);
  const cuda::std::plus<long long> plus;
  for (std::size_t n : {std::size_t(1000), (std::size_t(1) << 20) + 3}) {
    CAPTURE(n);
    std::vector<long long> expected(n, 1);
    cohort::distributed_buffer<long long> x(one, n);
    x.copy_from_host(expected);
    // Captured, the scratch is the graph's own; direct calls between replays use the group's.
    auto graph = cohort::group_graph::capture(
        one, [&] { cohort::multi_device_inclusive_scan(one, x, plus); });
    graph.launch();
    cohort::multi_device_exclusive_scan(one, x, 2, plus);
    graph.launch();
    expected = host_inclusive(host_exclusive(host_inclusive(expected, plus), 2LL, plus), plus);
    CHECK(first_difference(read_back(one, x), expected) == n);
  }
}

// Once warm, a loop of scans allocates no device memory and makes no event: each member's scratch
// and events are the group's, kept between calls.
TEST_CASE("scans in a loop allocate nothing and make no events once warm") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 3u}) {
    CAPTURE(members);
    const auto group = cohort::testing::group_of(members);
    const std::size_t n = (std::size_t(1) << 20) + 3;
    std::vector<long long> in(n, 1);
    cohort::distributed_buffer<long long> x(group, n), y(group, x.split());
    cohort::distributed_buffer<unsigned long long> offsets(group, n);
    x.copy_from_host(in);
    const cuda::std::plus<long long> plus;
    cohort::testing::check_steady_state(group, [&] {
      cohort::multi_device_inclusive_scan(group, x, y, plus);
      cohort::multi_device_exclusive_scan(group, x, y, 0, plus);
      cohort::multi_device_exclusive_scan(group, cohort::indices(n), offsets, 0ull,
                                          cuda::std::plus<>{},
                                          [] __device__(std::size_t) { return 1ull; });
      cohort::multi_device_inclusive_scan(group, y, plus); // in place
    });
    // The last call: the in-place inclusive scan of the exclusive scan of ones.
    std::vector<long long> expected(n);
    for (std::size_t i = 0; i < n; ++i)
      expected[i] = static_cast<long long>(i) * static_cast<long long>(i + 1) / 2;
    CHECK(first_difference(read_back(group, y), expected) == n);
    std::vector<unsigned long long> counted(n);
    for (std::size_t i = 0; i < n; ++i)
      counted[i] = i;
    CHECK(first_difference(read_back(group, offsets), counted) == n);
  }
}
