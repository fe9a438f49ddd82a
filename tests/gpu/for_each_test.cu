// multi_device_for_each over buffers, views of the user's own memory and index ranges (split
// evenly, by a partition or by a balancer) on real and emulated groups of 1 to 4, every element
// type, sizes 0, 1, primes, fewer items than members, and past 2^31.
#include "testing.cuh"
#include "user_memory.cuh"

#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

struct body {
  float mass;
  int hits;
};

struct bump {
  template <class T>
  __device__ void operator()(T& v) const {
    if constexpr (std::is_same_v<T, body>) {
      v.mass = 2.0f * v.mass + 1.0f;
      v.hits += 1;
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(2 * v + 1); // in int: narrowed modulo 2^bits, never out of range
    } else {
      v = static_cast<T>(2.0f * static_cast<float>(v) + 1.0f);
    }
  }
};

template <class T>
std::vector<T> inputs(std::size_t n) {
  std::vector<T> out(n);
  const auto f = cohort::testing::random_values<float>(n, 21);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, body>)
      out[i] = body{f[i], static_cast<int>(i % 1000)};
    else if constexpr (std::is_integral_v<T>)
      out[i] = static_cast<T>(static_cast<int>(f[i] * 1000));
    else
      out[i] = static_cast<T>(f[i]);
  }
  return out;
}

// The host's answer, computed the same way in float and rounded to T.
template <class T>
T reference(T v) {
  if constexpr (std::is_same_v<T, body>)
    return body{2.0f * v.mass + 1.0f, v.hits + 1};
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(2 * v + 1);
  else
    return static_cast<T>(2.0f * static_cast<float>(v) + 1.0f);
}

template <class T>
bool same(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// With an index kernel's tile of 512 (one whole tile; two and one index) and primes.
const std::size_t sizes[] = {0, 1, 2, 3, 5, 512, 1025, 7919, 1000003};

} // namespace

TYPE_TO_STRING(body);
TYPE_TO_STRING(__half);
TYPE_TO_STRING(__nv_bfloat16);
TYPE_TO_STRING(__nv_fp8_e4m3);

TEST_CASE_TEMPLATE("multi_device_for_each applies f to every element once", T, float, double, int,
                   __half, __nv_bfloat16, __nv_fp8_e4m3, std::uint8_t, body) {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u, 4u}) {
    auto group = cohort::testing::group_of(members);
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      const std::vector<T> in = inputs<T>(n);
      cohort::distributed_buffer<T> x(group, n);
      x.copy_from_host(in);
      cohort::multi_device_for_each(group, x, bump{});
      std::vector<T> out(n, cohort::testing::poison_value<T>());
      x.copy_to_host(out);
      group.synchronize();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += !same(out[i], reference(in[i]));
      CHECK(wrong == 0);
    }
  }
}

// Elements of one and two bytes are taken four bytes at a time where a view's shard starts on a
// multiple of four bytes, one by one elsewhere: views at every offset, the bytes either side kept.
TEST_CASE_TEMPLATE("multi_device_for_each over views that start at any byte", T, std::uint8_t,
                   __half, __nv_fp8_e4m3) {
  COHORT_SKIP_UNLESS_GPUS(1);
  constexpr std::size_t margin = 4; // elements kept either side of a shard
  for (std::size_t members : {1u, 2u}) {
    auto group = cohort::testing::group_of(members);
    for (std::size_t offset = 0; offset < 4; ++offset)
      for (std::size_t n :
           {std::size_t(1), std::size_t(3), std::size_t(4099), std::size_t(65541)}) {
        CAPTURE(members);
        CAPTURE(offset);
        CAPTURE(n);
        const std::size_t whole = n + 2 * margin; // each member's allocation
        const std::vector<T> in = inputs<T>(members * whole);
        cohort::distributed_buffer<T> x(group, members * whole); // `whole` a member
        x.copy_from_host(in);
        std::vector<cuda::std::span<T>> spans;
        for (std::size_t k = 0; k < members; ++k)
          spans.push_back(x.shard(k).data.subspan(offset + k % 2, n));
        cohort::multi_device_for_each(group, cohort::distributed_view<T>(group, spans), bump{});
        std::vector<T> out(members * whole, cohort::testing::poison_value<T>());
        x.copy_to_host(out);
        group.synchronize();
        std::size_t wrong = 0;
        for (std::size_t k = 0; k < members; ++k)
          for (std::size_t i = 0; i < whole; ++i) {
            const std::size_t at = k * whole + i, first = offset + k % 2;
            const bool inside = i >= first && i < first + n;
            wrong += !same(out[at], inside ? reference(in[at]) : in[at]);
          }
        CHECK(wrong == 0);
      }
  }
}

namespace {

// Reads an element of a const buffer and writes 2v + 1 at its place in another buffer: the shard
// that holds it is found from its address (a copy of the element would have none of theirs).
struct copy_scaled {
  static constexpr std::size_t most = 4;
  const float* in[most] = {};
  float* out[most] = {};
  std::size_t count[most] = {};
  __device__ void operator()(const float& v) const {
    for (std::size_t k = 0; k < most; ++k)
      if (&v >= in[k] && &v < in[k] + count[k]) out[k][&v - in[k]] = 2.0f * v + 1.0f;
  }
};

} // namespace

TEST_CASE("multi_device_for_each over a const buffer calls f(const T&) on every element once") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u, 4u}) {
    auto group = cohort::testing::group_of(members);
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      const std::vector<float> in = inputs<float>(n);
      cohort::distributed_buffer<float> x(group, n), y(group, n);
      x.copy_from_host(in);
      y.fill_bytes(cohort::testing::poison_byte);
      copy_scaled f;
      REQUIRE(members <= copy_scaled::most);
      for (std::size_t k = 0; k < members; ++k) {
        f.in[k] = x.shard(k).data.data();
        f.out[k] = y.shard(k).data.data();
        f.count[k] = x.shard(k).data.size();
      }
      const cohort::distributed_buffer<float>& read_only = x;
      cohort::multi_device_for_each(group, read_only, f);
      std::vector<float> got(n), kept(n);
      y.copy_to_host(got);
      x.copy_to_host(kept);
      group.synchronize();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += !same(got[i], 2.0f * in[i] + 1.0f) + !same(kept[i], in[i]);
      CHECK(wrong == 0);
    }
  }
}

namespace {

// Writes each element's own index within its shard, found from its address: a copy of the element
// (a register a kernel loaded it into) would have no address in the shard.
struct own_index {
  static constexpr std::size_t most = 4;
  const double* base[most] = {};
  std::size_t count[most] = {};
  __device__ void operator()(double& v) const {
    bool found = false;
    for (std::size_t k = 0; k < most; ++k)
      if (&v >= base[k] && &v < base[k] + count[k]) {
        v = static_cast<double>(&v - base[k]);
        found = true;
      }
    if (!found) v = -1.0;
  }
};

} // namespace

TEST_CASE("multi_device_for_each hands f(T&) the element itself, not a copy") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 3u}) {
    auto group = cohort::testing::group_of(members);
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      cohort::distributed_buffer<double> x(group, n);
      x.fill_bytes(cohort::testing::poison_byte);
      own_index f;
      REQUIRE(members <= own_index::most);
      for (std::size_t k = 0; k < members; ++k) {
        f.base[k] = x.shard(k).data.data();
        f.count[k] = x.shard(k).data.size();
      }
      cohort::multi_device_for_each(group, x, f);
      std::vector<double> got(n);
      x.copy_to_host(got);
      group.synchronize();
      std::size_t wrong = 0;
      for (std::size_t k = 0; k < members; ++k)
        for (std::size_t i = 0; i < x.shard(k).data.size(); ++i)
          wrong += got[x.shard(k).offset + i] != static_cast<double>(i);
      CHECK(wrong == 0);
    }
  }
}

// The three splits of an index range: even, a partition (uneven on three members), a balancer.
enum class index_split { even, partition, balancer };

TEST_CASE("multi_device_for_each over indices(n) sees every global index exactly once") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u, 4u}) {
    auto group = cohort::testing::group_of(members);
    // Every member writes into one buffer on device 0 (peer access where the GPUs are real).
    group.enable_peer_access();
    for (const index_split how : {index_split::even, index_split::partition, index_split::balancer})
      for (std::size_t n : sizes) {
        CAPTURE(members);
        CAPTURE(n);
        CAPTURE(static_cast<int>(how));
        cohort::stream s(cohort::device_ref{0});
        cohort::device_buffer<unsigned> hits(n, s);
        hits.fill_bytes(0);
        s.synchronize();
        unsigned* h = hits.data();
        const auto add = [=] __device__(std::size_t i) {
          atomicAdd(h + i, static_cast<unsigned>(i % 7) + 1);
        };
        // The balancer's split moves between calls: each call still sees every index once.
        const int calls = how == index_split::balancer ? 4 : 1;
        cohort::adaptive_balancer balancer(group);
        for (int call = 0; call < calls; ++call) {
          if (how == index_split::even) {
            cohort::multi_device_for_each(group, cohort::indices(n), add);
          } else if (how == index_split::partition) {
            const auto split = members == 3 ? cohort::partition::weighted(n, {1.0, 2.0, 4.0})
                                            : cohort::partition::even(n, members);
            cohort::multi_device_for_each(group, cohort::indices(n, split), add);
          } else {
            cohort::multi_device_for_each(group, cohort::indices(n, balancer), add);
            group.synchronize(); // lets the balancer read this call's timings on the next
          }
        }
        group.synchronize();
        std::vector<unsigned> out(n);
        hits.copy_to_host(out);
        s.synchronize();
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i)
          wrong += out[i] != calls * (i % 7 + 1);
        CHECK(wrong == 0);
        if (how == index_split::balancer) {
          double total = 0;
          for (double w : balancer.weights())
            total += w;
          CHECK(total == doctest::Approx(1.0));
        }
      }
  }
}

TEST_CASE("multi_device_for_each over views of the user's own memory: f(T&) and f(const T&)") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u, 3u, 4u}) {
    auto group = cohort::testing::group_of(members);
    for (std::size_t n : sizes) {
      CAPTURE(members);
      CAPTURE(n);
      const auto split = members == 3 ? cohort::partition::weighted(n, {1.0, 2.0, 4.0})
                                      : cohort::partition::even(n, members);
      const std::vector<float> in = inputs<float>(n);
      cohort::testing::user_memory<float> xm(group, split), ym(group, split);
      xm.copy_from_host(in);
      ym.poison();
      const cohort::distributed_view<float> x = xm.view();
      cohort::multi_device_for_each(group, x, bump{});
      std::vector<float> bumped = xm.to_host();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += !same(bumped[i], reference(in[i]));
      CHECK(wrong == 0);

      // A view of const elements: f(const T&) reads each in place and writes 2v + 1 elsewhere.
      copy_scaled f;
      REQUIRE(members <= copy_scaled::most);
      for (std::size_t k = 0; k < members; ++k) {
        f.in[k] = xm.spans()[k].data();
        f.out[k] = ym.spans()[k].data();
        f.count[k] = xm.spans()[k].size();
      }
      const cohort::distributed_view<const float> read_only = x;
      cohort::multi_device_for_each(group, read_only, f);
      const std::vector<float> got = ym.to_host(), kept = xm.to_host();
      wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += !same(got[i], 2.0f * bumped[i] + 1.0f) + !same(kept[i], bumped[i]);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("multi_device_for_each over indices(n) reaches indices past 2^31 [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::size_t n = (std::size_t{1} << 31) + 12345;
  cohort::distributed_buffer<unsigned char> x(group, n);
  x.fill_bytes(cohort::testing::poison_byte);
  // Each member writes its shard through the shard's pointer, indexed by global index.
  std::vector<unsigned char*> base(group.size());
  for (std::size_t k = 0; k < group.size(); ++k)
    base[k] = x.shard(k).data.data() - x.shard(k).offset; // global index -> address
  const std::size_t boundary = x.shard(1).offset;
  unsigned char* low = base[0];
  unsigned char* high = base[1];
  cohort::multi_device_for_each(group, cohort::indices(n), [=] __device__(std::size_t i) {
    unsigned char* p = i < boundary ? low : high;
    p[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  });
  std::vector<unsigned char> out(n);
  x.copy_to_host(out);
  group.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += out[i] != static_cast<unsigned char>((i * 2654435761u) >> 13);
  CHECK(wrong == 0);
}

// A launch's blocks are counted in 32 bits: CUB's DeviceFor::Bulk visited only the first 512
// indices past 2^41 and reported success, and from about 2^40 per member its launch failed.
// cohort's index kernel takes pieces of 2^38. Probes at the edges of those pieces and past 2^41
// count their visits: each must be one. Two trillion cheap calls a form, seconds on an H200 with
// the GPU to itself ([serial]); a load case, which the sanitizers leave out. `probes` has a call
// operator that is not const, as CUB allows.
namespace {
struct probes {
  static constexpr int count = 8;
  std::size_t at[count];
  unsigned long long* hits;
  __device__ void operator()(std::size_t i) {
    for (int k = 0; k < count; ++k)
      if (i == at[k]) atomicAdd(hits + k, 1ull);
  }
};
} // namespace

TEST_CASE("index forms visit every index of counts past 2^41 once (a load case) [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const std::size_t piece = std::size_t(1) << 38, n = (std::size_t(1) << 41) + 3;
  const std::size_t at[probes::count] = {
      0, 1, piece - 1, piece, 5 * piece + 7, 8 * piece - 1, 8 * piece, n - 1};
  // Emulated, so that every member reaches the counters on GPU 0.
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::stream s(cohort::device_ref{0});
  for (const bool across_members : {false, true}) {
    CAPTURE(across_members);
    cohort::device_buffer<unsigned long long> hits(probes::count, s);
    hits.fill_bytes(0);
    probes f{{}, hits.data()};
    for (int k = 0; k < probes::count; ++k)
      f.at[k] = at[k];
    if (across_members) { // each member past 2^40
      group.fork(s);
      cohort::multi_device_for_each(group, cohort::indices(n), f);
      group.join(s);
    } else {
      cohort::for_each_n(s, n, f);
    }
    std::vector<unsigned long long> got(probes::count);
    hits.copy_to_host(got);
    s.synchronize();
    CHECK(got == std::vector<unsigned long long>(probes::count, 1));
  }
}

TEST_CASE("the adaptive balancer gives the larger SM share more work") {
  COHORT_SKIP_UNLESS_GPUS(1);
  if (!cohort::sm_partitioning_available(cohort::device_ref{0})) {
    cohort::testing::skip("needs green contexts to make unequal logical devices");
    return;
  }
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, std::vector<double>{1.0, 3.0});
  cohort::adaptive_balancer balancer(group, 0.7);
  const std::size_t n = 1 << 22;
  cohort::stream s(cohort::device_ref{0});
  cohort::device_buffer<float> out(n, s);
  float* o = out.data();
  for (int call = 0; call < 12; ++call) {
    // Compute-bound work, so speed follows the SM share.
    cohort::multi_device_for_each(group, cohort::indices(n, balancer),
                                  [=] __device__(std::size_t i) {
                                    float v = static_cast<float>(i);
                                    for (int k = 0; k < 200; ++k)
                                      v = sinf(v) + 1.0f;
                                    o[i] = v;
                                  });
    group.synchronize(); // lets the balancer read the timings on the next call
  }
  // Direction, not amount: member 1 (three times the SMs) ends with more than the even half it
  // started from, so the next call gives it more indices. How close the weights come to the SM
  // shares depends on the machine's timing, which is the benchmarks' business.
  const auto& w = balancer.weights();
  CAPTURE(w[0]);
  CAPTURE(w[1]);
  CHECK(w[1] > 0.5);
  CHECK(w[1] > w[0]);
  const cohort::partition next = balancer.next_split(group, n);
  CHECK(next.count(1) > next.count(0));
  const double expected =
      static_cast<double>(group.sm_count(1)) / (group.sm_count(0) + group.sm_count(1));
  // Capability weights see the same split up front.
  const auto cap = cohort::by_capability(group);
  CHECK(cap[1] / (cap[0] + cap[1]) == doctest::Approx(expected).epsilon(0.02));
}

TEST_CASE("an error an earlier CUDA call left recorded is refused before any member's work") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  cohort::distributed_buffer<int> x(group, 3001);
  x.fill_bytes(0);
  // CUB reports the thread's recorded error as its launch's: the call used to throw after member
  // 0's kernel was enqueued, so a retry added 2 to shard 0.
  REQUIRE(cudaSetDevice(1 << 20) == cudaErrorInvalidDevice);
  CHECK_THROWS_WITH_AS(cohort::multi_device_for_each(group, x, [] __device__(int& v) { v += 1; }),
                       doctest::Contains("left recorded"), cohort::cuda_error);
  CHECK(cudaPeekAtLastError() == cudaSuccess); // reported once, then cleared
  cohort::multi_device_for_each(group, x, [] __device__(int& v) { v += 1; });
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < group.size(); ++r)
    for (int v : cohort::testing::shard_to_host(x, r))
      wrong += v != 1;
  CHECK(wrong == 0);
}

// for_each_n hands its work to CUB too, which would report the error as its own launch's.
TEST_CASE("for_each_n refuses an error an earlier CUDA call left recorded, by name") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(cohort::device_ref{0});
  cohort::device_buffer<int> x(1009, s);
  x.fill_bytes(0);
  int* const data = x.data();
  REQUIRE(cudaSetDevice(1 << 20) == cudaErrorInvalidDevice);
  CHECK_THROWS_WITH_AS(
      cohort::for_each_n(s, 1009, [data] __device__(std::size_t i) { data[i] += 1; }),
      doctest::Contains("for_each_n (an error an earlier call left recorded)"), cohort::cuda_error);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  cohort::for_each_n(s, 1009, [data] __device__(std::size_t i) { data[i] += 1; });
  std::vector<int> got(1009);
  x.copy_to_host(got);
  s.synchronize();
  CHECK(std::count(got.begin(), got.end(), 1) == 1009);
}
