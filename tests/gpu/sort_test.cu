// Multi-device sorts against std::stable_sort on the host, on groups of 1, 2, 3 and 5: sizes 0,
// 1, fewer than the members, primes and 2^20 + 3; keys all equal, sorted, reversed, few distinct
// and random; uint32, uint64, int, float, double, __half and __nv_bfloat16 keys in CUB's order
// (-0.0 equal to +0.0, NaNs by sign at the ends), descending, a comparator for a user type, values
// following their keys stably; the same staged through host memory in several runs and pieces per
// member, forced and as the fallback for too little device memory; distributed_views of the
// user's own cudaMalloc memory; outputs poisoned first; bad arguments refused, and too little
// memory reported as out of memory. A group of one (CUB's sort alone): one- and two-byte keys too
// (whose passes end in the scratch), sizes around CUB's single tile; and a loop of sorts that
// allocates nothing and makes no event once warm.
#include "scan_sort_checks.cuh"
#include "steady_state.cuh"

#include <doctest/doctest.h>

#include <cuda/std/span>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using cohort::testing::first_difference;
using cohort::testing::read_back;

const std::size_t sizes[] = {0, 1, 2, 4, 7919, (std::size_t(1) << 20) + 3};
const std::size_t group_sizes[] = {1, 2, 3, 5};

enum class pattern { random, equal, sorted, reversed, few };
const pattern patterns[] = {pattern::random, pattern::equal, pattern::sorted, pattern::reversed,
                            pattern::few};

// The order CUB's radix sort gives, written without its bit tricks: negative NaNs first, then
// numbers by value (-0.0 equal to +0.0), then positive NaNs.
template <class K>
double host_value(K k) {
  if constexpr (std::is_same_v<K, __half>)
    return double(__half2float(k));
  else if constexpr (std::is_same_v<K, __nv_bfloat16>)
    return double(__bfloat162float(k));
  else
    return double(k);
}
template <class K>
bool host_less(K a, K b) {
  if constexpr (std::is_integral_v<K>) {
    return a < b;
  } else {
    auto place = [](double v) { return std::isnan(v) ? (std::signbit(v) ? 0 : 2) : 1; };
    const double x = host_value(a), y = host_value(b);
    if (place(x) != place(y)) return place(x) < place(y);
    return place(x) == 1 && x < y;
  }
}

template <class K>
K key_from(double v) {
  if constexpr (std::is_same_v<K, __half>)
    return __float2half(float(v));
  else if constexpr (std::is_same_v<K, __nv_bfloat16>)
    return __float2bfloat16(float(v));
  else
    return static_cast<K>(v);
}

// Keys of `kind`; floating-point ones with signed zeros, infinities and NaNs of both signs mixed
// in where the pattern has room.
template <class K>
std::vector<K> make_keys(std::size_t n, pattern kind, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::vector<K> keys(n);
  const double top = std::is_integral_v<K> ? double(std::numeric_limits<K>::max()) : 1000.0;
  const double bottom = std::is_integral_v<K> ? double(std::numeric_limits<K>::lowest()) : -1000.0;
  std::uniform_real_distribution<double> pick(bottom, top);
  for (std::size_t i = 0; i < n; ++i) {
    switch (kind) {
    case pattern::random:
      if constexpr (std::is_integral_v<K>)
        keys[i] = static_cast<K>(engine()); // every bit pattern, both signs
      else
        keys[i] = key_from<K>(pick(engine));
      break;
    case pattern::equal:
      keys[i] = key_from<K>(std::is_integral_v<K> ? 42 : 0.5);
      break;
    case pattern::sorted:
    case pattern::reversed: {
      const double t =
          n < 2 ? 0.0 : double(kind == pattern::sorted ? i : n - 1 - i) / double(n - 1);
      // few enough steps for __half to tell them apart now and then, and ties elsewhere
      keys[i] = key_from<K>(bottom / 2 + t * (top / 2 - bottom / 2));
      break;
    }
    case pattern::few:
      keys[i] = key_from<K>(double(engine() % 4) -
                            (std::is_signed_v<K> || !std::is_integral_v<K> ? 1 : 0));
      break;
    }
  }
  if constexpr (!std::is_integral_v<K>) {
    if (kind == pattern::random || kind == pattern::few) {
      const double specials[] = {0.0,
                                 -0.0,
                                 std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::quiet_NaN(),
                                 -std::numeric_limits<double>::quiet_NaN()};
      for (std::size_t i = 0; i < n / 50; ++i)
        keys[engine() % n] = key_from<K>(specials[i % 6]);
    }
  }
  return keys;
}

// One doctest subcase per group size, in it one per key pattern, and in that one per size, so that
// a sanitizer can run each in its own process (--subcase='members: 2,pattern: few,n: 1048579':
// name every level, or 'n: *'; doctest filters each level, and a filter naming two runs nothing):
// racecheck did not finish a staged case in 550 s.
std::string members_subcase(std::size_t members) {
  return "members: " + std::to_string(members);
}
std::string size_subcase(std::size_t n) {
  return "n: " + std::to_string(n);
}
std::string pattern_subcase(pattern kind) {
  const char* names[] = {"random", "equal", "sorted", "reversed", "few"};
  return std::string("pattern: ") + names[int(kind)];
}

// Sorts keys (and their input positions as values) and compares with std::stable_sort: keys bit
// for bit, and positions (ties in input order).
template <class K, bool Descending, bool WithValues>
void check_one_sort(std::size_t members, std::size_t n, pattern kind, unsigned seed) {
  CAPTURE(members);
  CAPTURE(n);
  CAPTURE(int(kind));
  auto group = cohort::testing::group_of(members);
  const std::vector<K> keys = make_keys<K>(n, kind, seed + unsigned(n));
  std::vector<std::uint32_t> order(n);
  for (std::size_t i = 0; i < n; ++i)
    order[i] = std::uint32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return Descending ? host_less(keys[b], keys[a]) : host_less(keys[a], keys[b]);
  });
  std::vector<K> expected(n);
  for (std::size_t i = 0; i < n; ++i)
    expected[i] = keys[order[i]];

  cohort::distributed_buffer<K> k(group, n);
  k.copy_from_host(keys);
  if constexpr (WithValues) {
    // The values are the sort's input (it sorts in place): each starts as its own position, so
    // values the sort did not move stay the identity, which the stable order differs from
    // wherever the keys were not already sorted. (A poison filled here would be overwritten by the
    // positions before the sort, and checked by nothing.)
    cohort::distributed_buffer<std::uint32_t> v(group, k.split());
    std::vector<std::uint32_t> positions(n);
    for (std::size_t i = 0; i < n; ++i)
      positions[i] = std::uint32_t(i);
    v.copy_from_host(positions);
    if constexpr (Descending)
      cohort::multi_device_sort_by_key(group, k, v, cohort::descending);
    else
      cohort::multi_device_sort_by_key(group, k, v);
    CHECK(first_difference(read_back(group, v), order) == n);
  } else {
    if constexpr (Descending)
      cohort::multi_device_sort(group, k, cohort::descending);
    else
      cohort::multi_device_sort(group, k);
  }
  CHECK(first_difference(read_back(group, k), expected) == n);
  CHECK(k.split().counts() == cohort::partition::even(n, members).counts());
}

// check_one_sort on every group size, pattern and size.
template <class K, bool Descending, bool WithValues>
void check_sort(unsigned seed, std::span<const std::size_t> sizes_checked = sizes,
                std::span<const pattern> patterns_checked = patterns) {
  for (std::size_t members : group_sizes)
    SUBCASE(members_subcase(members).c_str()) {
      for (pattern kind : patterns_checked)
        SUBCASE(pattern_subcase(kind).c_str()) {
          for (std::size_t n : sizes_checked)
            SUBCASE(size_subcase(n).c_str()) {
              check_one_sort<K, Descending, WithValues>(members, n, kind, seed);
            }
        }
    }
}

struct record {
  int key;
  float payload;
};
struct by_key {
  __device__ bool operator()(const record& a, const record& b) const { return a.key < b.key; }
};

// A comparator's sort of a user type against std::stable_sort: keys with values, then keys alone
// on a partition with an empty member.
void check_one_comparator_sort(std::size_t members, std::size_t n) {
  CAPTURE(members);
  CAPTURE(n);
  auto group = cohort::testing::group_of(members);
  std::mt19937 engine{static_cast<unsigned>(n)};
  std::vector<record> in(n);
  std::vector<std::uint64_t> tags(n);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = {int(engine() % 100) - 50, float(i)};
    tags[i] = i * 3;
  }
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return in[a].key < in[b].key; });
  cohort::distributed_buffer<record> keys(group, n);
  cohort::distributed_buffer<std::uint64_t> values(group, keys.split());
  keys.copy_from_host(in);
  values.copy_from_host(tags);
  cohort::multi_device_sort_by_key(group, keys, values, by_key{});
  const auto out = read_back(group, keys);
  const auto out_tags = read_back(group, values);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (out[i].key != in[order[i]].key || out[i].payload != float(order[i]) ||
        out_tags[i] != order[i] * 3)
      ++wrong;
  CHECK(wrong == 0);

  // Keys alone, on a partition with an empty member where there are several.
  std::vector<std::size_t> counts(members, n / members);
  counts[0] += n % members;
  if (members > 1) counts[0] += counts[1], counts[1] = 0;
  cohort::distributed_buffer<record> uneven(group, cohort::partition::from_counts(counts));
  uneven.copy_from_host(in);
  cohort::multi_device_sort(group, uneven, by_key{});
  const auto sorted = read_back(group, uneven);
  wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (sorted[i].payload != float(order[i])) ++wrong;
  CHECK(wrong == 0);
  CHECK(uneven.split().counts() == counts);
}

void check_comparator_sort() {
  for (std::size_t members : group_sizes)
    SUBCASE(members_subcase(members).c_str()) {
      for (std::size_t n : {std::size_t(0), std::size_t(3), std::size_t(7919), std::size_t(300007)})
        SUBCASE(size_subcase(n).c_str()) {
          check_one_comparator_sort(members, n);
        }
    }
}

// Sets how sorts on this thread run (detail::sort_tuning_for_tests) for one scope.
struct sort_tuning_scope {
  cohort::detail::sort_tuning saved = cohort::detail::sort_tuning_for_tests;
  explicit sort_tuning_scope(cohort::detail::sort_tuning tuning) {
    cohort::detail::sort_tuning_for_tests = tuning;
  }
  ~sort_tuning_scope() { cohort::detail::sort_tuning_for_tests = saved; }
};

// Device memory a [serial] case takes from the sort (cudaMalloc, outside the pool), freed at the
// end of the case.
struct ballast {
  void* p = nullptr;
  ballast() = default;
  ballast(const ballast&) = delete;
  ballast& operator=(const ballast&) = delete;
  ~ballast() { cudaFree(p); }
};

} // namespace

TEST_CASE("uint32 keys sort ascending") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<std::uint32_t, false, false>(1);
}

TEST_CASE("uint64 keys sort ascending with their values, stably") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<std::uint64_t, false, true>(2);
}

TEST_CASE("int keys sort descending") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<int, true, false>(3);
}

TEST_CASE("float keys sort in CUB's order: -0.0 equals +0.0, NaNs by sign at the ends") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<float, false, false>(4);
}

TEST_CASE("float keys sort descending with their values, stably") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<float, true, true>(5);
}

TEST_CASE("double keys sort ascending") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<double, false, false>(6);
}

TEST_CASE("__half keys sort ascending with their values, stably") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<__half, false, true>(7);
}

TEST_CASE("__nv_bfloat16 keys sort descending") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_sort<__nv_bfloat16, true, false>(8);
}

TEST_CASE("a comparator sorts a user type stably, values following") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_comparator_sort();
}

TEST_CASE("sorts refuse mismatched values and a capture, and report scratch that cannot fit as out "
          "of memory [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::distributed_buffer<std::uint32_t> keys(group, 100);
  cohort::distributed_buffer<std::uint32_t> values(group, cohort::partition::weighted(100, {1, 3}));
  // Keys in descending order, which any sort would move, and poisoned values: each refused call
  // below must leave both as they are (checked once the streams are done), where one that
  // enqueued some of its work before refusing would change them.
  std::vector<std::uint32_t> descending(100);
  for (std::size_t i = 0; i < descending.size(); ++i)
    descending[i] = static_cast<std::uint32_t>(1000 - 7 * i);
  keys.copy_from_host(descending);
  values.fill_bytes(cohort::testing::poison_byte);
  const auto unchanged = [&] {
    CHECK(first_difference(read_back(group, keys), descending) == descending.size());
    const std::vector<std::uint32_t> poisoned(values.size(),
                                              cohort::testing::poison_value<std::uint32_t>());
    CHECK(first_difference(read_back(group, values), poisoned) == poisoned.size());
  };
  CHECK_THROWS_AS(cohort::multi_device_sort_by_key(group, keys, values), std::invalid_argument);
  // Values that are the keys' own memory, through a view.
  try {
    cohort::multi_device_sort_by_key(group, keys, keys.view());
    FAIL("the sort should have refused");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("shares memory") != std::string::npos);
  }
  unchanged();

  CHECK_THROWS_AS(
      (void)cohort::group_graph::capture(group, [&] { cohort::multi_device_sort(group, keys); }),
      std::logic_error);
  unchanged();

  // A single-member group on GPU 0 with a shard of 60% of the free memory, kept on the device: the
  // sort needs as much again, and says so as out of memory, naming the member, the device and the
  // bytes, before enqueuing anything. (By itself it would stage the runs through host memory
  // instead: the case below.)
  const sort_tuning_scope on_devices({cohort::detail::sort_staging::on_devices, 0});
  auto one = cohort::device_group::emulated(cohort::device_ref{0}, 1);
  const std::size_t free = cohort::memory_info(cohort::device_ref{0}).free;
  cohort::distributed_buffer<std::uint64_t> big(one, free / 10 * 6 / sizeof(std::uint64_t));
  // Descending, so that a sort that started would move the first and last elements, which are
  // read back after the refusal (the whole shard is too large to read back).
  const std::size_t count = big.size();
  std::uint64_t* const at = big.shard(0).data.data();
  cohort::multi_device_for_each(one, cohort::indices(count),
                                [=] __device__(std::size_t i) { at[i] = count - i; });
  one.synchronize();
  try {
    cohort::multi_device_sort(one, big);
    FAIL("the sort should have refused");
  } catch (const cohort::cuda_error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(e.device() == 0);
    CHECK(what.find("multi_device_sort") != std::string::npos);
    CHECK(what.find("member 0 (device 0)") != std::string::npos);
    CHECK(what.find("bytes can be allocated there") != std::string::npos);
  }
  one.synchronize();
  const std::size_t ends = std::min<std::size_t>(4096, count / 2);
  std::vector<std::uint64_t> first(ends), last(ends);
  {
    cohort::scoped_device on(cohort::device_ref{0});
    REQUIRE(cudaMemcpy(first.data(), at, ends * sizeof(std::uint64_t), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    REQUIRE(cudaMemcpy(last.data(), at + (count - ends), ends * sizeof(std::uint64_t),
                       cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  std::size_t moved = 0;
  for (std::size_t i = 0; i < ends; ++i)
    moved += (first[i] != count - i) + (last[i] != ends - i);
  CHECK(moved == 0);
}

// Every call makes current the device it needs: a sort over GPUs 0 and 1 with GPU 1 current (the
// end of a user's set-up loop) reads member 0's split table back with GPU 0 current. Before, that
// copy of GPU 0's stream-ordered memory ran with the caller's GPU 1 current. Staged in blocks too:
// on the devices the sort grants GPU 1 access to GPU 0's pool, which hid the fault.
TEST_CASE("a sort with another GPU current sorts right and leaves that GPU current") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group({cohort::device_ref{0}, cohort::device_ref{1}});
  const std::size_t n = 7919;
  for (const bool staged : {true, false}) { // staged first: the other grants pool access
    CAPTURE(staged);
    const sort_tuning_scope tuning({staged ? cohort::detail::sort_staging::through_host
                                           : cohort::detail::sort_staging::on_devices,
                                    staged ? std::size_t{1000} : 0});
    auto in = make_keys<std::uint32_t>(n, pattern::random, 5);
    cohort::distributed_buffer<std::uint32_t> keys(group, n);
    keys.copy_from_host(in);
    group.synchronize();
    {
      cohort::scoped_device user(cohort::device_ref{1});
      cohort::multi_device_sort(group, keys);
      int current = -1;
      cohort::check_cuda(cudaGetDevice(&current), "cudaGetDevice");
      CHECK(current == 1);
    }
    const auto out = read_back(group, keys);
    std::stable_sort(in.begin(), in.end());
    CHECK(first_difference(out, in) == n);
  }
}

// The radix sort passes the keys between the shard and one scratch copy (CUB's DoubleBuffer form),
// so a member needs about its keys again in scratch, not twice them: the peak the devices' memory
// pools saw in use during the sort, above what they held before, stays under 1.25 times the keys
// on that device (members of an emulated group add up). Before, CUB's copy of the const input as
// temporary storage made it about twice the keys. The pools are this process's own, so other
// processes on the GPU do not change the figure. (A first form of this test left 1.5 times the
// keys free with a cudaMalloc ballast: the pool's rounding of each allocation, 64 MiB reserved
// for 33 MiB asked on an H200, made the second member's scratch fail to fit.)
TEST_CASE("a radix sort needs about its keys again in scratch, not twice them") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::size_t n = std::size_t(1) << 24;
  const std::vector<std::uint32_t> keys = make_keys<std::uint32_t>(n, pattern::random, 11);
  std::vector<std::uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  cohort::distributed_buffer<std::uint32_t> k(group, n);
  k.copy_from_host(keys);
  group.synchronize();

  struct pool_use {
    int device;
    cudaMemPool_t pool;
    unsigned long long before;
    std::size_t keys;
  };
  std::vector<pool_use> pools;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const int device = group.device(i).get();
    auto same = [&](const pool_use& p) { return p.device == device; };
    auto found = std::find_if(pools.begin(), pools.end(), same);
    if (found == pools.end()) {
      pool_use p{device, nullptr, 0, 0};
      REQUIRE(cudaDeviceGetMemPool(&p.pool, device) == cudaSuccess);
      REQUIRE(cudaMemPoolGetAttribute(p.pool, cudaMemPoolAttrUsedMemCurrent, &p.before) ==
              cudaSuccess);
      unsigned long long zero = 0; // the high-water mark from now on
      REQUIRE(cudaMemPoolSetAttribute(p.pool, cudaMemPoolAttrUsedMemHigh, &zero) == cudaSuccess);
      pools.push_back(p);
      found = pools.end() - 1;
    }
    found->keys += k.shard(i).data.size_bytes();
  }
  cohort::multi_device_sort(group, k);
  group.synchronize();
  CHECK(first_difference(read_back(group, k), expected) == n);
  for (const pool_use& p : pools) {
    unsigned long long high = 0;
    REQUIRE(cudaMemPoolGetAttribute(p.pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess);
    CAPTURE(p.device);
    CAPTURE(p.keys);
    CAPTURE(high - p.before);
    CHECK(high > p.before);                                  // the scratch came from this pool
    CHECK(double(high - p.before) <= 1.25 * double(p.keys)); // about the keys again, not twice
  }
}

// The form for members without a peer path, or with too little memory for their sorted shards:
// each member sorts its shard in chunks, stages the sorted runs in host memory, and fills its
// output piece by piece. Forced here, in blocks of at most 1000 elements, so that members have
// several runs and pieces each (and the largest inputs the most runs the sort takes, 64). Random
// keys, and few distinct ones (ties across runs): every size but 2 (like 1 and 4 here). One case
// per key type, so that a sanitizer can take them apart (racecheck has not finished them in one).
const cohort::detail::sort_tuning staged_in_blocks{cohort::detail::sort_staging::through_host,
                                                   1000};
const std::size_t staged_sizes[] = {0, 1, 4, 7919, (std::size_t(1) << 20) + 3};
const pattern staged_patterns[] = {pattern::random, pattern::few};

TEST_CASE("sorts staged through host memory match the host: uint32 keys, in runs and pieces") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const sort_tuning_scope staged(staged_in_blocks);
  check_sort<std::uint32_t, false, false>(21, staged_sizes, staged_patterns);
}

TEST_CASE("sorts staged through host memory match the host: uint64 keys with values") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const sort_tuning_scope staged(staged_in_blocks);
  check_sort<std::uint64_t, false, true>(22, staged_sizes, staged_patterns);
}

TEST_CASE("sorts staged through host memory match the host: float keys descending with values") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const sort_tuning_scope staged(staged_in_blocks);
  check_sort<float, true, true>(23, staged_sizes, staged_patterns);
}

TEST_CASE("sorts staged through host memory match the host: a comparator") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const sort_tuning_scope staged(staged_in_blocks);
  check_comparator_sort();
}

// Radix keys with values on an uneven partition whose member 0 (the split kernel's) is empty.
TEST_CASE("sorts staged through host memory match the host: values on a partition whose member 0 "
          "is empty") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const sort_tuning_scope staged(staged_in_blocks);
  auto group = cohort::testing::group_of(3);
  const std::size_t n = 7919;
  const std::vector<std::uint32_t> keys = make_keys<std::uint32_t>(n, pattern::few, 24);
  std::vector<std::uint32_t> positions(n);
  for (std::size_t i = 0; i < n; ++i)
    positions[i] = std::uint32_t(i);
  std::vector<std::uint32_t> order = positions;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  const auto split = cohort::partition::from_counts({0, 2000, n - 2000});
  cohort::distributed_buffer<std::uint32_t> k(group, split), v(group, split);
  k.copy_from_host(keys);
  v.copy_from_host(positions);
  cohort::multi_device_sort_by_key(group, k, v);
  CHECK(first_difference(read_back(group, v), order) == n);
  CHECK(k.split().counts() == split.counts());
}

// Without forcing: a single-member group whose device has about 0.75 times its keys free (a
// ballast takes the rest) sorts them all the same, staged through host memory, and its memory
// pool's peak during the sort stays below the keys (the sort on the device alone needs them
// again). Before, it refused with "needs ... bytes of scratch".
TEST_CASE("a sort whose scratch cannot fit on its device is staged through host memory [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto one = cohort::device_group::emulated(cohort::device_ref{0}, 1);
  const std::size_t n = std::size_t(1) << 26;
  const std::size_t key_bytes = n * sizeof(std::uint32_t);
  const std::vector<std::uint32_t> keys = make_keys<std::uint32_t>(n, pattern::random, 31);
  std::vector<std::uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  cohort::distributed_buffer<std::uint32_t> k(one, n);
  k.copy_from_host(keys);
  one.synchronize();

  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, 0) == cudaSuccess);
  REQUIRE(cudaMemPoolTrimTo(pool, 0) == cudaSuccess); // what the pool holds unused, back
  const std::size_t free = cohort::memory_info(cohort::device_ref{0}).free;
  REQUIRE(free > key_bytes);
  ballast taken;
  REQUIRE(cudaMalloc(&taken.p, free - key_bytes / 4 * 3) == cudaSuccess);
  unsigned long long before = 0, zero = 0, high = 0;
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &before) == cudaSuccess);
  REQUIRE(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero) == cudaSuccess);

  cohort::multi_device_sort(one, k);
  one.synchronize();
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess);
  CAPTURE(high - before);
  CHECK(high > before);
  CHECK(high - before < key_bytes);
  CHECK(first_difference(read_back(one, k), expected) == n);
}

// Memory taken after the sort checked its scratch fits and before it allocates it (by another
// process, or by the driver for kernels it loads on first use: on one H200 the case above lost
// about 65 MiB that way and failed with out of memory): the sort plans again, staged
// and smaller, and sorts. Before, the allocation's out-of-memory cuda_error was thrown.
TEST_CASE(
    "a sort whose memory is taken between its check and its allocation plans again [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto one = cohort::device_group::emulated(cohort::device_ref{0}, 1);
  const std::size_t n = (std::size_t(1) << 24) + 3;
  const std::vector<std::uint32_t> keys = make_keys<std::uint32_t>(n, pattern::random, 37);
  std::vector<std::uint32_t> expected = keys;
  std::sort(expected.begin(), expected.end());
  cohort::distributed_buffer<std::uint32_t> k(one, n);
  k.copy_from_host(keys);
  one.synchronize();

  ballast taken;
  std::vector<std::vector<std::size_t>> plans; // each plan's scratch, as the sort asked for it
  std::size_t free_at_last_plan = 0;
  cohort::detail::sort_tuning tuning;
  tuning.before_scratch = [&](const std::vector<std::size_t>& need) {
    plans.push_back(need);
    free_at_last_plan = cohort::memory_info(cohort::device_ref{0}).free;
    if (taken.p != nullptr) return;
    // Leave half of the first plan's scratch (the sort on the devices: the keys again, and CUB's
    // storage): the staged sort's smaller blocks fit in it.
    cudaMemPool_t pool = nullptr;
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaDeviceGetMemPool(&pool, 0) == cudaSuccess);
    REQUIRE(cudaMemPoolTrimTo(pool, 0) == cudaSuccess);
    const std::size_t free = cohort::memory_info(cohort::device_ref{0}).free;
    REQUIRE(free > need[0]);
    REQUIRE(cudaMalloc(&taken.p, free - need[0] / 2) == cudaSuccess);
  };
  {
    sort_tuning_scope scope(tuning);
    cohort::multi_device_sort(one, k);
    one.synchronize();
  }
  REQUIRE(plans.size() >= 2);
  CHECK(plans.front()[0] >= n * sizeof(std::uint32_t)); // first on the device: the keys again
  // Last, staged, smaller, and within what was free when it was made. Not "at most half the
  // first": under a sanitizer the driver's own use moves free memory by a few KiB.
  CHECK(plans.back()[0] < plans.front()[0]);
  CHECK(plans.back()[0] <= free_at_last_plan);
  CHECK(first_difference(read_back(one, k), expected) == n);
}

namespace {

// The user's own memory, one cudaMalloc per member on its device, freed at the end.
template <class T>
struct user_memory {
  std::vector<T*> pointers;
  std::vector<cuda::std::span<T>> spans;
  const cohort::device_group& group;

  user_memory(const cohort::device_group& g, const cohort::partition& split)
      : group(g) {
    for (std::size_t i = 0; i < group.size(); ++i) {
      cohort::scoped_device on(group.device(i));
      T* p = nullptr;
      if (split.count(i) > 0) REQUIRE(cudaMalloc(&p, split.count(i) * sizeof(T)) == cudaSuccess);
      pointers.push_back(p);
      spans.emplace_back(p, split.count(i));
    }
  }
  user_memory(const user_memory&) = delete;
  user_memory& operator=(const user_memory&) = delete;
  ~user_memory() {
    for (std::size_t i = 0; i < pointers.size(); ++i) {
      cohort::scoped_device on(group.device(i));
      cudaFree(pointers[i]);
    }
  }

  // Synchronous both ways: the copies in finished on their devices before the sort's streams run,
  // and the sort finished (group.synchronize()) before the copies out.
  void fill(const std::vector<T>& host) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      cohort::scoped_device on(group.device(i));
      REQUIRE(cudaMemcpy(spans[i].data(), host.data() + at, spans[i].size_bytes(),
                         cudaMemcpyHostToDevice) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      at += spans[i].size();
    }
  }
  std::vector<T> read() const {
    group.synchronize();
    std::vector<T> host;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      cohort::scoped_device on(group.device(i));
      std::vector<T> part(spans[i].size());
      REQUIRE(cudaMemcpy(part.data(), spans[i].data(), spans[i].size_bytes(),
                         cudaMemcpyDeviceToHost) == cudaSuccess);
      host.insert(host.end(), part.begin(), part.end());
    }
    return host;
  }
};

} // namespace

// distributed_views of the user's cudaMalloc memory, on an uneven partition, sorted (keys alone,
// and keys with their positions as values) on the devices where the group can, and staged in
// blocks, against std::stable_sort of random keys: all distinct nearly, and few distinct (ties
// across members and runs, so the values show stability). A view passed as a temporary, and a
// view of keys with a buffer of values, too.
TEST_CASE("sorts of distributed_views over the user's cudaMalloc memory match the host") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const std::size_t n = 100003;
  for (std::size_t members : {std::size_t(1), std::size_t(2), std::size_t(3)})
    SUBCASE(members_subcase(members).c_str()) {
      for (const bool staged : {false, true})
        SUBCASE(staged ? "staged in blocks" : "as planned") {
          for (pattern kind : {pattern::random, pattern::few})
            SUBCASE(pattern_subcase(kind).c_str()) {
              const sort_tuning_scope tuning(staged ? staged_in_blocks
                                                    : cohort::detail::sort_tuning{});
              auto group = cohort::testing::group_of(members);
              std::vector<std::size_t> counts(members);
              std::size_t given = 0;
              for (std::size_t i = 0; i < members; ++i) // member i holds about i + 1 shares
                given += counts[i] = n * (i + 1) / (members * (members + 1) / 2);
              counts.back() += n - given;
              const auto split = cohort::partition::from_counts(counts);

              const std::vector<std::uint32_t> keys =
                  make_keys<std::uint32_t>(n, kind, 41 + unsigned(members));
              std::vector<std::uint32_t> order(n);
              for (std::size_t i = 0; i < n; ++i)
                order[i] = std::uint32_t(i);
              const std::vector<std::uint32_t> positions = order;
              std::stable_sort(order.begin(), order.end(),
                               [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
              std::vector<std::uint32_t> expected(n);
              for (std::size_t i = 0; i < n; ++i)
                expected[i] = keys[order[i]];

              // Keys alone, through a temporary view.
              user_memory<std::uint32_t> k(group, split);
              k.fill(keys);
              cohort::multi_device_sort(group,
                                        cohort::distributed_view<std::uint32_t>(group, k.spans));
              CHECK(first_difference(k.read(), expected) == n);

              // Keys with values, both views (the values' a const one: a view is shallow).
              user_memory<std::uint32_t> v(group, split);
              k.fill(keys);
              v.fill(positions);
              cohort::distributed_view<std::uint32_t> key_view(group, k.spans);
              const cohort::distributed_view<std::uint32_t> value_view(group, v.spans);
              cohort::multi_device_sort_by_key(group, key_view, value_view);
              CHECK(first_difference(k.read(), expected) == n);
              CHECK(first_difference(v.read(), order) == n);
              CHECK(key_view.split().counts() == counts);

              // A view of keys with a buffer of values on the same partition.
              cohort::distributed_buffer<std::uint32_t> b(group, split);
              b.fill_bytes(cohort::testing::poison_byte);
              b.copy_from_host(positions);
              k.fill(keys);
              cohort::multi_device_sort_by_key(group, key_view, b);
              CHECK(first_difference(k.read(), expected) == n);
              CHECK(first_difference(read_back(group, b), order) == n);
            }
        }
    }
}

namespace {

// A group of one sorts its shard with CUB alone; sizes around CUB's single tile and its passes.
// One-byte keys take one pass of the radix sort and a single tile one kernel: each ends in the
// scratch, and the result is copied back into the shard.
const std::size_t one_member_sizes[] = {0, 1, 2, 3, 4, 7919, 1000003, (std::size_t(1) << 20) + 3};
const pattern one_member_patterns[] = {pattern::random, pattern::few, pattern::reversed};

template <class K>
void check_one_member_sorts(unsigned seed) {
  for (pattern kind : one_member_patterns)
    for (std::size_t n : one_member_sizes) {
      check_one_sort<K, false, false>(1, n, kind, seed);
      check_one_sort<K, true, false>(1, n, kind, seed + 1);
      check_one_sort<K, false, true>(1, n, kind, seed + 2);
      check_one_sort<K, true, true>(1, n, kind, seed + 3);
    }
}

} // namespace

TEST_CASE("a group of one sorts as CUB does: one- and two-byte and integer keys") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_one_member_sorts<std::uint8_t>(201);
  check_one_member_sorts<std::int8_t>(205);
  check_one_member_sorts<std::uint16_t>(209);
  check_one_member_sorts<std::int32_t>(213);
  check_one_member_sorts<std::uint32_t>(217);
  check_one_member_sorts<std::uint64_t>(221);
}

TEST_CASE("a group of one sorts as CUB does: floating-point keys") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_one_member_sorts<float>(225);
  check_one_member_sorts<double>(229);
  check_one_member_sorts<__half>(233);
  check_one_member_sorts<__nv_bfloat16>(237);
}

TEST_CASE("a group of one sorts a user type by a comparator, stably, in place") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t n : one_member_sizes)
    check_one_comparator_sort(1, n);
}

// Once warm, a loop of sorts on the devices allocates no device memory and makes no event: each
// member's scratch (its sorted run, where the others read it) and events are the group's, kept
// between calls. (A sort staged through host memory takes its page-locked memory per call.)
TEST_CASE("sorts in a loop allocate nothing and make no events once warm") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t members : {1u, 2u}) {
    CAPTURE(members);
    auto group = cohort::testing::group_of(members);
    if (!group.enable_peer_access()) {
      cohort::testing::skip("members without a peer path sort through host memory");
      continue;
    }
    const std::size_t n = (std::size_t(1) << 20) + 3;
    const std::vector<std::uint32_t> keys = make_keys<std::uint32_t>(n, pattern::random, 241);
    std::vector<std::uint32_t> expected = keys;
    std::sort(expected.begin(), expected.end());
    cohort::distributed_buffer<std::uint32_t> k(group, n), v(group, k.split());
    cohort::distributed_buffer<record> r(group, 100003);
    k.copy_from_host(keys);
    v.fill_bytes(0);
    r.fill_bytes(0);
    cohort::testing::check_steady_state(group, [&] {
      cohort::multi_device_sort(group, k);
      cohort::multi_device_sort(group, k, cohort::descending);
      cohort::multi_device_sort_by_key(group, k, v);
      cohort::multi_device_sort(group, r, by_key{});
    });
    CHECK(first_difference(read_back(group, k), expected) == n);
  }
}
