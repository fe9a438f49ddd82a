// Multi-device reductions against host references (in double), on groups of 1 to 5, for sizes 0,
// 1, primes and fewer items than members; init counts once; user types and operators; order kept
// for non-commutative operators; buffers, views of the user's memory and index ranges (split
// evenly, by a partition or by a balancer); the device-result form captured into a graph and
// replayed; the pending form refused under capture. A group of one (which hands sums and integer
// minima and maxima of more than 16 MiB to CUB, and of less to its in-order kernel, both sides of
// that line tested): integer types bit for bit, float, double, half and bfloat16 against
// double references, float minima and maxima with the in-order fold's signed zero; and a loop of
// reductions that allocates nothing and makes no event once warm.
#include "held_stream.cuh"
#include "kernels.cuh"
#include "steady_state.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

const std::size_t sizes[] = {0, 1, 2, 3, 5, 7919, 1000003};

// A user's statistics type and its associative, commutative combine.
struct stats {
  float min, max;
  double sum;
  unsigned long long count;
};
struct merge_stats {
  __device__ stats operator()(const stats& a, const stats& b) const {
    return {fminf(a.min, b.min), fmaxf(a.max, b.max), a.sum + b.sum, a.count + b.count};
  }
};
struct to_stats {
  __device__ stats operator()(float v) const { return {v, v, v, 1}; }
};

struct indexed {
  float value;
  long long index;
};
// argmax; ties go to the lower index, so the operator is associative and commutative.
struct arg_max {
  __device__ indexed operator()(const indexed& a, const indexed& b) const {
    if (a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
};

// An in-order fold that notices any reordering: the first and last index seen, and the product of
// 2x2 matrices [[v + 2, 1], [1, 0]] modulo a prime (such matrices do not commute, so a product
// taken in any other order differs). Associative, not commutative.
constexpr unsigned long long prime = 1000000007ull;
struct ordered {
  long long first, last;
  unsigned long long m[4]; // row-major
};
__host__ __device__ inline ordered lift(long long v) {
  // Below the prime, so that every product stays a product modulo the prime (no wrap).
  const unsigned long long a =
      static_cast<unsigned long long>((v % 1000003 + 1000003) % 1000003 + 2);
  return {v, v, {a, 1, 1, 0}};
}
__host__ __device__ inline ordered in_order(const ordered& a, const ordered& b) {
  ordered r{a.first, b.last, {}};
  r.m[0] = (a.m[0] * b.m[0] % prime + a.m[1] * b.m[2] % prime) % prime;
  r.m[1] = (a.m[0] * b.m[1] % prime + a.m[1] * b.m[3] % prime) % prime;
  r.m[2] = (a.m[2] * b.m[0] % prime + a.m[3] * b.m[2] % prime) % prime;
  r.m[3] = (a.m[2] * b.m[1] % prime + a.m[3] * b.m[3] % prime) % prime;
  return r;
}
struct fold_in_order {
  __device__ ordered operator()(const ordered& a, const ordered& b) const { return in_order(a, b); }
};
struct lift_index {
  __device__ ordered operator()(std::size_t i) const { return lift(static_cast<long long>(i)); }
};
struct lift_long {
  __device__ ordered operator()(long long v) const { return lift(v); }
};
struct index_as_int {
  __device__ int operator()(std::size_t i) const { return static_cast<int>(i); }
};
struct same_int {
  __device__ int operator()(int v) const { return v; }
};
struct lift_half {
  __device__ ordered operator()(__half v) const {
    return lift(static_cast<long long>(__half2float(v)));
  }
};
struct lift_bfloat16 {
  __device__ ordered operator()(__nv_bfloat16 v) const {
    return lift(static_cast<long long>(__bfloat162float(v)));
  }
};

const ordered order_init = {-7, -7, {3, 1, 1, 0}};

// The host's op(init, lift(v[0]), lift(v[1]), ...).
ordered fold_on_host(const std::vector<long long>& values) {
  ordered r = order_init;
  for (long long v : values)
    r = in_order(r, lift(v));
  return r;
}

void check_same(const ordered& got, const ordered& expected) {
  CHECK(got.first == expected.first);
  CHECK(got.last == expected.last);
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    CHECK(got.m[k] == expected.m[k]);
  }
}

std::vector<long long> index_values(std::size_t n) {
  std::vector<long long> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<long long>(i);
  return v;
}

const std::size_t order_sizes[] = {0, 1, 2, 3, 1009, (std::size_t{1} << 20) + 3};

// body(group, n) for every group size in `members` and every n in `sizes` (a group of real GPUs
// where enough are visible, else emulated).
template <std::size_t N, class Body>
void for_groups_and_sizes(std::initializer_list<std::size_t> members, const std::size_t (&sizes)[N],
                          Body body) {
  for (std::size_t m : members)
    for (std::size_t n : sizes) {
      CAPTURE(m);
      CAPTURE(n);
      const cohort::device_group group = cohort::testing::group_of(m);
      body(group, n);
    }
}

} // namespace

TEST_CASE("multi_device_reduce sums ints exactly and counts init once") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes(
      {1u, 2u, 3u, 4u}, sizes, [&](const cohort::device_group& group, std::size_t n) {
        const auto in = cohort::testing::random_values<int>(n, 3 + n);
        cohort::distributed_buffer<int> x(group, n);
        x.copy_from_host(in);
        auto sum = cohort::multi_device_reduce(group, x, 17LL, cuda::std::plus<long long>{});
        long long expected = 17;
        for (int v : in)
          expected += v;
        CHECK(sum.wait() == expected);
      });
}

TEST_CASE("float and double sums agree with a double host reference") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto in = cohort::testing::random_values<double>(n, 9);
    std::vector<float> in_f(in.begin(), in.end());
    cohort::distributed_buffer<double> xd(group, n);
    cohort::distributed_buffer<float> xf(group, n);
    xd.copy_from_host(in);
    xf.copy_from_host(in_f);
    auto sd = cohort::multi_device_reduce(group, xd, 0.0, cuda::std::plus<>{});
    auto sf = cohort::multi_device_reduce(group, xf, 0.0f, cuda::std::plus<>{});
    double expected = 0, expected_f = 0, magnitude = 0;
    for (std::size_t i = 0; i < n; ++i) {
      expected += in[i];
      expected_f += in_f[i];
      magnitude += std::fabs(in[i]);
    }
    CHECK(std::fabs(sd.wait() - expected) <= 1e-12 * (magnitude + 1));
    CHECK(std::fabs(sf.wait() - expected_f) <= 1e-5 * (magnitude + 1));
  }
}

TEST_CASE("half and bfloat16 reduce in float through a transform") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::size_t n = 100003;
  const auto f = cohort::testing::random_values<float>(n, 4);
  std::vector<__half> h(n);
  std::vector<__nv_bfloat16> b(n);
  double expected_h = 0, expected_b = 0, magnitude = 0;
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = __float2half(f[i]);
    b[i] = __float2bfloat16(f[i]);
    expected_h += __half2float(h[i]);
    expected_b += __bfloat162float(b[i]);
    magnitude += std::fabs(f[i]);
  }
  cohort::distributed_buffer<__half> xh(group, n);
  cohort::distributed_buffer<__nv_bfloat16> xb(group, n);
  xh.copy_from_host(h);
  xb.copy_from_host(b);
  auto sh = cohort::multi_device_transform_reduce(
      group, xh, 0.0f, cuda::std::plus<>{}, [] __device__(__half v) { return __half2float(v); });
  auto sb = cohort::multi_device_transform_reduce(
      group, xb, 0.0f, cuda::std::plus<>{},
      [] __device__(__nv_bfloat16 v) { return __bfloat162float(v); });
  CHECK(std::fabs(sh.wait() - expected_h) <= 1e-5 * magnitude);
  CHECK(std::fabs(sb.wait() - expected_b) <= 1e-5 * magnitude);
  // And max of half values, in half.
  auto mh = cohort::multi_device_reduce(group, xh, __float2half(-60000.0f), cuda::maximum<>{});
  float expected_max = -60000.0f;
  for (auto v : h)
    expected_max = std::max(expected_max, __half2float(v));
  CHECK(__half2float(mh.wait()) == expected_max);
}

// cohort's operators on half and fp8 elements, with no transform: a float init reduces in float,
// each element converted through CUDA's intrinsics (what PyTorch's flags need: tests/compile).
TEST_CASE("half and fp8 buffers reduce with cohort's operators, in float or in their own type") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes({1u, 3u}, sizes, [&](const cohort::device_group& group, std::size_t n) {
    // Integers in [-8, 8]: every partial sum is exact in float (below 2^24), in any order.
    const auto ints = cohort::testing::random_values<int>(n, 21 + static_cast<unsigned>(n));
    std::vector<__half> h(n);
    std::vector<__nv_fp8_e4m3> e(n);
    double expected = 0;
    float largest = -448.0f; // e4m3's lowest
    for (std::size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(ints[i] % 9);
      h[i] = __float2half(v);
      e[i] = __nv_fp8_e4m3(v / 8);
      expected += v;
      largest = std::max(largest, v / 8);
    }
    cohort::distributed_buffer<__half> xh(group, n);
    cohort::distributed_buffer<__nv_fp8_e4m3> xe(group, n);
    xh.copy_from_host(h);
    xe.copy_from_host(e);
    auto half_sum = cohort::multi_device_reduce(group, xh, 0.0f, cohort::sum);
    auto fp8_sum = cohort::multi_device_reduce(group, xe, 0.0, cohort::sum);
    auto fp8_max = cohort::multi_device_reduce(group, xe, __nv_fp8_e4m3(-448.0f), cohort::max);
    CHECK(static_cast<double>(half_sum.wait()) == expected);
    CHECK(fp8_sum.wait() == expected / 8);
    CHECK(static_cast<float>(fp8_max.wait()) == largest);
  });
}

TEST_CASE("a user-defined statistics type reduces over every member") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes({2u, 3u, 4u}, sizes, [&](const cohort::device_group& group, std::size_t n) {
    const auto in = cohort::testing::random_values<float>(n, 77);
    cohort::distributed_buffer<float> x(group, n);
    x.copy_from_host(in);
    const stats init{std::numeric_limits<float>::infinity(),
                     -std::numeric_limits<float>::infinity(), 0.0, 0};
    auto r =
        cohort::multi_device_transform_reduce(group, x, init, merge_stats{}, to_stats{}).wait();
    stats e = init;
    for (float v : in)
      e = {std::min(e.min, v), std::max(e.max, v), e.sum + v, e.count + 1};
    CHECK(r.count == n);
    CHECK(r.min == e.min);
    CHECK(r.max == e.max);
    CHECK(std::fabs(r.sum - e.sum) <= 1e-9 * (n + 1));
  });
}

TEST_CASE("argmax over an index range finds the first largest value") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(4);
  for (std::size_t n : {1ul, 3ul, 7919ul, 1000003ul}) {
    CAPTURE(n);
    auto in = cohort::testing::random_values<float>(n, 5);
    if (n > 10) in[n / 3] = in[2 * n / 3] = 2.0f; // a tie: the lower index wins
    cohort::stream s(cohort::device_ref{0});
    cohort::device_buffer<float> values(n, s);
    values.copy_from_host(in);
    s.synchronize();
    group.enable_peer_access();
    const float* v = values.data();
    auto r = cohort::multi_device_transform_reduce(
                 group, cohort::indices(n), indexed{-1.0f, -1}, arg_max{},
                 [=] __device__(std::size_t i) {
                   return indexed{v[i], static_cast<long long>(i)};
                 })
                 .wait();
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (in[i] > in[best]) best = i;
    CHECK(r.index == static_cast<long long>(best));
    CHECK(r.value == in[best]);
  }
}

TEST_CASE("reductions keep order for an associative, non-commutative operator") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes(
      {1u, 2u, 3u, 5u}, order_sizes, [&](const cohort::device_group& group, std::size_t n) {
        const ordered expected = fold_on_host(index_values(n));
        // The index form: the issue saw last = 767 instead of 1008 for n = 1009 on one member.
        check_same(cohort::multi_device_transform_reduce(group, cohort::indices(n), order_init,
                                                         fold_in_order{}, lift_index{})
                       .wait(),
                   expected);
        // The same with an uneven split, so that the members' ranges differ in size.
        if (group.size() > 1 && n > group.size()) {
          std::vector<double> weights(group.size(), 1.0);
          weights.back() = 5.0;
          check_same(cohort::multi_device_transform_reduce(
                         group, cohort::indices(n, cohort::partition::weighted(n, weights)),
                         order_init, fold_in_order{}, lift_index{})
                         .wait(),
                     expected);
        }
        // The element form over a buffer of already lifted values.
        std::vector<ordered> lifted(n);
        for (std::size_t i = 0; i < n; ++i)
          lifted[i] = lift(static_cast<long long>(i));
        cohort::distributed_buffer<ordered> x(group, n);
        x.copy_from_host(lifted);
        check_same(cohort::multi_device_reduce(group, x, order_init, fold_in_order{}).wait(),
                   expected);
      });
}

TEST_CASE("half and bfloat16 buffers reduce in order through a transform") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes(
      {1u, 3u}, order_sizes, [&](const cohort::device_group& group, std::size_t n) {
        // Whole numbers that each format holds exactly, in an order a reordering would change.
        std::vector<long long> in_h(n), in_b(n);
        std::vector<__half> h(n);
        std::vector<__nv_bfloat16> b(n);
        for (std::size_t i = 0; i < n; ++i) {
          in_h[i] = static_cast<long long>((i * 37) % 2048);
          in_b[i] = static_cast<long long>((i * 37) % 256);
          h[i] = __float2half(static_cast<float>(in_h[i]));
          b[i] = __float2bfloat16(static_cast<float>(in_b[i]));
        }
        cohort::distributed_buffer<__half> xh(group, n);
        cohort::distributed_buffer<__nv_bfloat16> xb(group, n);
        xh.copy_from_host(h);
        xb.copy_from_host(b);
        check_same(cohort::multi_device_transform_reduce(group, xh, order_init, fold_in_order{},
                                                         lift_half{})
                       .wait(),
                   fold_on_host(in_h));
        check_same(cohort::multi_device_transform_reduce(group, xb, order_init, fold_in_order{},
                                                         lift_bfloat16{})
                       .wait(),
                   fold_on_host(in_b));
      });
}

TEST_CASE("a reduction returns before the GPU is done, and pending::ready says when it is") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::size_t n = 1 << 20;
  cohort::distributed_buffer<int> x(group, n);
  x.fill_bytes(0);
  // Loads the reduction's kernels first: loading a kernel can wait for the device's running ones.
  CHECK(cohort::multi_device_reduce(group, x, 5, cuda::std::plus<>{}).wait() == 5);
  {
    auto dropped = cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{});
  } // destroyed without wait: it waits for itself

  // Member 1 is held busy until the test lets it go, and then writes 3 to its shard: a reduction
  // that waited for the GPU before returning finds the hold timed out (it is not busy any more),
  // and one that read the shard too early sums zeros. State, not time: no bound on how fast the
  // call returns, which a loaded machine would break.
  const cohort::shard<int> late = x.shard(1);
  cohort::testing::launch_write_after_delay(late.stream, late.data.data(), late.data.size(), 0,
                                            0); // loads the writer before the hold
  cohort::testing::held_stream member_1(late.stream);
  cohort::testing::launch_write_after_delay(late.stream, late.data.data(), late.data.size(), 3, 0);
  auto sum = cohort::multi_device_reduce(group, x, 5, cuda::std::plus<>{});
  CHECK(member_1.busy()); // the call returned while member 1 was still held
  CHECK_FALSE(sum.ready());
  member_1.release();
  CHECK(sum.wait() == 5 + 3 * static_cast<int>(late.data.size()));
  CHECK_FALSE(member_1.timed_out());
  CHECK(sum.ready());
}

TEST_CASE("a bad buffer is reported as the error of the reduction the user called") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  auto three = cohort::testing::group_of(3);
  cohort::distributed_buffer<int> other(three, 10);
  CHECK_THROWS_WITH_AS(cohort::multi_device_reduce(group, other, 0, cuda::std::plus<>{}),
                       doctest::Contains("cohort::multi_device_reduce: argument 'input'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      cohort::multi_device_transform_reduce(group, other, 0, cuda::std::plus<>{}, same_int{}),
      doctest::Contains("cohort::multi_device_transform_reduce: argument 'input'"),
      std::invalid_argument);
  cohort::device_result<int> result(group);
  CHECK_THROWS_WITH_AS(cohort::multi_device_reduce(group, other, 0, cuda::std::plus<>{}, result),
                       doctest::Contains("cohort::multi_device_reduce: argument 'input'"),
                       std::invalid_argument);
  cohort::device_result<int> of_three(three);
  cohort::distributed_buffer<int> mine(group, 10);
  mine.fill_bytes(0);
  CHECK_THROWS_WITH_AS(cohort::multi_device_reduce(group, mine, 0, cuda::std::plus<>{}, of_three),
                       doctest::Contains("cohort::multi_device_reduce: argument 'result'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::multi_device_transform_reduce(
                           group, cohort::indices(10, cohort::partition::even(10, 3)), 0,
                           cuda::std::plus<>{}, index_as_int{}),
                       doctest::Contains("cohort::multi_device_transform_reduce: argument 'input'"),
                       std::invalid_argument);
}

TEST_CASE("the device-result form keeps order and its value on member 0") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes(
      {1u, 3u}, order_sizes, [&](const cohort::device_group& group, std::size_t n) {
        cohort::device_result<ordered> result(group);
        CHECK(result.device() == group.device(0));
        cohort::multi_device_transform_reduce(group, cohort::indices(n), order_init,
                                              fold_in_order{}, lift_index{}, result);
        check_same(result.get(), fold_on_host(index_values(n)));
        // Again into the same result: back-to-back calls are ordered on the group's streams.
        cohort::multi_device_transform_reduce(group, cohort::indices(n / 2), order_init,
                                              fold_in_order{}, lift_index{}, result);
        check_same(result.get(), fold_on_host(index_values(n / 2)));
      });
}

namespace {

// Captures, on `origin`, the group's fork, what `enqueue` enqueues and the join, in global mode.
template <class F>
cudaGraph_t capture(cohort::device_group& group, cohort::stream_ref origin, F enqueue) {
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(origin.native_handle(), cudaStreamCaptureModeGlobal) ==
          cudaSuccess);
  group.fork(origin);
  enqueue();
  group.join(origin);
  REQUIRE(cudaStreamEndCapture(origin.native_handle(), &graph) == cudaSuccess);
  return graph;
}

// The number of nodes of a captured graph.
std::size_t node_count(cudaGraph_t graph) {
  std::size_t count = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess);
  return count;
}

} // namespace

TEST_CASE("a captured device-result reduction replays 100 times over changing input") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {2u, 3u}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    // A graph captures only direct copies between two GPUs (each member's partial to member 0).
    REQUIRE(group.enable_peer_access());
    const std::size_t n = 100003;
    cohort::distributed_buffer<long long> x(group, n);
    cohort::device_result<ordered> result(group);
    cohort::stream origin(group.device(0));
    const lift_long lift_value;
    // Loads the kernels, and makes the group's cached fork event, outside the capture.
    x.fill_bytes(0);
    group.fork(origin);
    cohort::multi_device_transform_reduce(group, x, order_init, fold_in_order{}, lift_value,
                                          result);
    group.join(origin);
    origin.synchronize();

    cudaGraph_t graph = capture(group, origin, [&] {
      cohort::multi_device_transform_reduce(group, x, order_init, fold_in_order{}, lift_value,
                                            result);
    });
    cudaGraphExec_t replay = nullptr;
    REQUIRE(cudaGraphInstantiate(&replay, graph, 0) == cudaSuccess);

    std::size_t wrong = 0;
    for (int r = 0; r < 100; ++r) {
      const auto values = cohort::testing::random_values<long long>(n, 1000 + r);
      x.copy_from_host(values);
      group.join(origin); // the replay reads what the copies wrote
      REQUIRE(cudaGraphLaunch(replay, origin.native_handle()) == cudaSuccess);
      origin.synchronize();
      const ordered got = result.get();
      const ordered expected = fold_on_host(values);
      bool same = got.first == expected.first && got.last == expected.last;
      for (int k = 0; k < 4; ++k)
        same = same && got.m[k] == expected.m[k];
      wrong += !same;
    }
    CHECK_MESSAGE(wrong == 0, wrong << " of 100 replays gave a wrong result");
    CHECK(cudaGraphExecDestroy(replay) == cudaSuccess);
    CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  }
}

TEST_CASE("the pending form refuses capture, naming the call, with nothing enqueued") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::stream origin(group.device(0));
  cohort::distributed_buffer<int> x(group, 1000);
  x.fill_bytes(0);
  group.fork(origin); // makes the group's cached fork event outside the capture
  group.join(origin);
  origin.synchronize();

  // What a capture of the fork and join alone holds.
  cudaGraph_t bare = capture(group, origin, [] {});
  const std::size_t bare_nodes = node_count(bare);
  CHECK(cudaGraphDestroy(bare) == cudaSuccess);

  std::string what;
  cudaGraph_t graph = capture(group, origin, [&] {
    try {
      auto sum = cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{});
      FAIL_CHECK("a pending reduction was captured"); // no throw: the capture must still end
    } catch (const std::logic_error& e) {
      what = e.what();
    }
    CHECK_THROWS_AS(cohort::multi_device_transform_reduce(group, cohort::indices(10), 0,
                                                          cuda::std::plus<>{}, index_as_int{}),
                    std::logic_error);
  });
  CHECK(what.find("cohort::multi_device_reduce:") != std::string::npos);
  CHECK(what.find("cohort::device_result<T>&") != std::string::npos);
  CHECK(node_count(graph) == bare_nodes);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  // Nothing broke: the same call outside a capture works.
  CHECK(cohort::multi_device_reduce(group, x, 4, cuda::std::plus<>{}).wait() == 4);
}

namespace {

// Makes a pool of at most `max_bytes` the current pool of `device` for a scope (cudaMallocAsync,
// and so device_buffer, allocate from the current pool), then puts the default pool back.
class limited_pool {
 public:
  limited_pool(cohort::device_ref device, std::size_t max_bytes)
      : device_(device) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device.get();
    props.maxSize = max_bytes;
    REQUIRE(cudaMemPoolCreate(&pool_, &props) == cudaSuccess);
    REQUIRE(cudaDeviceSetMemPool(device.get(), pool_) == cudaSuccess);
  }
  ~limited_pool() {
    cudaMemPool_t standard = nullptr;
    if (cudaDeviceGetDefaultMemPool(&standard, device_.get()) == cudaSuccess)
      (void)cudaDeviceSetMemPool(device_.get(), standard);
    (void)cudaDeviceSynchronize();
    (void)cudaMemPoolDestroy(pool_);
  }
  limited_pool(const limited_pool&) = delete;
  limited_pool& operator=(const limited_pool&) = delete;

 private:
  cohort::device_ref device_;
  cudaMemPool_t pool_ = nullptr;
};

} // namespace

TEST_CASE("a reduction that runs out of memory leaves nothing queued that writes to freed memory") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  auto group = cohort::device_group::emulated(d, 3);
  cohort::distributed_buffer<int> x(group, 3000); // from the default pool
  x.fill_bytes(1);
  cohort::device_buffer<int> dummy(1, group.stream(1));
  // Loads the kernels first (a kernel's loading can wait for the device's running ones), then
  // gives back the scratch the group keeps, so that the calls below allocate theirs.
  (void)cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{}).wait();
  group.release_scratch();
  cohort::testing::launch_write_after_delay(group.stream(1), dummy.data(), 1, 0, 1);
  group.synchronize();

  constexpr std::size_t pool_bytes = std::size_t{4} << 20, small = 256;
  const limited_pool pool(d, pool_bytes);
  const cudaStream_t root = group.stream(0).native_handle();
  // Fill the pool: one large block, then small ones until nothing more fits.
  void* large = nullptr;
  REQUIRE(cudaMallocAsync(&large, pool_bytes / 2, root) == cudaSuccess);
  std::vector<void*> smalls;
  for (void* p = nullptr; smalls.size() < 65536; smalls.push_back(p))
    if (cudaMallocAsync(&p, small, root) != cudaSuccess) {
      (void)cudaGetLastError();
      break;
    }
  REQUIRE(cudaStreamSynchronize(root) == cudaSuccess);
  // Free one small block at a time until the reduction fits: just before it does, it fails on
  // its last allocation, member 2's, after member 1's part was reached.
  int failures = 0;
  bool fitted = false;
  std::size_t damaged = 0;
  while (!fitted && !smalls.empty()) {
    REQUIRE(cudaFreeAsync(smalls.back(), root) == cudaSuccess);
    smalls.pop_back();
    group.synchronize();
    // Member 1's work runs 20 ms late: whatever the failed call left queued there runs after the
    // call has returned and freed its memory.
    cohort::testing::launch_write_after_delay(group.stream(1), dummy.data(), 1, 0, 20'000'000ull);
    try {
      (void)cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{}).wait();
      fitted = true;
    } catch (const cohort::cuda_error& e) {
      CHECK(e.status() == cudaErrorMemoryAllocation);
      ++failures;
      // New allocations on member 0's stream get the memory the failed call freed there; poison
      // them and see whether a late write from the failed call lands in them.
      std::vector<void*> probes;
      for (void* p = nullptr; probes.size() < 16; probes.push_back(p)) {
        if (cudaMallocAsync(&p, 3 * 8, root) != cudaSuccess) {
          (void)cudaGetLastError();
          break;
        }
        REQUIRE(cudaMemsetAsync(p, cohort::testing::poison_byte, 3 * 8, root) == cudaSuccess);
      }
      group.synchronize();
      for (void* p : probes) {
        unsigned char bytes[3 * 8];
        REQUIRE(cudaMemcpy(bytes, p, sizeof bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (unsigned char b : bytes)
          damaged += b != cohort::testing::poison_byte;
        REQUIRE(cudaFreeAsync(p, root) == cudaSuccess);
      }
    }
    group.synchronize();
  }
  group.release_scratch(); // what the group keeps came from the limited pool, which goes first
  for (void* p : smalls)
    REQUIRE(cudaFreeAsync(p, root) == cudaSuccess);
  REQUIRE(cudaFreeAsync(large, root) == cudaSuccess);
  group.synchronize();
  REQUIRE_MESSAGE(failures > 0, "the pool never ran out: nothing was tested");
  CHECK(fitted);
  CHECK_MESSAGE(damaged == 0, damaged << " byte(s) of memory freed by a failed reduction were "
                                         "written after it returned");
}

// A device-result reduction that fails at member 2 (a failure injected where a launch could fail) after
// member 1 queued its part behind 200 ms of other work: the next reduction into the same result,
// over a buffer in which member 1 has no items, relies on member 1's slot being cleared. Before
// the failure path ordered member 0's stream after every member's, member 1's late copy landed
// after that clearing: 2000 + 1000 (stale) + 2000.
TEST_CASE("a device-result reduction that fails part-way leaves nothing queued that changes the "
          "next one") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 3);
  cohort::distributed_buffer<int> ones(group, 3000);
  cohort::distributed_buffer<int> twos(group, cohort::partition::from_counts({1000, 0, 1000}));
  ones.copy_from_host(std::vector<int>(3000, 1));
  twos.copy_from_host(std::vector<int>(2000, 2));
  cohort::device_result<int> result(group);
  cohort::multi_device_reduce(group, ones, 0, cuda::std::plus<>{}, result); // loads kernels
  CHECK(result.get() == 3000);
  group.synchronize();

  cohort::device_buffer<int> dummy(1, group.stream(1));
  cohort::testing::launch_write_after_delay(group.stream(1), dummy.data(), 1, 0, 200'000'000ull);
  {
    struct inject {
      inject() { cohort::detail::reduce_fails_at_member_for_tests = 2; }
      ~inject() { cohort::detail::reduce_fails_at_member_for_tests = ~std::size_t{0}; }
    } failing_at_member_2;
    try {
      cohort::multi_device_reduce(group, ones, 0, cuda::std::plus<>{}, result);
      FAIL("the injected failure did not throw");
    } catch (const cohort::cuda_error& e) {
      CHECK(std::string(e.what()).find("a failure tests inject") != std::string::npos);
    }
  }
  cohort::multi_device_reduce(group, twos, 0, cuda::std::plus<>{}, result);
  CHECK(result.get() == 4000);
  group.synchronize();
}

// The device-result forms take T from the result: an int init into a device_result<double> did
// not compile before (T was deduced from both).
TEST_CASE("a device-result reduction takes its type from the result, init converted") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1, 3}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    const std::size_t n = 100'003;
    const auto in = cohort::testing::random_values<float>(n, 29);
    cohort::distributed_buffer<float> x(group, n);
    x.copy_from_host(in);
    double expected = 1;
    for (float v : in)
      expected += v;
    cohort::device_result<double> sum(group);
    cohort::multi_device_reduce(group, x, 1, cuda::std::plus<>{}, sum);
    CHECK(sum.get() == doctest::Approx(expected).epsilon(1e-9));
    cohort::multi_device_transform_reduce(
        group, x, 1, cuda::std::plus<>{}, [] __device__(float v) { return double(v) * 2; }, sum);
    CHECK(sum.get() == doctest::Approx(2 * expected - 1).epsilon(1e-9));
    cohort::device_result<long long> count(group);
    cohort::multi_device_transform_reduce(
        group, cohort::indices(n), 0, cuda::std::plus<>{},
        [] __device__(std::size_t i) { return i % 3; }, count);
    long long residues = 0;
    for (std::size_t i = 0; i < n; ++i)
      residues += static_cast<long long>(i % 3);
    CHECK(count.get() == residues);
  }
}

TEST_CASE("a device-result reduction whose members are not all in one capture is refused before it "
          "enqueues") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::distributed_buffer<int> x(group, 1000);
  x.fill_bytes(0);
  cohort::device_result<int> result(group);
  // Only member 1's stream captured: member 0's part used to run now, and member 1's only in the
  // graph, each waiting for the other's events.
  cohort::testing::lone_capture capture(group, 1);
  const std::string message = cohort::testing::logic_error_message(
      [&] { cohort::multi_device_reduce(group, x, 7, cuda::std::plus<>{}, result); });
  const std::size_t nodes = capture.end();
  CAPTURE(message);
  CHECK(message.find("multi_device_reduce: member 0") != std::string::npos);
  CHECK(message.find("Nothing was enqueued") != std::string::npos);
  CHECK(nodes == 0);
  cohort::multi_device_reduce(group, x, 7, cuda::std::plus<>{}, result); // still works
  CHECK(result.get() == 7);
}

// What the overloads take and refuse, checked by the compiler alone (no GPU needed).
namespace {

using float_buffer = cohort::distributed_buffer<float>;
static_assert(cohort::detail::algorithm_input<float_buffer>);
static_assert(cohort::detail::algorithm_input<const float_buffer>);
static_assert(cohort::detail::algorithm_input<cohort::distributed_view<float>>);
static_assert(cohort::detail::algorithm_input<cohort::distributed_view<const float>>);
static_assert(cohort::detail::algorithm_input<cohort::index_range>);
static_assert(!cohort::detail::algorithm_input<std::vector<float>>);
static_assert(!cohort::detail::algorithm_input<float*>);

// A pending value is made only by the reductions: no public constructor from a pinned slot.
static_assert(!std::is_constructible_v<cohort::pending<int>, int*, cohort::event,
                                       std::vector<cohort::device_buffer<unsigned char>>>);

// A device_result given where the transform goes selects no pending form (the transform is
// missing): no overload, rather than an error deep inside the kernels.
template <class Result>
concept result_taken_as_transform = requires(const cohort::device_group& g, const float_buffer& x,
                                             Result& r) {
  cohort::multi_device_transform_reduce(g, x, 0.0f, cuda::std::plus<>{}, r);
};
static_assert(!result_taken_as_transform<cohort::device_result<float>>);
template <class Result>
concept result_taken_as_operator = requires(const cohort::device_group& g, const float_buffer& x,
                                            Result& r) {
  cohort::multi_device_reduce(g, x, 0.0f, r);
};
static_assert(!result_taken_as_operator<cohort::device_result<float>>);

// The device-result form is the one picked for a trailing device_result, init converted to its T.
template <class Result>
concept reduces_into = requires(const cohort::device_group& g, const float_buffer& x, Result& r) {
  { cohort::multi_device_reduce(g, x, 0, cuda::std::plus<>{}, r) } -> std::same_as<void>;
  {
    cohort::multi_device_transform_reduce(g, cohort::indices(3), 0, cuda::std::plus<>{},
                                          index_as_int{}, r)
    } -> std::same_as<void>;
};
static_assert(reduces_into<cohort::device_result<double>>);

// device_result's enqueue is no part of its public surface.
template <class Result>
concept public_enqueue = requires(Result& r, const cohort::device_group& g,
                                  const cohort::index_range& in) {
  r.enqueue(g, in, 0, cuda::std::plus<>{}, index_as_int{}, "f");
};
static_assert(!public_enqueue<cohort::device_result<int>>);

// Device memory of `bytes` on `device` from cudaMalloc, as a user's own allocation, freed at the
// end of the scope.
class user_allocation {
 public:
  user_allocation(cohort::device_ref device, std::size_t bytes) {
    cohort::scoped_device on(device);
    REQUIRE(cudaMalloc(&p_, bytes == 0 ? 1 : bytes) == cudaSuccess);
  }
  ~user_allocation() { (void)cudaFree(p_); }
  user_allocation(const user_allocation&) = delete;
  user_allocation& operator=(const user_allocation&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

} // namespace

TEST_CASE("a reduction over a distributed_view of the user's cudaMalloc memory matches the host") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for_groups_and_sizes({1u, 2u, 3u}, sizes, [&](const cohort::device_group& group, std::size_t n) {
    const auto in = cohort::testing::random_values<double>(n, 41 + static_cast<unsigned>(n));
    std::vector<double> weights(group.size());
    for (std::size_t k = 0; k < group.size(); ++k)
      weights[k] = 1.0 + static_cast<double>(k);
    const auto split = cohort::partition::weighted(n, weights);
    // One allocation per member, one element longer than its part; odd members' spans start
    // at element 1, an address CUB's vector loads do not take (it loads item by item there).
    std::vector<std::unique_ptr<user_allocation>> memory;
    std::vector<cuda::std::span<double>> spans;
    for (std::size_t k = 0; k < group.size(); ++k) {
      const std::size_t count = split.count(k);
      memory.push_back(
          std::make_unique<user_allocation>(group.device(k), (count + 1) * sizeof(double)));
      double* first = memory.back()->as<double>() + k % 2;
      // cudaMemcpy from pageable memory returns before the device has the data, and the legacy
      // stream orders nothing with the group's non-blocking streams: wait for the device.
      cohort::scoped_device on(group.device(k));
      REQUIRE(cudaMemcpy(first, in.data() + split.offset(k), count * sizeof(double),
                         cudaMemcpyHostToDevice) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      spans.emplace_back(first, count);
    }
    const cohort::distributed_view<double> x(group, spans);
    double expected = 3, squares = 0, magnitude = 3;
    for (double v : in) {
      expected += v;
      squares += v * v;
      magnitude += std::fabs(v);
    }
    const double tolerance = 1e-12 * (magnitude + 1);
    CHECK(std::fabs(cohort::multi_device_reduce(group, x, 3.0, cuda::std::plus<>{}).wait() -
                    expected) <= tolerance);
    const cohort::distributed_view<const double> readonly = x;
    const double got_squares =
        cohort::multi_device_transform_reduce(group, readonly, 0.0, cuda::std::plus<>{},
                                              [] __device__(double v) { return v * v; })
            .wait();
    CHECK(std::fabs(got_squares - squares) <= 1e-12 * (squares + 1));
    cohort::device_result<double> total(group);
    cohort::multi_device_reduce(group, readonly, 3, cuda::std::plus<>{}, total);
    CHECK(std::fabs(total.get() - expected) <= tolerance);
    group.synchronize(); // before the memory is freed
  });
}

TEST_CASE("an index range split by a partition or by a balancer reduces in order") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u}) {
    CAPTURE(members);
    const cohort::device_group group = cohort::testing::group_of(members);
    for (std::size_t n :
         {std::size_t{0}, std::size_t{2}, std::size_t{1009}, (std::size_t{1} << 20) + 3}) {
      CAPTURE(n);
      const ordered expected = fold_on_host(index_values(n));
      std::vector<double> weights(members, 1.0);
      weights.front() = 4.0;
      check_same(cohort::multi_device_transform_reduce(
                     group, cohort::indices(n, cohort::partition::weighted(n, weights)), order_init,
                     fold_in_order{}, lift_index{})
                     .wait(),
                 expected);
      // Each call is timed and may move work between members: every split must give the same
      // fold, in both forms.
      cohort::adaptive_balancer balancer(group);
      cohort::device_result<ordered> result(group);
      for (int call = 0; call < 12; ++call) {
        CAPTURE(call);
        check_same(cohort::multi_device_transform_reduce(group, cohort::indices(n, balancer),
                                                         order_init, fold_in_order{}, lift_index{})
                       .wait(),
                   expected);
        cohort::multi_device_transform_reduce(group, cohort::indices(n, balancer), order_init,
                                              fold_in_order{}, lift_index{}, result);
        check_same(result.get(), expected);
      }
      double total_weight = 0;
      for (double w : balancer.weights())
        total_weight += w;
      CHECK(total_weight == doctest::Approx(1.0));
    }
  }
}

TEST_CASE("the device-result form of transform_reduce over indices sums exactly and is captured") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    REQUIRE(group.enable_peer_access());
    const std::size_t n = 3'000'017;
    long long expected = 11;
    for (std::size_t i = 0; i < n; ++i)
      expected += static_cast<long long>(i % 7) - 3;
    const auto value = [] __device__(std::size_t i) { return static_cast<long long>(i % 7) - 3; };
    cohort::device_result<long long> result(group);
    cohort::multi_device_transform_reduce(group, cohort::indices(n), 11, cuda::std::plus<>{}, value,
                                          result);
    CHECK(result.get() == expected);
    // Captured with a fixed split, and replayed.
    cohort::stream origin(group.device(0));
    group.fork(origin); // makes the group's cached fork event outside the capture
    group.join(origin);
    origin.synchronize();
    const auto split = cohort::partition::weighted(n, std::vector<double>(members, 1.0));
    cudaGraph_t graph = capture(group, origin, [&] {
      cohort::multi_device_transform_reduce(group, cohort::indices(n, split), 11,
                                            cuda::std::plus<>{}, value, result);
    });
    cudaGraphExec_t replay = nullptr;
    REQUIRE(cudaGraphInstantiate(&replay, graph, 0) == cudaSuccess);
    for (int r = 0; r < 3; ++r) {
      cohort::multi_device_transform_reduce(group, cohort::indices(7), 0, cuda::std::plus<>{},
                                            value, result); // overwritten by the replay
      group.join(origin);
      REQUIRE(cudaGraphLaunch(replay, origin.native_handle()) == cudaSuccess);
      origin.synchronize();
      CHECK(result.get() == expected);
    }
    CHECK(cudaGraphExecDestroy(replay) == cudaSuccess);
    CHECK(cudaGraphDestroy(graph) == cudaSuccess);
    // A balancer's split is refused under capture, naming the call, with nothing enqueued.
    cohort::adaptive_balancer balancer(group);
    std::string what;
    cudaGraph_t refused = capture(group, origin, [&] {
      try {
        cohort::multi_device_transform_reduce(group, cohort::indices(n, balancer), 11,
                                              cuda::std::plus<>{}, value, result);
      } catch (const std::logic_error& e) {
        what = e.what();
      }
    });
    CHECK(what.find("cohort::multi_device_transform_reduce") != std::string::npos);
    CHECK(cudaGraphDestroy(refused) == cudaSuccess);
  }
}

namespace {

// A group of one hands sums, and the minimum and maximum of integers, to cub::DeviceReduce (their
// result is the in-order fold's in any order) where the items are more than
// reduce_in_order_up_to_bytes, and to its in-order kernel up to there; these check both forms
// against the host's fold, on both sides of that line.
template <class T>
std::vector<std::size_t> one_member_sizes() {
  constexpr std::size_t up_to = cohort::detail::reduce_in_order_up_to_bytes / sizeof(T);
  return {0, 1, 2, 3, 7919, 1000003, up_to, up_to + 3};
}

// The host's op(init, x[0], ..., x[n-1]), each step's result converted to T as the kernels do.
template <class T, class Op>
T fold_host(const std::vector<T>& in, T init, Op op) {
  T value = init;
  for (const T& x : in)
    value = static_cast<T>(op(value, x));
  return value;
}

// Sum, minimum and maximum of T on a group of one, pending and into a device_result, bit for bit
// against the host's fold (integer sums wrap in T on both sides).
template <class T>
void check_one_member_integers(unsigned seed) {
  const cohort::device_group one = cohort::testing::group_of(1);
  cohort::device_result<T> result(one);
  for (std::size_t n : one_member_sizes<T>()) {
    CAPTURE(n);
    const auto in = cohort::testing::random_values<T>(n, seed + static_cast<unsigned>(n));
    cohort::distributed_buffer<T> x(one, n);
    x.copy_from_host(in);
    const T init = static_cast<T>(7);
    auto check = [&](auto op) {
      const T expected = fold_host(in, init, op);
      CHECK(cohort::multi_device_reduce(one, x, init, op).wait() == expected);
      cohort::multi_device_reduce(one, x, init, op, result);
      CHECK(result.get() == expected);
    };
    check(cuda::std::plus<>{});
    check(cohort::sum);
    check(cuda::minimum<>{});
    check(cohort::min);
    check(cuda::maximum<T>{});
    check(cohort::max);
  }
}

} // namespace

TEST_CASE("a group of one sums integers, and finds their minimum and maximum, exactly") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_one_member_integers<int>(51);
  check_one_member_integers<unsigned>(52);
  check_one_member_integers<long long>(53);
  check_one_member_integers<unsigned long long>(54);
  check_one_member_integers<short>(55);         // sums wrap in 16 bits, as the in-order fold's do
  check_one_member_integers<unsigned char>(56); // and in 8
}

TEST_CASE("a group of one's bool sum is an or, and an int sum into a wider init is exact") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_group one = cohort::testing::group_of(1);
  for (std::size_t n : one_member_sizes<bool>()) {
    CAPTURE(n);
    // The fold converts each step's sum to bool: an or. All false, then all true.
    cohort::distributed_buffer<bool> flags(one, n);
    flags.fill_bytes(0);
    CHECK(cohort::multi_device_reduce(one, flags, false, cuda::std::plus<>{}).wait() == false);
    flags.fill_bytes(1);
    CHECK(cohort::multi_device_reduce(one, flags, false, cuda::std::plus<>{}).wait() == (n > 0));
    // Ints summed in long long: each element converted first, so nothing wraps.
    std::vector<int> big(n, 2'000'000'000);
    cohort::distributed_buffer<int> x(one, n);
    x.copy_from_host(big);
    const long long expected = 5 + 2'000'000'000LL * static_cast<long long>(n);
    CHECK(cohort::multi_device_reduce(one, x, 5LL, cuda::std::plus<>{}).wait() == expected);
    CHECK(cohort::multi_device_reduce(one, x, 5LL, cuda::std::plus<long long>{}).wait() ==
          expected);
    // The index form through a transform, summed exactly in unsigned long long.
    unsigned long long squares = 1;
    for (std::size_t i = 0; i < n; ++i)
      squares += static_cast<unsigned long long>(i) * i;
    CHECK(cohort::multi_device_transform_reduce(
              one, cohort::indices(n), 1ull, cuda::std::plus<>{},
              [] __device__(std::size_t i) { return static_cast<unsigned long long>(i) * i; })
              .wait() == squares);
  }
}

TEST_CASE("a group of one's float and double sums agree with a double host reference") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_group one = cohort::testing::group_of(1);
  cohort::device_result<float> float_result(one);
  cohort::device_result<double> double_result(one);
  for (std::size_t n : one_member_sizes<float>()) {
    CAPTURE(n);
    const auto in = cohort::testing::random_values<double>(n, 61 + static_cast<unsigned>(n));
    const std::vector<float> in_f(in.begin(), in.end());
    cohort::distributed_buffer<double> xd(one, n);
    cohort::distributed_buffer<float> xf(one, n);
    xd.copy_from_host(in);
    xf.copy_from_host(in_f);
    double expected = 0.25, expected_f = 0.25, magnitude = 0.25;
    for (std::size_t i = 0; i < n; ++i) {
      expected += in[i];
      expected_f += in_f[i];
      magnitude += std::fabs(in[i]);
    }
    CHECK(std::fabs(cohort::multi_device_reduce(one, xd, 0.25, cuda::std::plus<>{}).wait() -
                    expected) <= 1e-12 * magnitude);
    CHECK(std::fabs(cohort::multi_device_reduce(one, xf, 0.25f, cohort::sum).wait() - expected_f) <=
          1e-5 * magnitude);
    cohort::multi_device_reduce(one, xd, 0.25, cuda::std::plus<double>{}, double_result);
    CHECK(std::fabs(double_result.get() - expected) <= 1e-12 * magnitude);
    cohort::multi_device_reduce(one, xf, 0.25f, cuda::std::plus<>{}, float_result);
    CHECK(std::fabs(float_result.get() - expected_f) <= 1e-5 * magnitude);
    // Floats summed in double: each element converted first.
    CHECK(std::fabs(cohort::multi_device_reduce(one, xf, 0.25, cuda::std::plus<>{}).wait() -
                    expected_f) <= 1e-12 * magnitude);
  }
}

TEST_CASE("a group of one sums half and bfloat16 elements in float, and takes their maximum") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_group one = cohort::testing::group_of(1);
  for (std::size_t n : one_member_sizes<__half>()) {
    CAPTURE(n);
    // Integers in [-8, 8]: every partial sum is exact in float (below 2^24) in any order.
    const auto ints = cohort::testing::random_values<int>(n, 71 + static_cast<unsigned>(n));
    std::vector<__half> h(n);
    std::vector<__nv_bfloat16> b(n);
    double expected = 3;
    float largest = -100.0f;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(ints[i] % 9);
      h[i] = __float2half(v);
      b[i] = __float2bfloat16(v);
      expected += v;
      largest = std::max(largest, v);
    }
    cohort::distributed_buffer<__half> xh(one, n);
    cohort::distributed_buffer<__nv_bfloat16> xb(one, n);
    xh.copy_from_host(h);
    xb.copy_from_host(b);
    CHECK(static_cast<double>(
              cohort::multi_device_reduce(one, xh, 3.0f, cuda::std::plus<>{}).wait()) == expected);
    CHECK(static_cast<double>(cohort::multi_device_reduce(one, xb, 3.0f, cohort::sum).wait()) ==
          expected);
    CHECK(cohort::multi_device_transform_reduce(
              one, xh, 3.0, cuda::std::plus<>{},
              [] __device__(__half v) { return 2.0 * __half2float(v); })
              .wait() == 2 * expected - 3);
    // The maximum in half itself: cohort's operator, in order (a floating type).
    CHECK(__half2float(
              cohort::multi_device_reduce(one, xh, __float2half(-100.0f), cohort::max).wait()) ==
          largest);
  }
}

// Floating-point minima and maxima keep cohort's in-order kernel: where -0.0 and +0.0 tie, the
// in-order fold returns the one its operator picks by position (cuda::minimum keeps the right
// operand of a tie, so the last zero), which a reordering reduction would not promise.
TEST_CASE("a group of one's float minimum and maximum give the in-order fold's signed zero") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_group one = cohort::testing::group_of(1);
  cohort::device_result<float> result(one);
  for (std::size_t n : one_member_sizes<float>()) {
    CAPTURE(n);
    // Values in [0.5, 1.5), zeros of both signs mixed in: the minimum is a zero wherever there is
    // one, and which zero depends on the order.
    std::mt19937 engine(static_cast<unsigned>(n) + 81);
    std::vector<float> in(n);
    for (std::size_t i = 0; i < n; ++i)
      in[i] = 0.5f + static_cast<float>(engine() % 1000) / 1000.0f;
    for (std::size_t i = 0; i < n / 97; ++i)
      in[engine() % n] = (engine() % 2) ? 0.0f : -0.0f;
    cohort::distributed_buffer<float> x(one, n);
    x.copy_from_host(in);
    auto check = [&](auto op, float init) {
      const float expected = fold_host(in, init, op);
      const float got = cohort::multi_device_reduce(one, x, init, op).wait();
      CHECK(std::memcmp(&got, &expected, sizeof(float)) == 0);
      cohort::multi_device_reduce(one, x, init, op, result);
      const float into = result.get();
      CHECK(std::memcmp(&into, &expected, sizeof(float)) == 0);
    };
    check(cuda::minimum<>{}, 2.0f);
    check(cohort::min, 2.0f);
    // The maximum of the negated values: zeros tie at the top.
    for (float& v : in)
      v = -v;
    x.copy_from_host(in);
    check(cuda::maximum<>{}, -2.0f);
    check(cohort::max, -2.0f);
  }
}

TEST_CASE("a group of one's device-result sum is captured into a graph and replayed") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto one = cohort::testing::group_of(1);
  const std::size_t n = 1'000'003;
  cohort::distributed_buffer<unsigned> x(one, n);
  cohort::device_result<unsigned> result(one);
  cohort::stream origin(one.device(0));
  x.fill_bytes(0);
  one.fork(origin); // makes the group's cached fork event outside the capture
  one.join(origin);
  origin.synchronize();
  cudaGraph_t graph = capture(one, origin, [&] {
    cohort::multi_device_reduce(one, x, 3u, cuda::std::plus<>{}, result);
    cohort::multi_device_reduce(one, x, 3u, cuda::maximum<>{}, result); // the value kept
  });
  cudaGraphExec_t replay = nullptr;
  REQUIRE(cudaGraphInstantiate(&replay, graph, 0) == cudaSuccess);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    const auto values = cohort::testing::random_values<unsigned>(n, 90 + r);
    x.copy_from_host(values);
    cohort::multi_device_reduce(one, x, 0u, cuda::std::plus<>{}, result); // the direct call's
    const unsigned direct = result.get();
    CHECK(direct == fold_host(values, 0u, cuda::std::plus<>{}));
    one.join(origin);
    REQUIRE(cudaGraphLaunch(replay, origin.native_handle()) == cudaSuccess);
    origin.synchronize();
    CHECK(result.get() == fold_host(values, 3u, cuda::maximum<>{}));
  }
  CHECK(cudaGraphExecDestroy(replay) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}

// Once warm, a loop of reductions allocates no device memory and makes no event: the scratch and
// the events are the group's, kept between calls; a pending value's event comes back to the pool.
TEST_CASE("reductions in a loop allocate nothing and make no events once warm") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 3u}) {
    CAPTURE(members);
    const cohort::device_group group = cohort::testing::group_of(members);
    const std::size_t n = (std::size_t{1} << 20) + 3;
    const auto in = cohort::testing::random_values<int>(n, 97);
    cohort::distributed_buffer<int> x(group, n);
    x.copy_from_host(in);
    std::vector<long long> lifted(in.begin(), in.end());
    cohort::device_result<long long> sum(group);
    cohort::device_result<ordered> folded(group);
    cohort::device_result<float> smallest(group);
    const long long expected = fold_host(lifted, 1LL, cuda::std::plus<>{});
    cohort::testing::check_steady_state(group, [&] {
      CHECK(cohort::multi_device_reduce(group, x, 1LL, cuda::std::plus<>{}).wait() == expected);
      check_same(cohort::multi_device_transform_reduce(
                     group, x, order_init, fold_in_order{},
                     [] __device__(int v) { return lift(static_cast<long long>(v)); })
                     .wait(),
                 fold_on_host(lifted));
      cohort::multi_device_reduce(group, x, 1LL, cuda::std::plus<>{}, sum);
      cohort::multi_device_transform_reduce(
          group, x, order_init, fold_in_order{},
          [] __device__(int v) { return lift(static_cast<long long>(v)); }, folded);
      cohort::multi_device_transform_reduce(
          group, x, 5000.0f, cuda::minimum<>{}, [] __device__(int v) { return float(v); },
          smallest);
      CHECK(cohort::multi_device_transform_reduce(
                group, cohort::indices(n), 0ull, cuda::std::plus<>{},
                [] __device__(std::size_t i) { return static_cast<unsigned long long>(i); })
                .wait() == static_cast<unsigned long long>(n) * (n - 1) / 2);
    });
    CHECK(sum.get() == expected);
    check_same(folded.get(), fold_on_host(lifted));
    CHECK(smallest.get() == static_cast<float>(*std::min_element(in.begin(), in.end())));
  }
}
