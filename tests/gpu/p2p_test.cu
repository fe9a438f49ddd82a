// The peer-to-peer engine: all_reduce (one-shot, two-shot, automatic; in and out of place),
// all_gather and broadcast over groups of 2, 3 and 4 members (real GPUs where that many are
// visible, else emulated on GPU 0), for built-in, half-precision and user-defined types, against
// host references; long runs without host synchronisation; argument errors.
#include "p2p_hooks.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <span>
#include <utility>

namespace {

using cohort::p2p_algorithm;

const std::size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 31, 255, 1000, 7919, 65537, 300007};
const std::size_t group_sizes[] = {2, 3, 4};

struct stats {
  float lo, hi, total;
  int count;
};
struct merge_stats {
  __host__ __device__ stats operator()(stats a, stats b) const {
    return {a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? b.hi : a.hi, a.total + b.total,
            a.count + b.count};
  }
};
bool operator==(const stats& a, const stats& b) {
  return a.lo == b.lo && a.hi == b.hi && a.total == b.total && a.count == b.count;
}

struct arg_max {
  float value;
  int index;
};
// The larger value; on a tie the smaller index (associative and commutative).
struct pick_max {
  __host__ __device__ arg_max operator()(arg_max a, arg_max b) const {
    if (a.value != b.value) return a.value < b.value ? b : a;
    return a.index < b.index ? a : b;
  }
};
bool operator==(const arg_max& a, const arg_max& b) {
  return a.value == b.value && a.index == b.index;
}

// Rank r's element i, as a small integer so that every sum below is exact in every type.
int small(int rank, std::size_t i) {
  return static_cast<int>((i * 2654435761u + static_cast<unsigned>(rank) * 40503u) % 29) - 14;
}

template <class T>
struct case_of {
  std::function<T(int, std::size_t)> value;       // rank's element i
  std::function<T(const std::vector<T>&)> reduce; // the host reference over the ranks' elements
};

template <class T>
bool same(const T& a, const T& b) {
  if constexpr (cohort::detail::is_8_bit_float<T>)
    return a.__x == b.__x; // the same bits
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(a) == __half2float(b);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(a) == __bfloat162float(b);
  else
    return a == b;
}

// Runs every algorithm, count and placement on a group of `members` and compares each rank's
// output with the reference, element by element.
template <class T, class Op>
void check_all_reduce(std::size_t members, Op op, const case_of<T>& c,
                      cohort::p2p_options options = {}) {
  auto group = cohort::testing::group_of(members);
  cohort::p2p_clique peers(group, std::size_t{8} << 20); // one-shot can take every count here
  for (const auto algorithm :
       {p2p_algorithm::one_shot, p2p_algorithm::two_shot, p2p_algorithm::automatic})
    for (const std::size_t count : counts)
      for (const bool in_place : {true, false}) {
        const int algo = static_cast<int>(algorithm);
        CAPTURE(members);
        CAPTURE(algo);
        CAPTURE(count);
        CAPTURE(in_place);
        const auto split = cohort::partition::replicated(count, members);
        cohort::distributed_buffer<T> send(group, split), recv(group, split);
        std::vector<std::vector<T>> inputs(members, std::vector<T>(count));
        for (std::size_t r = 0; r < members; ++r) {
          for (std::size_t i = 0; i < count; ++i)
            inputs[r][i] = c.value(static_cast<int>(r), i);
          send.local(r).copy_from_host(inputs[r]);
        }
        recv.fill_bytes(cohort::testing::poison_byte);
        options.algorithm = algorithm;
        if (in_place)
          cohort::all_reduce(peers, send, op, options);
        else
          cohort::all_reduce(peers, std::as_const(send), recv, op, options);
        std::vector<T> expected(count), column(members);
        for (std::size_t i = 0; i < count; ++i) {
          for (std::size_t r = 0; r < members; ++r)
            column[r] = inputs[r][i];
          expected[i] = c.reduce(column);
        }
        for (std::size_t r = 0; r < members; ++r) {
          std::vector<T> got(count);
          (in_place ? send : recv).local(r).copy_to_host(got);
          group.synchronize();
          std::size_t wrong = 0;
          for (std::size_t i = 0; i < count; ++i)
            wrong += same(got[i], expected[i]) ? 0 : 1;
          CAPTURE(r);
          CHECK(wrong == 0);
        }
      }
}

template <class T>
case_of<T> summed() {
  return {[](int r, std::size_t i) { return static_cast<T>(static_cast<float>(small(r, i))); },
          [](const std::vector<T>& v) {
            double s = 0;
            for (const T& x : v)
              s += static_cast<double>(static_cast<float>(x));
            return static_cast<T>(static_cast<float>(s));
          }};
}

// fp8 has no arithmetic: the engine computes through float, rounding to fp8 after every step in
// rank order, or once at the end when accumulating in float; avg divides in float at the end.
template <class F8>
case_of<F8> fp8_summed(bool in_float, bool average) {
  // Each rank's index scrambled: small(r, i) alone keeps every partial sum of 4 ranks exact.
  return {[](int r, std::size_t i) {
            return F8(static_cast<float>(small(r, i * static_cast<std::size_t>(r + 1))));
          },
          [=](const std::vector<F8>& v) {
            float acc = static_cast<float>(v[0]);
            for (std::size_t r = 1; r < v.size(); ++r) {
              acc += static_cast<float>(v[r]);
              if (!in_float) acc = static_cast<float>(F8(acc));
            }
            return F8(average ? acc / static_cast<float>(v.size()) : acc);
          }};
}
template <class F8>
case_of<F8> fp8_largest() {
  return {[](int r, std::size_t i) { return F8(static_cast<float>(small(r, i)) / 4); },
          [](const std::vector<F8>& v) {
            F8 best = v[0];
            for (const F8& x : v)
              if (static_cast<float>(best) < static_cast<float>(x)) best = x;
            return best;
          }};
}

} // namespace

TEST_CASE("p2p all_reduce sums float, int and double exactly on groups of 2, 3 and 4") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    check_all_reduce<float>(m, cohort::sum, summed<float>());
    check_all_reduce<int>(m, cohort::sum,
                          {[](int r, std::size_t i) { return small(r, i); },
                           [](const std::vector<int>& v) {
                             long long s = 0;
                             for (int x : v)
                               s += x;
                             return static_cast<int>(s);
                           }});
    // avg: the sum (exact) divided once by the number of ranks.
    check_all_reduce<double>(m, cohort::avg,
                             {[](int r, std::size_t i) { return static_cast<double>(small(r, i)); },
                              [](const std::vector<double>& v) {
                                double s = 0;
                                for (double x : v)
                                  s += x;
                                return s / static_cast<double>(v.size());
                              }});
  }
}

TEST_CASE("p2p all_reduce takes min, max and prod, and one-byte elements") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    check_all_reduce<std::uint8_t>(
        m, cohort::max,
        {[](int r, std::size_t i) { return static_cast<std::uint8_t>(small(r, i) + 100); },
         [](const std::vector<std::uint8_t>& v) { return *std::max_element(v.begin(), v.end()); }});
    check_all_reduce<long long>(
        m, cohort::min,
        {[](int r, std::size_t i) { return static_cast<long long>(small(r, i)) << 33; },
         [](const std::vector<long long>& v) { return *std::min_element(v.begin(), v.end()); }});
    check_all_reduce<int>(m, cohort::prod,
                          {[](int r, std::size_t i) { return small(r, i) % 3; },
                           [](const std::vector<int>& v) {
                             int p = 1;
                             for (int x : v)
                               p *= x;
                             return p;
                           }});
  }
}

TEST_CASE("p2p all_reduce of half and bfloat16, in their own type and accumulated in float") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes)
    for (const bool wide : {false, true}) {
      CAPTURE(wide);
      check_all_reduce<__half>(m, cohort::sum, summed<__half>(), {.accumulate_in_float = wide});
      check_all_reduce<__nv_bfloat16>(m, cohort::sum, summed<__nv_bfloat16>(),
                                      {.accumulate_in_float = wide});
    }
}

TEST_CASE("p2p all_reduce of fp8 through float: rounded at every step, or once in float") {
  COHORT_SKIP_UNLESS_GPUS(1);
  using e4m3 = __nv_fp8_e4m3;
  using e5m2 = __nv_fp8_e5m2;
  // The two references differ (17 rounds to 16 in e4m3: 9 + 8 + 2 is 18 in e4m3 steps, 20 in
  // float rounded once), so that the exact check sees which form ran.
  std::size_t differ = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    std::vector<e4m3> column;
    for (int r = 0; r < 4; ++r)
      column.push_back(fp8_summed<e4m3>(false, false).value(r, i));
    differ += same(fp8_summed<e4m3>(false, false).reduce(column),
                   fp8_summed<e4m3>(true, false).reduce(column))
                  ? 0
                  : 1;
  }
  CHECK(differ > 0);
  for (std::size_t m : group_sizes)
    for (const bool wide : {false, true}) {
      CAPTURE(wide);
      check_all_reduce<e4m3>(m, cohort::sum, fp8_summed<e4m3>(wide, false),
                             {.accumulate_in_float = wide});
      check_all_reduce<e5m2>(m, cohort::avg, fp8_summed<e5m2>(wide, true),
                             {.accumulate_in_float = wide});
    }
  check_all_reduce<e4m3>(3, cohort::max, fp8_largest<e4m3>());
  check_all_reduce<e5m2>(4, cohort::max, fp8_largest<e5m2>(), {.accumulate_in_float = true});
}

TEST_CASE("accumulating half in float rounds once, where half accumulation rounds at every step") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(4);
  cohort::p2p_clique peers(group);
  // 2048 + 1 + 1 + 1: in half, 2048 + 1 rounds back to 2048 each time; in float the sum is 2051,
  // which rounds once to 2052 (half's spacing at 2048 is 2).
  cohort::distributed_buffer<__half> x(group, cohort::partition::replicated(5, 4));
  for (const bool wide : {false, true}) {
    for (std::size_t r = 0; r < 4; ++r)
      x.local(r).copy_from_host(std::vector<__half>(5, __float2half(r == 0 ? 2048.0f : 1.0f)));
    cohort::all_reduce(peers, x, cohort::sum, {.accumulate_in_float = wide});
    std::vector<__half> out(5);
    x.local(3).copy_to_host(out);
    group.synchronize();
    CHECK(__half2float(out[4]) == (wide ? 2052.0f : 2048.0f));
  }
}

// A user operator on a pair type takes whole pairs, or float lanes when accumulating in float;
// it is compiled for both (p2p/collectives.cuh). (Where half's conversions are compiled out, such
// a functor did not compile before: a lane-by-lane form called it with a lone __half. That is
// the compile test half_without_conversions.cu's to show; here the forms' results.)
struct half2_sum {
  __device__ __half2 operator()(__half2 a, __half2 b) const { return __hadd2(a, b); }
  __device__ float operator()(float a, float b) const { return a + b; }
};

TEST_CASE("accumulate_in_float applies to __half2 and __nv_bfloat162 with cohort's and user "
          "operators") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(4);
  cohort::p2p_clique peers(group);
  // 2048 + 1 + 1 + 1 is 2048 in half steps, 2052 in float (half's spacing at 2048 is 2); in the
  // high lane 4096 + 2 + 2 + 2 is 4096, and 4104 (spacing 4); bfloat16's spacing at 256 is 2:
  // 256 + 1 + 1 + 1 is 256 in bfloat16 steps, 260 in float. The sums show which form ran.
  cohort::distributed_buffer<__half2> h(group, cohort::partition::replicated(5, 4));
  cohort::distributed_buffer<__nv_bfloat162> b(group, cohort::partition::replicated(5, 4));
  for (const bool user : {false, true})
    for (const bool wide : {false, true}) {
      CAPTURE(user);
      CAPTURE(wide);
      for (std::size_t r = 0; r < 4; ++r) {
        const float v = r == 0 ? 2048.0f : 1.0f, w = r == 0 ? 256.0f : 1.0f;
        h.local(r).copy_from_host(std::vector<__half2>(5, __floats2half2_rn(v, 2 * v)));
        b.local(r).copy_from_host(std::vector<__nv_bfloat162>(5, __floats2bfloat162_rn(w, w)));
      }
      const cohort::p2p_options options{.accumulate_in_float = wide};
      if (user) {
        cohort::all_reduce(peers, h, half2_sum{}, options);
        cohort::all_reduce(
            peers, b, [] __device__(auto x, auto y) { return x + y; }, options);
      } else {
        cohort::all_reduce(peers, h, cohort::sum, options);
        cohort::all_reduce(peers, b, cohort::sum, options);
      }
      std::vector<__half2> hout(5);
      std::vector<__nv_bfloat162> bout(5);
      h.local(3).copy_to_host(hout);
      b.local(2).copy_to_host(bout);
      group.synchronize();
      for (int k = 0; k < 5; ++k) {
        CHECK(__low2float(hout[k]) == (wide ? 2052.0f : 2048.0f));
        CHECK(__high2float(hout[k]) == (wide ? 4104.0f : 4096.0f));
        CHECK(__low2float(bout[k]) == (wide ? 260.0f : 256.0f));
        CHECK(__high2float(bout[k]) == (wide ? 260.0f : 256.0f));
      }
    }
}

TEST_CASE("automatic switches from one-shot to two-shot exactly at the automatic limit") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    auto group = cohort::testing::group_of(m);
    cohort::p2p_clique peers(group, 8192);
    const std::size_t limit = cohort::testing::p2p::automatic_one_shot_limit(peers);
    CHECK(limit == (m <= 2 ? 8192 : 8192 * 2 / m));
    using cohort::detail::p2p::choose;
    CHECK(choose(peers, limit, p2p_algorithm::automatic) == p2p_algorithm::one_shot);
    CHECK(choose(peers, limit + 1, p2p_algorithm::automatic) == p2p_algorithm::two_shot);
    CHECK(choose(peers, 8, p2p_algorithm::automatic) == p2p_algorithm::one_shot);
    CHECK(choose(peers, 8192, p2p_algorithm::one_shot) == p2p_algorithm::one_shot);
    CHECK_THROWS_AS((void)choose(peers, 8193, p2p_algorithm::one_shot), std::invalid_argument);
    CHECK(choose(peers, 8, p2p_algorithm::two_shot) == p2p_algorithm::two_shot);
  }
}

TEST_CASE("ranks that share one GPU meet at device scope, ranks on several GPUs at system scope") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    auto group = cohort::testing::group_of(m); // real GPUs where m are visible
    cohort::p2p_clique peers(group);
    for (std::size_t r = 0; r < m; ++r)
      CHECK(cohort::testing::p2p::meets_at_device_scope(peers, r) == group.is_emulated());
  }
  auto pair = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::p2p_clique shared(pair);
  CHECK(cohort::testing::p2p::meets_at_device_scope(shared, 0));
  CHECK(cohort::testing::p2p::meets_at_device_scope(shared, 1));
}

TEST_CASE("a one-shot limit that would wrap is refused, and limits round up to 256 bytes") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  for (const std::size_t bad :
       {std::size_t{1} << 63, SIZE_MAX, SIZE_MAX - 255, cohort::p2p_clique::max_one_shot_limit + 1})
    CHECK_THROWS_WITH_AS(cohort::p2p_clique(group, bad), doctest::Contains("one_shot_limit"),
                         std::invalid_argument);
  cohort::p2p_clique peers(group, 1000);
  CHECK(peers.one_shot_limit() == 1024);
}

// `{}` is the options form, not the one-shot-limit form with a limit of 0.
TEST_CASE("p2p_clique(group, {}) takes every default, and a negative one-shot limit is refused") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique defaults(group, {});
  CHECK(defaults.one_shot_limit() == cohort::p2p_clique::default_one_shot_limit);
  // The default patience, or COHORT_P2P_PATIENCE_MS where it is set (scripts/gpu_check.sh sets it).
  CHECK(defaults.options().patience ==
        cohort::p2p_clique_options::patience_from_environment().value_or(
            cohort::p2p_clique_options::default_patience));
  CHECK_THROWS_WITH_AS(cohort::p2p_clique(group, -1), doctest::Contains("must not be negative"),
                       std::invalid_argument);
  cohort::p2p_clique from_int(group, 1 << 12);
  CHECK(from_int.one_shot_limit() == 4096);
}

TEST_CASE("p2p span forms of reduce, broadcast, reduce_scatter and all_reduce, in place too") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    auto group = cohort::testing::group_of(m);
    cohort::p2p_clique peers(group);
    const std::size_t count = 1001;
    cohort::distributed_buffer<int> big(group, cohort::partition::replicated(count * m, m));
    cohort::distributed_buffer<int> small_out(group, cohort::partition::replicated(count, m));
    std::vector<std::vector<int>> in(m, std::vector<int>(count * m));
    for (std::size_t r = 0; r < m; ++r) {
      for (std::size_t i = 0; i < count * m; ++i)
        in[r][i] = small(static_cast<int>(r), i);
      big.local(r).copy_from_host(in[r]);
    }
    small_out.fill_bytes(cohort::testing::poison_byte);
    std::vector<cuda::std::span<const int>> send, send_first;
    std::vector<cuda::std::span<int>> recv, in_place;
    for (std::size_t r = 0; r < m; ++r) {
      send.push_back(big.shard(r).data);
      send_first.push_back(big.shard(r).data.first(count));
      recv.push_back(small_out.shard(r).data);
      in_place.push_back(big.shard(r).data.subspan(r * count, count));
    }
    const int root = static_cast<int>(m) - 1;
    cohort::reduce(peers, send_first, recv, cohort::sum, root); // the first `count` of each big
    auto column_sum = [&](std::size_t i) {
      int s = 0;
      for (std::size_t q = 0; q < m; ++q)
        s += in[q][i];
      return s;
    };
    std::vector<int> got(count);
    small_out.local(root).copy_to_host(got);
    group.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      wrong += got[i] != column_sum(i);
    CHECK(wrong == 0);
    // In place: rank r's block r of its own big buffer becomes block r of the sum.
    cohort::reduce_scatter(peers, send, in_place, cohort::sum);
    wrong = 0;
    for (std::size_t r = 0; r < m; ++r) {
      std::vector<int> mine(count * m);
      big.local(r).copy_to_host(mine);
      group.synchronize();
      for (std::size_t i = 0; i < count; ++i)
        wrong += mine[r * count + i] != column_sum(r * count + i);
    }
    CHECK(wrong == 0);
    cohort::broadcast(peers, recv, root);
    wrong = 0;
    for (std::size_t r = 0; r < m; ++r) {
      small_out.local(r).copy_to_host(got);
      group.synchronize();
      for (std::size_t i = 0; i < count; ++i)
        wrong += got[i] != column_sum(i);
    }
    CHECK(wrong == 0);
    // Out of place from spans as shards give them (of int, not const int; this form took only
    // const ones): the first `count` of every big, rank 0's now block 0 of the sum.
    std::vector<cuda::std::span<int>> send_as_given;
    for (std::size_t r = 0; r < m; ++r)
      send_as_given.push_back(big.shard(r).data.first(count));
    small_out.fill_bytes(cohort::testing::poison_byte);
    cohort::all_reduce(peers, send_as_given, recv, cohort::sum);
    wrong = 0;
    for (std::size_t r = 0; r < m; ++r) {
      small_out.local(r).copy_to_host(got);
      group.synchronize();
      for (std::size_t i = 0; i < count; ++i) {
        int expected = column_sum(i);
        for (std::size_t q = 1; q < m; ++q)
          expected += in[q][i];
        wrong += got[i] != expected;
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("p2p all_reduce of user-defined types with user operators") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    check_all_reduce<stats>(m, merge_stats{},
                            {[](int r, std::size_t i) {
                               const float v = static_cast<float>(small(r, i));
                               return stats{v, v, v, 1};
                             },
                             [](const std::vector<stats>& v) {
                               stats s = v[0];
                               for (std::size_t k = 1; k < v.size(); ++k)
                                 s = merge_stats{}(s, v[k]);
                               return s;
                             }});
    check_all_reduce<arg_max>(m, pick_max{},
                              {[](int r, std::size_t i) {
                                 return arg_max{static_cast<float>(small(r, i) % 4), r};
                               },
                               [](const std::vector<arg_max>& v) {
                                 arg_max best = v[0];
                                 for (std::size_t k = 1; k < v.size(); ++k)
                                   best = pick_max{}(best, v[k]);
                                 return best;
                               }});
  }
}

TEST_CASE("p2p all_reduce over per-device spans, with a device lambda") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  const std::size_t n = 4097;
  std::vector<cohort::device_buffer<int>> in, out;
  std::vector<cuda::std::span<const int>> send;
  std::vector<cuda::std::span<int>> recv;
  for (std::size_t r = 0; r < 2; ++r) {
    in.emplace_back(n, group.stream(r));
    out.emplace_back(n, group.stream(r));
    in.back().copy_from_host(std::vector<int>(n, static_cast<int>(r) + 5));
    out.back().fill_bytes(cohort::testing::poison_byte);
    send.push_back(in.back().span());
    recv.push_back(out.back().span());
  }
  cohort::all_reduce(peers, send, recv, [] __device__(int a, int b) { return a * 10 + b; });
  for (std::size_t r = 0; r < 2; ++r) {
    std::vector<int> got(n);
    out[r].copy_to_host(got);
    group.synchronize();
    CHECK(got == std::vector<int>(n, 56)); // rank order: 5 * 10 + 6
  }
}

namespace {

// `calls` all_reduces back to back without host synchronisation, call k over the first
// sizes[k % sizes.size()] elements: rank r adds (r + 1) * (k % 5 + 1) to each, then all take the
// max, which is the last rank's value and which every rank must then hold: a rank that read a
// stale peer value (a stale line, a stale half of the scratch) would fall behind.
void check_add_then_max(cohort::device_group& group, cohort::p2p_clique& peers,
                        std::span<const std::size_t> sizes, int calls, p2p_algorithm algorithm) {
  const std::size_t members = group.size();
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  cohort::distributed_buffer<long long> x(group, cohort::partition::replicated(largest, members));
  x.fill_bytes(0);
  std::vector<long long> added(largest + 1, 0); // what call k adds to [0, n): +c at 0, -c at n
  for (int k = 0; k < calls; ++k) {
    const std::size_t n = sizes[static_cast<std::size_t>(k) % sizes.size()];
    const long long c = k % 5 + 1;
    std::vector<cuda::std::span<long long>> spans;
    for (std::size_t r = 0; r < members; ++r) {
      long long* p = x.shard(r).data.data();
      const long long add = static_cast<long long>(r + 1) * c;
      cohort::for_each_n(group.stream(r), n, [=] __device__(std::size_t i) { p[i] += add; });
      spans.push_back(x.shard(r).data.first(n));
    }
    cohort::all_reduce(peers, spans, cohort::max, {.algorithm = algorithm});
    added[0] += static_cast<long long>(members) * c;
    added[n] -= static_cast<long long>(members) * c;
  }
  std::vector<long long> expected(largest);
  std::partial_sum(added.begin(), added.end() - 1, expected.begin());
  for (std::size_t r = 0; r < members; ++r) {
    CAPTURE(r);
    const auto got = cohort::testing::shard_to_host(x, r);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < largest; ++i)
      wrong += got[i] != expected[i];
    CHECK(wrong == 0);
  }
}

} // namespace

TEST_CASE("10,000 back-to-back p2p all_reduces without host synchronisation stay right") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const std::size_t members : {std::size_t{2}, std::size_t{3}})
    for (const auto algorithm : {p2p_algorithm::one_shot, p2p_algorithm::two_shot}) {
      CAPTURE(members);
      CAPTURE(static_cast<int>(algorithm));
      auto group = cohort::testing::group_of(members);
      cohort::p2p_clique peers(group);
      const std::size_t n[] = {algorithm == p2p_algorithm::one_shot ? 4099u : 100003u};
      check_add_then_max(group, peers, n, 10000, algorithm);
    }
}

// One-shot moves up to 8 KiB a rank in lines, and more through its scratch: calls of both kinds,
// of sizes on either side of the bound (with the last line part-filled), back to back.
TEST_CASE("one-shot in lines and through scratch interleave, at every size around 8 KiB") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const std::size_t members : {std::size_t{2}, std::size_t{3}}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    // long long: 1024 elements fill the lines exactly; uint8_t: 8191 leaves the last line short.
    const std::size_t sizes[] = {1, 1024, 1025, 3, 1023, 2, 4000};
    cohort::p2p_clique peers(group);
    check_add_then_max(group, peers, sizes, 700, p2p_algorithm::one_shot);
    // Bytes, on the same clique (its lines hold the calls above): the last line holds 7 of its 8,
    // then exactly 8 KiB, then one byte past the lines.
    for (const std::size_t n : {std::size_t{8191}, std::size_t{8192}, std::size_t{8193}}) {
      CAPTURE(n);
      cohort::distributed_buffer<std::uint8_t> b(group, cohort::partition::replicated(n, members));
      for (std::size_t r = 0; r < members; ++r) {
        std::vector<std::uint8_t> values(n);
        for (std::size_t i = 0; i < n; ++i)
          values[i] = static_cast<std::uint8_t>((i * 7 + r * 3) % 11);
        b.local(r).copy_from_host(values);
      }
      cohort::all_reduce(peers, b, cohort::sum);
      for (std::size_t r = 0; r < members; ++r) {
        const auto got = cohort::testing::shard_to_host(b, r);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) {
          unsigned want = 0;
          for (std::size_t q = 0; q < members; ++q)
            want += (i * 7 + q * 3) % 11;
          wrong += got[i] != static_cast<std::uint8_t>(want);
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("p2p all_gather and broadcast move every element to every rank") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : group_sizes)
    for (const std::size_t count : counts) {
      CAPTURE(members);
      CAPTURE(count);
      auto group = cohort::testing::group_of(members);
      cohort::p2p_clique peers(group);
      cohort::distributed_buffer<short> mine(group, cohort::partition::replicated(count, members));
      cohort::distributed_buffer<short> all(
          group, cohort::partition::replicated(count * members, members));
      std::vector<short> everyone(count * members);
      for (std::size_t r = 0; r < members; ++r) {
        std::vector<short> v(count);
        for (std::size_t i = 0; i < count; ++i)
          v[i] = static_cast<short>(small(static_cast<int>(r), i) * 100 + static_cast<int>(r));
        std::copy(v.begin(), v.end(), everyone.begin() + static_cast<long>(r * count));
        mine.local(r).copy_from_host(v);
      }
      all.fill_bytes(cohort::testing::poison_byte);
      cohort::all_gather(peers, std::as_const(mine), all);
      const int root = static_cast<int>(members - 1);
      cohort::broadcast(peers, mine, root);
      for (std::size_t r = 0; r < members; ++r) {
        std::vector<short> got(count * members), copy(count);
        all.local(r).copy_to_host(got);
        mine.local(r).copy_to_host(copy);
        group.synchronize();
        CAPTURE(r);
        CHECK(got == everyone);
        CHECK(std::equal(copy.begin(), copy.end(),
                         everyone.begin() + static_cast<long>(root * count)));
      }
    }
}

TEST_CASE("p2p reduce_scatter and reduce agree with the host, and leave other ranks alone") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : group_sizes)
    for (const std::size_t count : counts)
      for (const bool wide : {false, true}) {
        CAPTURE(members);
        CAPTURE(count);
        CAPTURE(wide);
        auto group = cohort::testing::group_of(members);
        cohort::p2p_clique peers(group);
        // reduce_scatter of stats (a user type) and reduce of __half, the latter either way.
        cohort::distributed_buffer<stats> all(
            group, cohort::partition::replicated(count * members, members));
        cohort::distributed_buffer<stats> block(group,
                                                cohort::partition::replicated(count, members));
        cohort::distributed_buffer<__half> x(group, cohort::partition::replicated(count, members));
        cohort::distributed_buffer<__half> y(group, cohort::partition::replicated(count, members));
        std::vector<std::vector<stats>> in(members, std::vector<stats>(count * members));
        std::vector<std::vector<__half>> hin(members, std::vector<__half>(count));
        for (std::size_t r = 0; r < members; ++r) {
          for (std::size_t i = 0; i < count * members; ++i) {
            const float v = static_cast<float>(small(static_cast<int>(r), i));
            in[r][i] = stats{v, v, v, 1};
          }
          for (std::size_t i = 0; i < count; ++i)
            hin[r][i] = __float2half(static_cast<float>(small(static_cast<int>(r), i + 3)));
          all.local(r).copy_from_host(in[r]);
          x.local(r).copy_from_host(hin[r]);
        }
        block.fill_bytes(cohort::testing::poison_byte);
        y.fill_bytes(cohort::testing::poison_byte);
        cohort::reduce_scatter(peers, std::as_const(all), block, merge_stats{});
        const int root = static_cast<int>(count % members);
        cohort::reduce(peers, std::as_const(x), y, cohort::sum, root,
                       {.accumulate_in_float = wide});
        for (std::size_t r = 0; r < members; ++r) {
          std::vector<stats> got(count);
          std::vector<__half> hgot(count);
          block.local(r).copy_to_host(got);
          y.local(r).copy_to_host(hgot);
          group.synchronize();
          std::size_t wrong = 0, hwrong = 0;
          for (std::size_t i = 0; i < count; ++i) {
            stats want = in[0][r * count + i];
            for (std::size_t q = 1; q < members; ++q)
              want = merge_stats{}(want, in[q][r * count + i]);
            wrong += got[i] == want ? 0 : 1;
            if (static_cast<int>(r) == root) {
              double sum = 0;
              for (std::size_t q = 0; q < members; ++q)
                sum += __half2float(hin[q][i]);
              hwrong += __half2float(hgot[i]) == static_cast<float>(sum) ? 0 : 1;
            } else {
              const __half poison = cohort::testing::poison_value<__half>();
              hwrong += std::memcmp(&hgot[i], &poison, sizeof(__half)) == 0 ? 0 : 1;
            }
          }
          CAPTURE(r);
          CHECK(wrong == 0);
          CHECK(hwrong == 0);
        }
      }
}

TEST_CASE("p2p all_gather in place: each rank's input already in its own slot") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  cohort::p2p_clique peers(group);
  const std::size_t count = 1001;
  cohort::distributed_buffer<float> all(group, cohort::partition::replicated(3 * count, 3));
  std::vector<float> expected(3 * count);
  for (std::size_t r = 0; r < 3; ++r) {
    std::vector<float> v(3 * count, cohort::testing::poison_value<float>());
    for (std::size_t i = 0; i < count; ++i)
      v[r * count + i] = expected[r * count + i] =
          static_cast<float>(small(static_cast<int>(r), i));
    all.local(r).copy_from_host(v);
  }
  // Rank r's input is slot r of its own output.
  std::vector<cuda::std::span<float>> slots, whole;
  for (std::size_t r = 0; r < 3; ++r) {
    slots.push_back(all.shard(r).data.subspan(r * count, count));
    whole.push_back(all.shard(r).data);
  }
  cohort::all_gather(peers, slots, whole);
  for (std::size_t r = 0; r < 3; ++r) {
    std::vector<float> got(3 * count);
    all.local(r).copy_to_host(got);
    group.synchronize();
    CHECK(got == expected);
  }
}
