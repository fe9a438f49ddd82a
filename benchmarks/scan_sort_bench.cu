// scan_sort_bench — multi_device_inclusive_scan and multi_device_sort against one GPU's
// cub::DeviceScan and cub::DeviceRadixSort, side by side in one run, 2^20 to 2^30 elements:
//   1. inclusive sum of floats, x into y (both sides out of place);
//   2. sorts of uint32, uint64 and float keys, and of uint32 keys with uint32 values: every timed
//      run first copies the random input back over the keys (device to device, on both sides),
//      so each sort sees unsorted data; the copy is in both times.
// The group is every visible GPU; with one GPU it is an emulated group of 2 on it, and the
// figures show that the code runs and is right, not how fast several GPUs are. Sizes whose
// buffers do not fit in 80% of the free memory are skipped. Goals (2 H200s): sort of 2^30 uint32
// >= 1.6x one GPU; inclusive scan of 2^30 floats >= 1.8x (see docs/design.md: the scan reads
// every element twice, which bounds it near 1.33x on 2 GPUs).
//   3. the uint32 sort again, staged through host memory (the form for GPUs without a peer path or
//      without room for the sort's scratch), forced;
//   4. views against buffers: the uint32 sort of 2^24 and up through a distributed_buffer and
//      through a distributed_view made from spans of the same buffer's shards (the path of the
//      user's own memory), the same input copied in before each; the ratio buffer/view should be 1;
//   5. with --larger GiB: one sort of that many GiB of uint64 keys, timed once and checked; the
//      goal's "array larger than one H200" (on two H200s, e.g. --larger 150);
//   6. a group of one on GPU 0 against CUB, 2^20 to 2^30 elements where they fit: inclusive and
//      exclusive sums of float, double, uint32 and uint64 (cub::DeviceScan), and sorts of uint32,
//      uint64, float and double keys and of uint32 and uint64 keys with values of their type
//      (cub::DeviceRadixSort, each run copying the random input over the keys first, on every
//      side). The group borrows the benchmark's stream (no fork or join), every side works on the
//      same input and output, and they are timed in turns (bench::time_ms_in_turns), below 2^24
//      elements in runs of 10 calls (the time per call). The group's scratch comes from an arena
//      (scoped_scratch_resource) that its CUB baseline uses too: the scan's storage, and for the
//      sorts CUB's in-place (DoubleBuffer) form passing the keys between the input and the very
//      scratch cohort's sort uses, with CUB's in/out form beside it. So the ratio is of the same
//      passes over the same bytes, and what is left is what cohort adds, not where an allocator
//      put the scratch. The goal: >= 0.98.
// Usage: scan_sort_bench [largest log2 size, default 30] [--larger GiB]
#include "timing.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// Random keys from an index, the same whichever device computes them.
template <class K>
struct random_key {
  K* out;
  std::size_t offset;
  __device__ void operator()(std::size_t i) const {
    std::uint64_t h = (offset + i + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    if constexpr (std::is_floating_point_v<K>)
      out[i] = K(double(h >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    else
      out[i] = K(h);
  }
};

template <class K>
void fill_random(cohort::device_buffer<K>& b, std::size_t offset) {
  cohort::for_each_n(b.stream(), b.size(), random_key<K>{b.data(), offset});
}

template <class K>
void fill_random(cohort::distributed_buffer<K>& x) {
  for (std::size_t k = 0; k < x.shards(); ++k)
    fill_random(x.local(k), x.split().offset(k));
}

bool fits(cohort::device_ref d, double bytes) {
  return bytes <= 0.8 * double(cohort::memory_info(d).free);
}

// Whether every member's share of `bytes_per_element * n` fits (members on one GPU add up).
bool group_fits(const cohort::device_group& g, std::size_t n, double bytes_per_element) {
  std::vector<double> per_device(cohort::device_count(), 0.0);
  for (std::size_t k = 0; k < g.size(); ++k)
    per_device[g.device(k).get()] +=
        bytes_per_element * double(cohort::partition::even(n, g.size()).count(k));
  for (int d = 0; d < cohort::device_count(); ++d)
    if (per_device[d] > 0 && !fits(cohort::device_ref{d}, per_device[d])) return false;
  return true;
}

void check(cudaError_t e, const char* what) {
  cohort::check_cuda(e, what, 0);
}

void row(std::size_t n, double one, double many) {
  std::printf("| %zu | %.3f | %.3f | %.2f |\n", static_cast<std::size_t>(n), one, many, one / many);
}

void scan_table(cohort::device_group& group, cohort::stream_ref origin, int top) {
  std::printf(
      "\n## inclusive sum of floats: one GPU's cub::DeviceScan vs multi_device_inclusive_scan "
      "on %zu members\n\n",
      group.size());
  std::printf("| n | cub one GPU ms | cohort ms | ratio |\n| --- | --- | --- | --- |\n");
  for (int lg = 20; lg <= top; lg += (lg < 28 ? 4 : 2)) {
    const std::size_t n = std::size_t(1) << lg;
    double one = -1, many = -1;
    if (fits(origin.device(), 2.2 * n * sizeof(float))) {
      cohort::device_buffer<float> x(n, origin), y(n, origin);
      fill_random(x, 0);
      std::size_t bytes = 0;
      check(cub::DeviceScan::InclusiveSum(nullptr, bytes, x.data(), y.data(), n,
                                          origin.native_handle()),
            "size query");
      cohort::device_buffer<unsigned char> temp(bytes, origin);
      one = bench::time_ms(origin, [&] {
        check(cub::DeviceScan::InclusiveSum(temp.data(), bytes, x.data(), y.data(), n,
                                            origin.native_handle()),
              "cub::DeviceScan::InclusiveSum");
      });
    }
    origin.synchronize();
    if (group_fits(group, n, 2.2 * sizeof(float))) {
      cohort::distributed_buffer<float> x(group, n), y(group, n);
      fill_random(x);
      many = bench::time_ms(origin, [&] {
        group.fork(origin);
        cohort::multi_device_inclusive_scan(group, x, y, cuda::std::plus<>{});
        group.join(origin);
      });
    }
    group.synchronize();
    if (one < 0 || many < 0) {
      std::printf("| %zu | skipped: does not fit | | |\n", std::size_t{1} << lg);
      continue;
    }
    row(n, one, many);
  }
}

// Sets how this thread's sorts run (cohort::detail::sort_tuning_for_tests) for one scope.
struct sort_form {
  cohort::detail::sort_tuning saved = cohort::detail::sort_tuning_for_tests;
  explicit sort_form(bool staged) {
    if (staged)
      cohort::detail::sort_tuning_for_tests = {cohort::detail::sort_staging::through_host};
  }
  ~sort_form() { cohort::detail::sort_tuning_for_tests = saved; }
};

// CUB's radix sort of `n` random keys (and values, where Pairs) from `in` to `out`, with the
// pristine keys it copies in before each run: the baseline both sort tables time.
template <bool Pairs, class K, class V>
struct cub_sort {
  using value_t = std::conditional_t<Pairs, V, unsigned char>;
  std::size_t n;
  cohort::stream_ref s;
  cohort::device_buffer<K> pristine{n, s}, in{n, s}, out{n, s};
  cohort::device_buffer<value_t> vin{Pairs ? n : 0, s}, vout{Pairs ? n : 0, s};
  cohort::device_buffer<unsigned char> temp{sort(nullptr, n, s), s};

  cub_sort(std::size_t n_, cohort::stream_ref s_)
      : n(n_)
      , s(s_) {
    fill_random(pristine, 0);
  }
  // pristine to `in`, then CUB's sort into `out`
  void run() {
    pristine.copy_to(in, s);
    sort(this, n, s);
  }

 private:
  // The sort, or where `b` is null the size of its scratch.
  static std::size_t sort(cub_sort* b, std::size_t n, cohort::stream_ref s) {
    std::size_t bytes = b ? b->temp.size() : 0;
    void* temp = b ? b->temp.data() : nullptr;
    K* in = b ? b->in.data() : nullptr;
    K* out = b ? b->out.data() : nullptr;
    if constexpr (Pairs)
      check(cub::DeviceRadixSort::SortPairs(temp, bytes, in, out, b ? b->vin.data() : nullptr,
                                            b ? b->vout.data() : nullptr, n, 0, int(8 * sizeof(K)),
                                            s.native_handle()),
            "cub::DeviceRadixSort::SortPairs");
    else
      check(cub::DeviceRadixSort::SortKeys(temp, bytes, in, out, n, 0, int(8 * sizeof(K)),
                                           s.native_handle()),
            "cub::DeviceRadixSort::SortKeys");
    return bytes;
  }
};

template <class K, class V>
void sort_table(cohort::device_group& group, cohort::stream_ref origin, int top, const char* what,
                bool staged = false) {
  constexpr bool pairs = !std::is_same_v<V, void>;
  using value_t = std::conditional_t<pairs, V, unsigned char>;
  const double element = double(sizeof(K) + (pairs ? sizeof(value_t) : 0));
  const sort_form form(staged);
  std::printf("\n## sort of %s: one GPU's cub::DeviceRadixSort vs multi_device_sort%s on %zu "
              "members%s\n\n",
              what, pairs ? "_by_key" : "", group.size(),
              staged ? ", staged through host memory (forced)" : "");
  std::printf("| n | cub one GPU ms | cohort ms | ratio |\n| --- | --- | --- | --- |\n");
  for (int lg = 20; lg <= top; lg += (lg < 28 ? 4 : 2)) {
    const std::size_t n = std::size_t(1) << lg;
    double one = -1, many = -1;
    if (fits(origin.device(), 3.5 * element * n)) {
      cub_sort<pairs, K, V> cub(n, origin);
      one = bench::time_ms(
          origin, [&] { cub.run(); }, 2, 7);
    }
    origin.synchronize();
    if (group_fits(group, n, 5.5 * element)) {
      cohort::distributed_buffer<K> pristine(group, n), keys(group, n);
      fill_random(pristine);
      cohort::distributed_buffer<value_t> values(
          group, pairs ? keys.split() : cohort::partition::even(0, group.size()));
      many = bench::time_ms(
          origin,
          [&] {
            group.fork(origin);
            for (std::size_t k = 0; k < group.size(); ++k)
              pristine.local(k).copy_to(keys.local(k), group.stream(k));
            if constexpr (pairs)
              cohort::multi_device_sort_by_key(group, keys, values);
            else
              cohort::multi_device_sort(group, keys);
            group.join(origin);
          },
          2, 7);
    }
    group.synchronize();
    if (one < 0 || many < 0) {
      std::printf("| %zu | skipped: does not fit | | |\n", std::size_t{1} << lg);
      continue;
    }
    row(n, one, many);
  }
}

// A view over a buffer's own memory, made from spans of its shards as a program makes one over
// memory it allocated itself: the user's-memory path, on the same bytes as the buffer.
template <class K>
cohort::distributed_view<K> view_over(const cohort::device_group& group,
                                      cohort::distributed_buffer<K>& buffer) {
  std::vector<cuda::std::span<K>> spans;
  for (std::size_t k = 0; k < buffer.shards(); ++k)
    spans.push_back(buffer.shard(k).data);
  return cohort::distributed_view<K>(group, spans);
}

// The uint32 sort on the same keys through their buffer and through a view of it, timed in turns
// (each run first copies the random input back over the keys, as in sort_table).
void sort_view_table(cohort::device_group& group, cohort::stream_ref origin, int top) {
  std::printf("\n## views against buffers: multi_device_sort of uint32 keys through a "
              "distributed_buffer and through a distributed_view over its shards, on %zu "
              "members\n\n",
              group.size());
  std::printf("| n | buffer ms | view ms | ratio (buffer/view) |\n| --- | --- | --- | --- |\n");
  for (int lg = std::min(24, top); lg <= top; lg += 2) {
    const std::size_t n = std::size_t(1) << lg;
    if (!group_fits(group, n, 5.5 * sizeof(std::uint32_t))) {
      std::printf("| %zu | skipped: does not fit | | |\n", n);
      continue;
    }
    cohort::distributed_buffer<std::uint32_t> pristine(group, n), keys(group, n);
    fill_random(pristine);
    cohort::distributed_view<std::uint32_t> view = view_over(group, keys);
    auto run = [&](bool through_view) {
      return [&, through_view] {
        group.fork(origin);
        for (std::size_t k = 0; k < group.size(); ++k)
          pristine.local(k).copy_to(keys.local(k), group.stream(k));
        if (through_view)
          cohort::multi_device_sort(group, view);
        else
          cohort::multi_device_sort(group, keys);
        group.join(origin);
      };
    };
    const auto [buffer_ms, view_ms] = bench::paired_time_ms(origin, run(false), run(true), 2, 7);
    group.synchronize();
    std::printf("| %zu | %.3f | %.3f | %.3f |\n", n, buffer_ms, view_ms, buffer_ms / view_ms);
  }
}

// 6. A group of one on `origin` itself (it borrows the stream), against CUB on the same memory.
template <class T>
cohort::distributed_view<T> one_view(const cohort::device_group& one, cohort::device_buffer<T>& b) {
  return cohort::distributed_view<T>(one, {cuda::std::span<T>(b.data(), b.size())});
}

// Below 2^24 elements a call takes tens of microseconds, and one call between two events shows
// the host's time to enqueue it as much as the GPU's: there each timed run is 10 calls back to
// back (as a loop would make them), its time divided by 10.
constexpr std::size_t batched_below = std::size_t(1) << 24;
constexpr int batch = 10;
std::vector<double> per_call_ms(cohort::stream_ref origin, std::size_t n,
                                const std::vector<std::function<void()>>& calls, int warmups = 3,
                                int reps = 20) {
  const int repeat = n < batched_below ? batch : 1;
  std::vector<std::function<void()>> runs;
  for (const auto& call : calls)
    runs.push_back([&call, repeat] {
      for (int i = 0; i < repeat; ++i)
        call();
    });
  std::vector<double> ms = bench::time_ms_in_turns(origin, runs, warmups, reps);
  for (double& m : ms)
    m /= repeat;
  return ms;
}

// One buffer handed out whole, the same bytes each time, to one holder at a time: the scratch of a
// group of one, which its CUB baseline then uses too, so that both sides work in the same bytes
// (a scan's look-back state, the keys a sort passes between): a call bound by latency or by
// scattered writes moves by a few percent with where those lie, in CUB's own calls. An ask it
// cannot meet (the call would take another path) is counted, and fails the row.
class arena_resource {
 public:
  arena_resource(std::size_t bytes, cohort::stream_ref s)
      : memory_(bytes, s) {}
  void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref) {
    if (held_ || bytes > memory_.size()) {
      ++refused;
      return nullptr;
    }
    held_ = true;
    return memory_.data();
  }
  void deallocate_async(void*, std::size_t, std::size_t, cuda::stream_ref) noexcept {
    held_ = false;
  }
  unsigned char* data() { return memory_.data(); }
  int refused = 0;

 private:
  cohort::device_buffer<unsigned char> memory_;
  bool held_ = false;
};

// Stops the benchmark where a row's group asked its arena for what it could not give.
void require_arena_held(const arena_resource& arena, std::size_t n) {
  if (arena.refused == 0) return;
  std::printf("| %zu | FAILED: the group's scratch did not fit its arena | | | | | |\n", n);
  std::exit(1);
}

template <class T>
void one_member_scan_rows(cohort::stream_ref origin, std::size_t n, const char* type) {
  if (!fits(origin.device(), 2.2 * double(sizeof(T)) * double(n))) {
    std::printf("| %zu | %s | skipped: does not fit | | | |\n", n, type);
    return;
  }
  cohort::device_buffer<T> x(n, origin), y(n, origin);
  fill_random(x, 0);
  cohort::device_group one({origin});
  const cohort::distributed_view<T> xv = one_view(one, x), yv = one_view(one, y);
  for (const bool exclusive : {false, true}) {
    std::size_t bytes = 0;
    auto cub = [&](void* temp) {
      return exclusive ? cub::DeviceScan::ExclusiveSum(temp, bytes, x.data(), y.data(), n,
                                                       origin.native_handle())
                       : cub::DeviceScan::InclusiveSum(temp, bytes, x.data(), y.data(), n,
                                                       origin.native_handle());
    };
    check(cub(nullptr), "size query");
    arena_resource arena(bytes + 4096, origin); // CUB's storage and the group's scratch
    const cohort::scoped_scratch_resource use(one, arena);
    const auto ms =
        per_call_ms(origin, n,
                    {[&] { check(cub(arena.data()), "cub::DeviceScan"); },
                     [&] {
                       if (exclusive)
                         cohort::multi_device_exclusive_scan(one, xv, yv, T{}, cuda::std::plus<>{});
                       else
                         cohort::multi_device_inclusive_scan(one, xv, yv, cuda::std::plus<>{});
                     }});
    require_arena_held(arena, n);
    std::printf("| %zu | %s | %s | %.4f | %.4f | %.3f |\n", n, type,
                exclusive ? "exclusive" : "inclusive", ms[0], ms[1], ms[0] / ms[1]);
  }
  origin.synchronize();
}

constexpr std::size_t round_up(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// CUB's radix sort in place (its DoubleBuffer form) of n keys (and values, where Pairs), passing
// them between `keys` and `values` and the start of `alternate`, its `storage` bytes after them,
// as cohort's sort on a group of one lays out its scratch. With `alternate` null, a size query:
// `storage` becomes CUB's, and it returns what the whole needs at `alternate`.
template <bool Pairs, class K, class V>
std::size_t cub_sort_in_place(K* keys, V* values, std::size_t n, unsigned char* alternate,
                              std::size_t& storage, cohort::stream_ref s) {
  const std::size_t key_bytes = round_up(n * sizeof(K));
  const std::size_t value_bytes = Pairs ? round_up(n * sizeof(V)) : 0;
  const bool query = alternate == nullptr;
  void* temp = query ? nullptr : alternate + key_bytes + value_bytes;
  cub::DoubleBuffer<K> k(keys, reinterpret_cast<K*>(alternate));
  if constexpr (Pairs) {
    cub::DoubleBuffer<V> v(values, query ? nullptr : reinterpret_cast<V*>(alternate + key_bytes));
    check(cub::DeviceRadixSort::SortPairs(temp, storage, k, v, n, 0, int(8 * sizeof(K)),
                                          s.native_handle()),
          "cub::DeviceRadixSort::SortPairs (DoubleBuffer)");
  } else {
    check(cub::DeviceRadixSort::SortKeys(temp, storage, k, n, 0, int(8 * sizeof(K)),
                                         s.native_handle()),
          "cub::DeviceRadixSort::SortKeys (DoubleBuffer)");
  }
  return key_bytes + value_bytes + round_up(storage);
}

template <class K, class V>
void one_member_sort_row(cohort::stream_ref origin, std::size_t n, const char* keys_name) {
  constexpr bool pairs = !std::is_same_v<V, void>;
  using value_t = std::conditional_t<pairs, V, unsigned char>;
  // pristine, in and out keys, in and out values, CUB's in/out storage (a copy of each) and the
  // scratch both in-place sorts share (another)
  const double element = double(sizeof(K)) + (pairs ? double(sizeof(value_t)) : 0.0);
  if (!fits(origin.device(), (double(sizeof(K)) + 4.2 * element) * double(n))) {
    std::printf("| %zu | %s | %s | skipped: does not fit | | | |\n", n, keys_name,
                pairs ? keys_name : "none");
    return;
  }
  cub_sort<pairs, K, V> cub(n, origin);
  std::size_t storage = 0;
  const std::size_t alternate_bytes =
      cub_sort_in_place<pairs>(cub.in.data(), cub.vin.data(), n, nullptr, storage, origin);
  // room for cohort's own size query's answer, the same call's, under its alignment
  arena_resource arena(alternate_bytes + 4096, origin);
  cohort::device_group one({origin});
  const cohort::distributed_view<K> keys = one_view(one, cub.in);
  const cohort::distributed_view<value_t> values = one_view(one, cub.vin);
  const cohort::scoped_scratch_resource use(one, arena);
  const auto ms = per_call_ms(origin, n,
                              {[&] { cub.run(); },
                               [&] {
                                 cub.pristine.copy_to(cub.in, origin);
                                 cub_sort_in_place<pairs>(cub.in.data(), cub.vin.data(), n,
                                                          arena.data(), storage, origin);
                               },
                               [&] {
                                 cub.pristine.copy_to(cub.in, origin);
                                 if constexpr (pairs)
                                   cohort::multi_device_sort_by_key(one, keys, values);
                                 else
                                   cohort::multi_device_sort(one, keys);
                               }},
                              2, 7);
  require_arena_held(arena, n);
  std::printf("| %zu | %s | %s | %.4f | %.4f | %.4f | %.3f |\n", n, keys_name,
              pairs ? keys_name : "none", ms[0], ms[1], ms[2], ms[1] / ms[2]);
  origin.synchronize();
}

void one_member_tables(cohort::stream_ref origin, int top) {
  std::printf("\n## group of one: scans against cub::DeviceScan (its storage in the same scratch "
              "as cohort's), in batches of %d calls below 2^24 elements, GPU 0\n\n",
              batch);
  std::printf("| n | type | scan | cub ms | cohort ms | cub / cohort |\n"
              "| --- | --- | --- | --- | --- | --- |\n");
  for (int lg = 20; lg <= top; lg += 2) {
    const std::size_t n = std::size_t(1) << lg;
    one_member_scan_rows<float>(origin, n, "float");
    one_member_scan_rows<double>(origin, n, "double");
    one_member_scan_rows<std::uint32_t>(origin, n, "uint32");
    one_member_scan_rows<std::uint64_t>(origin, n, "uint64");
  }
  std::printf("\n## group of one: sorts against cub::DeviceRadixSort (in/out, and in place through "
              "the same scratch as cohort's), in batches of %d calls below 2^24 elements, GPU "
              "0\n\n",
              batch);
  std::printf("| n | keys | values | cub in/out ms | cub in place ms | cohort ms | cub / cohort "
              "|\n| --- | --- | --- | --- | --- | --- | --- |\n");
  for (int lg = 20; lg <= top; lg += 2) {
    const std::size_t n = std::size_t(1) << lg;
    one_member_sort_row<std::uint32_t, void>(origin, n, "uint32");
    one_member_sort_row<std::uint64_t, void>(origin, n, "uint64");
    one_member_sort_row<float, void>(origin, n, "float");
    one_member_sort_row<double, void>(origin, n, "double");
    one_member_sort_row<std::uint32_t, std::uint32_t>(origin, n, "uint32");
    one_member_sort_row<std::uint64_t, std::uint64_t>(origin, n, "uint64");
  }
}

// Per shard, on its stream: the sum and xor of the keys (a permutation keeps both) and how many
// neighbours are out of order.
struct shard_facts {
  unsigned long long* facts; // sum, xor, inversions
  const std::uint64_t* keys;
  std::size_t count;
  __device__ void operator()(std::size_t i) const {
    atomicAdd(&facts[0], static_cast<unsigned long long>(keys[i]));
    atomicXor(&facts[1], static_cast<unsigned long long>(keys[i]));
    if (i + 1 < count && keys[i + 1] < keys[i]) atomicAdd(&facts[2], 1ull);
  }
};

std::vector<unsigned long long> facts_of(cohort::device_group& group,
                                         cohort::distributed_buffer<std::uint64_t>& keys) {
  std::vector<unsigned long long> all(3, 0);
  for (std::size_t k = 0; k < group.size(); ++k) {
    // The raw calls below with the member's device current (its pool memory, its stream).
    cohort::scoped_device on(group.device(k));
    cohort::device_buffer<unsigned long long> facts(3, group.stream(k));
    check(cudaMemsetAsync(facts.data(), 0, 3 * sizeof(unsigned long long),
                          group.stream(k).native_handle()),
          "cudaMemsetAsync");
    const auto shard = keys.shard(k).data;
    cohort::for_each_n(group.stream(k), shard.size(),
                       shard_facts{facts.data(), shard.data(), shard.size()});
    unsigned long long host[3];
    check(cudaMemcpyAsync(host, facts.data(), sizeof host, cudaMemcpyDeviceToHost,
                          group.stream(k).native_handle()),
          "cudaMemcpyAsync");
    group.stream(k).synchronize();
    all[0] += host[0], all[1] ^= host[1], all[2] += host[2];
  }
  // Between shards: the last key of each non-empty shard against the first of the next.
  std::uint64_t last = 0;
  bool any = false;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const auto shard = keys.shard(k).data;
    if (shard.empty()) continue;
    std::uint64_t ends[2];
    // With the shard's device current: a copy of another device's pool memory fails.
    cohort::scoped_device on(keys.shard(k).device);
    check(cudaMemcpy(&ends[0], shard.data(), 8, cudaMemcpyDefault), "cudaMemcpy");
    check(cudaMemcpy(&ends[1], shard.data() + shard.size() - 1, 8, cudaMemcpyDefault),
          "cudaMemcpy");
    if (any && ends[0] < last) ++all[2];
    last = ends[1], any = true;
  }
  return all;
}

// One sort of `gib` GiB of uint64 keys over the group, more than one GPU holds with the sort's
// scratch: timed once (the staged form waits for the GPUs before it returns), then checked: the
// keys' sum and xor unchanged, and no neighbours out of order.
void larger_than_one_gpu(cohort::device_group& group, double gib) {
  const std::size_t n = std::size_t(gib * double(std::size_t(1) << 30)) / sizeof(std::uint64_t);
  std::printf("\n## one sort of %.1f GiB of uint64 keys (%zu) over %zu members\n\n", gib, n,
              group.size());
  cohort::distributed_buffer<std::uint64_t> keys(group, n);
  fill_random(keys);
  const auto before = facts_of(group, keys);
  group.synchronize();
  const auto start = std::chrono::steady_clock::now();
  cohort::multi_device_sort(group, keys);
  group.synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto after = facts_of(group, keys);
  const bool right = after[0] == before[0] && after[1] == before[1] && after[2] == 0;
  std::printf("| keys | GiB | seconds | GB/s of keys | checked |\n| --- | --- | --- | --- | --- |\n"
              "| %zu | %.1f | %.2f | %.2f | %s |\n",
              n, gib, s, double(n) * 8 / s / 1e9, right ? "sorted, same sum and xor" : "WRONG");
  if (!right) std::exit(1);
}

} // namespace

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("scan_sort_bench: no GPU visible; nothing to measure.");
    return 0;
  }
  bench::print_environment();
  const int top = argc > 1 ? std::atoi(argv[1]) : 30;
  const double larger_gib = argc > 3 && std::string(argv[2]) == "--larger" ? std::atof(argv[3]) : 0;
  const bool one_gpu = cohort::device_count() == 1;
  std::vector<cohort::device_ref> all = cohort::devices();
  cohort::device_group group = one_gpu ? cohort::device_group::emulated(cohort::device_ref{0}, 2)
                                       : cohort::device_group(all);
  if (one_gpu)
    std::puts("# one GPU: an emulated group of 2 on it; the figures show correctness, not speed");
  group.enable_peer_access();
  cohort::stream origin(cohort::device_ref{0});
  scan_table(group, origin, top);
  sort_table<std::uint32_t, void>(group, origin, top, "uint32 keys");
  sort_table<std::uint64_t, void>(group, origin, top, "uint64 keys");
  sort_table<float, void>(group, origin, top, "float keys");
  sort_table<std::uint32_t, std::uint32_t>(group, origin, top, "uint32 keys with uint32 values");
  sort_table<std::uint32_t, void>(group, origin, top, "uint32 keys", true);
  sort_view_table(group, origin, top);
  if (larger_gib > 0) larger_than_one_gpu(group, larger_gib);
  one_member_tables(origin, top);
  return 0;
}
