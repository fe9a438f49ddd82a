// The user's world as it is: groups over the caller's streams (the default streams included) and
// views over the caller's own device memory, checked before anything is enqueued.
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

// Memory of the caller's own: one cudaMalloc per member, freed at the end of the scope.
struct user_memory {
  std::vector<float*> pointers;
  ~user_memory() {
    for (float* p : pointers)
      if (p != nullptr) cudaFree(p);
  }
};

std::vector<cohort::device_ref> visible_devices() {
  std::vector<cohort::device_ref> devices;
  for (int d = 0; d < cohort::device_count(); ++d)
    devices.emplace_back(d);
  return devices;
}

double host_sum_plus_one(const std::vector<float>& values) {
  double sum = 0.0;
  for (float v : values)
    sum += static_cast<double>(v) + 1.0;
  return sum;
}

} // namespace

TEST_CASE("a group over the caller's streams runs on them and leaves them alive") {
  COHORT_SKIP_UNLESS_GPUS(1);
  std::vector<cudaStream_t> handles;
  std::vector<cohort::stream_ref> streams;
  for (cohort::device_ref d : visible_devices()) {
    cohort::scoped_device on(d);
    cudaStream_t h = nullptr;
    REQUIRE(cudaStreamCreate(&h) == cudaSuccess);
    handles.push_back(h);
    streams.emplace_back(d, h);
  }
  const std::size_t n = 100'003;
  const auto host = cohort::testing::random_values<float>(n, 11);
  {
    cohort::device_group group(streams);
    CHECK(group.borrows_streams());
    REQUIRE(group.size() == handles.size());
    for (std::size_t i = 0; i < group.size(); ++i)
      CHECK(group.stream(i).native_handle() == handles[i]);
    cohort::distributed_buffer<float> x(group, n);
    CHECK(x.shard(0).stream.native_handle() == handles[0]);
    x.copy_from_host(host);
    cohort::multi_device_for_each(group, x, [] __device__(float& v) { v += 1.0f; });
    auto sum = cohort::multi_device_transform_reduce(group, x, 0.0, cuda::std::plus<>{},
                                                     [] __device__(float v) { return double(v); });
    CHECK(sum.wait() == doctest::Approx(host_sum_plus_one(host)).epsilon(1e-9));
    group.synchronize();
  }
  // The group is gone; the streams are still the caller's.
  for (std::size_t i = 0; i < handles.size(); ++i) {
    cohort::scoped_device on(cohort::device_ref{static_cast<int>(i)});
    CHECK(cudaStreamQuery(handles[i]) == cudaSuccess);
    CHECK(cudaStreamDestroy(handles[i]) == cudaSuccess);
  }
}

// The legacy default stream is where most CUDA samples and PyTorch (outside torch.cuda.stream)
// put their work: a copy the caller enqueued there is ordered before cohort's work on a group over
// it, with no synchronisation in between.
TEST_CASE("a group over the legacy default stream is ordered after the caller's work there") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::device_group group(
      std::vector<cohort::stream_ref>{cohort::stream_ref::borrow(d, nullptr)});
  CHECK(group.stream(0).is_default());
  const std::size_t n = 1 << 20;
  const auto host = cohort::testing::random_values<float>(n, 12);
  user_memory memory;
  float* data = nullptr;
  REQUIRE(cudaMalloc(&data, n * sizeof(float)) == cudaSuccess);
  memory.pointers.push_back(data);
  REQUIRE(cudaMemset(data, cohort::testing::poison_byte, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // Late and asynchronous on stream 0: a delay kernel, then the copy of the values.
  cohort::testing::write_after_delay<<<1, 32, 0, nullptr>>>(data, n, -7.0f, 20'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, nullptr) ==
          cudaSuccess);
  cohort::distributed_view<float> x(group, {cuda::std::span<float>(data, n)});
  cohort::multi_device_for_each(group, x, [] __device__(float& v) { v += 1.0f; });
  auto sum = cohort::multi_device_transform_reduce(group, x, 0.0, cuda::std::plus<>{},
                                                   [] __device__(float v) { return double(v); });
  CHECK(sum.wait() == doctest::Approx(host_sum_plus_one(host)).epsilon(1e-9));
}

TEST_CASE("groups over the per-thread default stream run from several host threads") {
  COHORT_SKIP_UNLESS_GPUS(1);
  constexpr int threads = 4;
  std::vector<double> got(threads, 0.0), want(threads, 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const auto host = cohort::testing::random_values<float>(50'000 + 97 * t, 20 + t);
      want[t] = host_sum_plus_one(host);
      cohort::device_group group(std::vector<cohort::stream_ref>{
          cohort::stream_ref::per_thread_default(cohort::device_ref{0})});
      cohort::distributed_buffer<float> x(group, host.size());
      x.copy_from_host(host);
      cohort::multi_device_for_each(group, x, [] __device__(float& v) { v += 1.0f; });
      got[t] = cohort::multi_device_transform_reduce(group, x, 0.0, cuda::std::plus<>{},
                                                     [] __device__(float v) { return double(v); })
                   .wait();
      group.synchronize();
    });
  for (std::thread& t : pool)
    t.join();
  for (int t = 0; t < threads; ++t)
    CHECK(got[t] == doctest::Approx(want[t]).epsilon(1e-9));
}

TEST_CASE("a stream named with another device than its own is refused, naming the member") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cudaStream_t h = nullptr;
  {
    cohort::scoped_device on(cohort::device_ref{1});
    REQUIRE(cudaStreamCreate(&h) == cudaSuccess);
  }
  CHECK_THROWS_WITH_AS(
      cohort::device_group(
          std::vector<cohort::stream_ref>{cohort::stream_ref(cohort::device_ref{0}, h)}),
      doctest::Contains("stream 0 was named with device 0 but is a stream of device 1"),
      std::invalid_argument);
  cohort::scoped_device on(cohort::device_ref{1});
  CHECK(cudaStreamDestroy(h) == cudaSuccess);
}

TEST_CASE("a view over the caller's memory is checked when it is made") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  user_memory memory;
  for (std::size_t i = 0; i < 2; ++i) {
    cohort::scoped_device on(group.device(i));
    float* p = nullptr;
    REQUIRE(cudaMalloc(&p, 64 * sizeof(float)) == cudaSuccess);
    memory.pointers.push_back(p);
  }
  const cuda::std::span<float> a(memory.pointers[0], 64), b(memory.pointers[1], 64);
  using view = cohort::distributed_view<float>;
  CHECK_THROWS_WITH_AS(view(group, {a}),
                       doctest::Contains("cohort::distributed_view: argument 'spans': has 1 spans "
                                         "but the group has 2 members"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(view(group, {a, cuda::std::span<float>(static_cast<float*>(nullptr), 5)}),
                       doctest::Contains("span 1 is null but has 5 elements"),
                       std::invalid_argument);
  std::vector<float> pageable(64);
  CHECK_THROWS_WITH_AS(view(group, {a, cuda::std::span<float>(pageable.data(), 64)}),
                       doctest::Contains("span 1 is in host memory"), std::invalid_argument);
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, 64 * sizeof(float)) == cudaSuccess);
  CHECK_THROWS_WITH_AS(view(group, {cuda::std::span<float>(pinned, 64), b}),
                       doctest::Contains("span 0 is in host memory"), std::invalid_argument);
  cudaFreeHost(pinned);
  // Empty spans, null or not, are members with no elements.
  const view empty(group, {cuda::std::span<float>(), b});
  CHECK(empty.size() == 64);
  CHECK(empty.shard(1).offset == 0);
  const view whole(group, {a, b});
  CHECK(whole.size() == 128);
  CHECK(whole.shard(1).offset == 64);
  CHECK(whole.shard(1).stream == group.stream(1));
  CHECK(whole.shard(1).data.data() == memory.pointers[1]);
  if (cohort::device_count() >= 2) {
    CHECK_THROWS_WITH_AS(
        view(group, {b, a}),
        doctest::Contains("span 0 is in device 1's memory but member 0 is device 0"),
        std::invalid_argument);
  }
  // A view of another group is refused by the algorithms, naming the argument.
  auto other = cohort::testing::group_of(2);
  CHECK_THROWS_WITH_AS(
      cohort::multi_device_for_each(other, whole, [] __device__(float& v) { v = 0; }),
      doctest::Contains("cohort::multi_device_for_each: argument"), std::invalid_argument);
}

TEST_CASE("a view of a buffer is the buffer's memory, and a const buffer's view is of const") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  cohort::distributed_buffer<int> x(group, 1001);
  const cohort::distributed_view<int> v = x;
  const cohort::distributed_buffer<int>& constant = x;
  const cohort::distributed_view<const int> c = constant.view();
  REQUIRE(v.shards() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(v.shard(i).data.data() == x.shard(i).data.data());
    CHECK(c.shard(i).data.size() == x.shard(i).data.size());
    CHECK(v.shard(i).offset == x.split().offset(i));
  }
  static_assert(!cohort::writable_distributed_range<const cohort::distributed_view<const int>&>);
  static_assert(cohort::writable_distributed_range<const cohort::distributed_view<int>&>);
}

namespace {

// A resource of the caller's: the device's pool, counting what it hands out, failing on demand.
struct test_resource {
  int allocations = 0;
  long long outstanding = 0;
  int fail_at = -1;      // the allocation (0-based) that returns null
  int throw_at = -1;     // the allocation that throws
  int bad_alloc_at = -1; // the allocation that throws std::bad_alloc (as rmm's out_of_memory)
  void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    const int k = allocations++;
    if (k == fail_at) return nullptr;
    if (k == throw_at) throw std::runtime_error("test_resource: no memory today");
    if (k == bad_alloc_at) throw std::bad_alloc();
    void* p = nullptr;
    if (cudaMallocAsync(&p, bytes, stream.get()) != cudaSuccess) return nullptr;
    outstanding += static_cast<long long>(bytes);
    return p;
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    cudaFreeAsync(p, stream.get());
    outstanding -= static_cast<long long>(bytes);
  }
};
static_assert(cohort::async_memory_resource<test_resource>);

} // namespace

TEST_CASE("a group's memory resource serves its buffers, and the group counts what it holds") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  test_resource resource;
  group.set_memory_resource(resource);
  CHECK(group.memory_resource(0) == group.memory_resource(0));
  const std::size_t n = 10'007;
  {
    cohort::distributed_buffer<double> x(group, n);
    CHECK(resource.allocations == 2);
    CHECK(resource.outstanding == static_cast<long long>(n * sizeof(double)));
    CHECK(group.memory_held(0).bytes == x.split().count(0) * sizeof(double));
    CHECK(group.memory_held(1).bytes == x.split().count(1) * sizeof(double));
    // What is held goes back to the resource it came from: no switching under it.
    cohort::device_pool_resource other;
    CHECK_THROWS_WITH_AS(group.set_memory_resource(other),
                         doctest::Contains("member 0 still holds"), std::logic_error);
    const auto host = cohort::testing::random_values<double>(n, 5);
    x.copy_from_host(host);
    auto sum = cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{});
    double want = 0.0;
    for (double v : host)
      want += v;
    CHECK(sum.wait() == doctest::Approx(want).epsilon(1e-12));
  }
  // The reduction's scratch is the group's, kept for its next calls until given back.
  CHECK(group.memory_held(0).bytes > 0);
  group.release_scratch();
  group.synchronize();
  CHECK(resource.outstanding == 0);
  CHECK(group.memory_held(0).bytes == 0);
  CHECK(group.memory_held(0).peak >= n / 2 * sizeof(double));
  CHECK_THROWS_AS(group.memory_held(2), std::out_of_range);
  group.set_memory_resource(cohort::default_memory_resource()); // nothing held: allowed
}

TEST_CASE("a resource that fails part-way through a distributed allocation leaks nothing") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(3);
  for (const bool throws : {false, true}) {
    CAPTURE(throws);
    test_resource resource;
    (throws ? resource.throw_at : resource.fail_at) = 1;
    group.set_memory_resource(resource);
    if (throws)
      CHECK_THROWS_WITH_AS(cohort::distributed_buffer<float>(group, 3000),
                           doctest::Contains("no memory today"), std::runtime_error);
    else
      try {
        cohort::distributed_buffer<float> x(group, 3000);
        FAIL("a null allocation was taken");
      } catch (const cohort::cuda_error& e) {
        CHECK(e.status() == cudaErrorMemoryAllocation);
        CHECK(std::string(e.what()).find("Asked for 4000 bytes") != std::string::npos);
      }
    group.synchronize();
    CHECK(resource.outstanding == 0);
    CHECK(group.memory_held(0).bytes == 0);
    CHECK(group.memory_held(1).bytes == 0);
    group.set_memory_resource(cohort::default_memory_resource());
  }
}

TEST_CASE("a resource's std::bad_alloc is out of memory, as a null allocation is") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(cohort::device_ref{0});
  test_resource resource;
  resource.bad_alloc_at = 0;
  try {
    cohort::device_buffer<double> x(1000, s, resource);
    FAIL("a failed allocation was taken");
  } catch (const cohort::cuda_error& e) {
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(std::string(e.what()).find("Asked for 8000 bytes") != std::string::npos);
  }
  CHECK(resource.outstanding == 0);
}

// Asking CUDA whether the legacy default stream is captured, while a blocking stream of its device
// is, is an error of its own (cudaErrorStreamCaptureImplicit): cohort does not ask, since the
// legacy stream is never captured.
TEST_CASE("the legacy default stream reads as not captured while another stream is") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::scoped_device on(d);
  cudaStream_t blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  bool captured = true;
  CHECK_NOTHROW(captured = cohort::stream_ref::legacy_default(d).is_capturing());
  CHECK_FALSE(captured);
  CHECK(cohort::stream_ref(d, blocking).is_capturing());
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(blocking, &graph) == cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  CHECK(cudaStreamDestroy(blocking) == cudaSuccess);
}

TEST_CASE("a device buffer takes a resource, and the default pool's release threshold is set") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::stream s(d);
  test_resource resource;
  {
    cohort::device_buffer<int> x(257, s, resource);
    CHECK(resource.outstanding == static_cast<long long>(257 * sizeof(int)));
    CHECK(x.resource() == cohort::memory_resource_ref(resource));
    cohort::device_buffer<int> moved(std::move(x));
    CHECK(moved.resource() == cohort::memory_resource_ref(resource));
  }
  s.synchronize();
  CHECK(resource.outstanding == 0);
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
  cuuint64_t before = 0, after = 0;
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &before) == cudaSuccess);
  cohort::set_release_threshold(d, std::size_t(3) << 20);
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &after) == cudaSuccess);
  CHECK(after == (cuuint64_t(3) << 20));
  cohort::set_release_threshold(d, static_cast<std::size_t>(before));
}

namespace {

// What member i and j of `group` hold together, as the group counts it.
std::size_t held(const cohort::device_group& group) {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < group.size(); ++i)
    bytes += group.memory_held(i).bytes;
  return bytes;
}

} // namespace

TEST_CASE("a scoped scratch resource serves the calls in its scope and gets it all back") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  test_resource own, scoped, inner;
  group.set_memory_resource(own);
  const std::size_t n = 100'003;
  const auto host = cohort::testing::random_values<float>(n, 11);
  std::vector<std::uint32_t> host_keys(n);
  {
    std::mt19937 engine(12);
    for (std::uint32_t& k : host_keys)
      k = static_cast<std::uint32_t>(engine());
  }
  cohort::distributed_buffer<float> x(group, n), y(group, n);
  cohort::distributed_buffer<std::uint32_t> keys(group, n);
  x.copy_from_host(host);
  double want = 0.0;
  for (float v : host)
    want += v;
  // Scratch the group keeps from its own resource, before the scope.
  CHECK(cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{}).wait() ==
        doctest::Approx(want).epsilon(1e-9));
  const int own_allocations = own.allocations;
  {
    cohort::scoped_scratch_resource use(group, scoped);
    group.synchronize();
    // The group's kept scratch went back to its resource: it holds the three buffers alone.
    CHECK(own.outstanding ==
          static_cast<long long>(n * (2 * sizeof(float) + sizeof(std::uint32_t))));
    CHECK(cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{}).wait() ==
          doctest::Approx(want).epsilon(1e-9));
    y.fill_bytes(cohort::testing::poison_byte);
    y.copy_from_host(host);
    cohort::multi_device_inclusive_scan(group, y, cuda::std::plus<>{});
    keys.fill_bytes(cohort::testing::poison_byte);
    keys.copy_from_host(host_keys);
    cohort::multi_device_sort(group, keys);
    group.synchronize();
    CHECK(scoped.allocations > 0);
    CHECK(scoped.outstanding > 0);
    CHECK(own.allocations == own_allocations); // none of the scratch came from the group's
    // What the scope's resource holds counts in the group's totals.
    CHECK(held(group) == static_cast<std::size_t>(own.outstanding + scoped.outstanding));
    {
      cohort::scoped_scratch_resource nested(group, inner);
      const int before = scoped.allocations;
      CHECK(cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{}).wait() ==
            doctest::Approx(want).epsilon(1e-9));
      CHECK(inner.allocations > 0);
      CHECK(scoped.allocations == before);
    }
    group.synchronize();
    CHECK(inner.outstanding == 0);
    const int before = scoped.allocations;
    (void)cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{}).wait();
    CHECK(scoped.allocations > before); // the outer scope's resource serves again
  }
  group.synchronize();
  CHECK(scoped.outstanding == 0);
  CHECK(held(group) == static_cast<std::size_t>(own.outstanding));
  // The results, against the host.
  std::vector<float> scanned(n);
  y.copy_to_host(scanned);
  double running = 0.0;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    running += host[i];
    if (std::abs(scanned[i] - running) > 1e-3 * (1.0 + std::abs(running))) ++wrong;
  }
  CHECK(wrong == 0);
  std::vector<std::uint32_t> sorted(n);
  keys.copy_to_host(sorted);
  std::sort(host_keys.begin(), host_keys.end());
  CHECK(sorted == host_keys);
  // After the scope, scratch comes from the group's resource again.
  (void)cohort::multi_device_reduce(group, x, 0.0, cuda::std::plus<>{}).wait();
  CHECK(own.allocations > own_allocations);
  group.release_scratch();
  group.synchronize();
}

TEST_CASE("a scoped scratch resource that fails is the call's out of memory, and nothing runs") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  const std::size_t n = 50'021;
  const auto host = cohort::testing::random_values<float>(n, 13);
  cohort::distributed_buffer<float> y(group, n);
  for (const bool throws : {false, true}) {
    CAPTURE(throws);
    test_resource scoped;
    (throws ? scoped.throw_at : scoped.fail_at) = 1; // member 1's scratch
    y.copy_from_host(host);
    {
      cohort::scoped_scratch_resource use(group, scoped);
      if (throws)
        CHECK_THROWS_WITH_AS(cohort::multi_device_inclusive_scan(group, y, cuda::std::plus<>{}),
                             doctest::Contains("no memory today"), std::runtime_error);
      else
        try {
          cohort::multi_device_inclusive_scan(group, y, cuda::std::plus<>{});
          FAIL("a null allocation was taken");
        } catch (const cohort::cuda_error& e) {
          CHECK(e.status() == cudaErrorMemoryAllocation);
          CHECK(std::string(e.what()).find("multi_device_inclusive_scan") != std::string::npos);
        }
    }
    group.synchronize();
    CHECK(scoped.outstanding == 0);
    std::vector<float> after(n);
    y.copy_to_host(after);
    CHECK(after == host); // nothing was scanned
  }
}

TEST_CASE("a scoped scratch resource is refused while a member's stream is being captured") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  test_resource scoped;
  cohort::scoped_device on(group.device(1));
  REQUIRE(cudaStreamBeginCapture(group.stream(1).native_handle(), cudaStreamCaptureModeRelaxed) ==
          cudaSuccess);
  CHECK_THROWS_WITH_AS(cohort::scoped_scratch_resource(group, scoped),
                       doctest::Contains("member 1's stream"), std::logic_error);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(group.stream(1).native_handle(), &graph) == cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  CHECK(scoped.allocations == 0);
}
