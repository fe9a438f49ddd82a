// Multi-device reductions against host references (in double), on groups of 1 to 4, for sizes 0,
// 1, primes and fewer items than members; init counts once; user types and operators.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <limits>

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

} // namespace

TEST_CASE("multi_device_reduce sums ints exactly and counts init once") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u, 4u})
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const auto in = cohort::testing::random_values<int>(n, 3 + n);
      cohort::distributed_buffer<int> x(group, n);
      x.copy_from_host(in);
      auto sum = cohort::multi_device_reduce(group, x, 17LL, cuda::std::plus<long long>{});
      long long expected = 17;
      for (int v : in)
        expected += v;
      CHECK(sum.wait() == expected);
    }
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
  auto sh = cohort::multi_device_transform_reduce(group, xh, 0.0f, cuda::std::plus<>{},
                                                  [] __device__(__half v) { return __half2float(v); });
  auto sb = cohort::multi_device_transform_reduce(
      group, xb, 0.0f, cuda::std::plus<>{}, [] __device__(__nv_bfloat16 v) { return __bfloat162float(v); });
  CHECK(std::fabs(sh.wait() - expected_h) <= 1e-5 * magnitude);
  CHECK(std::fabs(sb.wait() - expected_b) <= 1e-5 * magnitude);
  // And max of half values, in half.
  auto mh = cohort::multi_device_reduce(group, xh, __float2half(-60000.0f), cuda::maximum<>{});
  float expected_max = -60000.0f;
  for (auto v : h)
    expected_max = std::max(expected_max, __half2float(v));
  CHECK(__half2float(mh.wait()) == expected_max);
}

TEST_CASE("a user-defined statistics type reduces over every member") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {2u, 3u, 4u})
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      auto group = cohort::testing::group_of(members);
      const auto in = cohort::testing::random_values<float>(n, 77);
      cohort::distributed_buffer<float> x(group, n);
      x.copy_from_host(in);
      const stats init{std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), 0.0, 0};
      auto r = cohort::multi_device_transform_reduce(group, x, init, merge_stats{}, to_stats{}).wait();
      stats e = init;
      for (float v : in)
        e = {std::min(e.min, v), std::max(e.max, v), e.sum + v, e.count + 1};
      CHECK(r.count == n);
      CHECK(r.min == e.min);
      CHECK(r.max == e.max);
      CHECK(std::fabs(r.sum - e.sum) <= 1e-9 * (n + 1));
    }
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
    auto r = cohort::multi_device_transform_reduce_n(
                 group, n, indexed{-1.0f, -1}, arg_max{},
                 [=] __device__(std::size_t i) { return indexed{v[i], static_cast<long long>(i)}; })
                 .wait();
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (in[i] > in[best]) best = i;
    CHECK(r.index == static_cast<long long>(best));
    CHECK(r.value == in[best]);
  }
}

TEST_CASE("reductions do not block until wait and a dropped result is safe") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::size_t n = 1 << 20;
  cohort::distributed_buffer<int> x(group, n);
  x.fill_bytes(0);
  {
    auto dropped = cohort::multi_device_reduce(group, x, 0, cuda::std::plus<>{});
  } // destroyed without wait: it waits for itself
  auto sum = cohort::multi_device_reduce(group, x, 5, cuda::std::plus<>{});
  CHECK(sum.wait() == 5);
  auto three = cohort::testing::group_of(3);
  cohort::distributed_buffer<int> other(three, 10);
  CHECK_THROWS_WITH_AS(cohort::multi_device_reduce(group, other, 0, cuda::std::plus<>{}),
                       doctest::Contains("argument 'buffer'"), std::invalid_argument);
}
