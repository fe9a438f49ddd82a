// Streams and events: ownership, device, ordering across streams and devices, timing.
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

static_assert(!std::is_copy_constructible_v<cohort::stream>);
static_assert(std::is_nothrow_move_constructible_v<cohort::stream>);
static_assert(!std::is_copy_constructible_v<cohort::event>);
static_assert(!std::is_constructible_v<cohort::stream_ref, int>);
static_assert(!std::is_constructible_v<cohort::stream_ref, std::nullptr_t>);
static_assert(!std::is_constructible_v<cohort::event_ref, cohort::device_ref, std::nullptr_t>);
static_assert(std::is_convertible_v<cohort::stream&, cohort::stream_ref>);

// Needs two GPUs: on one, each stream's device is the caller's device 0 already, and a
// constructor that left its stream's device current would pass. Each stream is made while another
// device is current, so that one that "restores" a fixed device 0 fails too.
TEST_CASE("a stream knows its device and leaves the current device alone") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const int count = cohort::device_count();
  cohort::scoped_device base(cohort::device_ref{0}); // the case's own device, given back at its end
  for (cohort::device_ref d : cohort::devices()) {
    CAPTURE(d.get());
    const int caller = (d.get() + 1) % count; // not the stream's device
    base.set(cohort::device_ref{caller});
    cohort::stream s(d);
    int now = -1;
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == caller);
    CHECK(s.device() == d);
    CHECK(cohort::stream_ref(s.native_handle()).device() == d); // asked from CUDA
    unsigned flags = 0;
    REQUIRE(cudaStreamGetFlags(s.native_handle(), &flags) == cudaSuccess);
    CHECK(flags == cudaStreamNonBlocking);
    CHECK(s.ready());
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == caller); // and asking the stream its device, its flags and its state left it too
  }
}

// What one GPU can check: the stream's device, asked of cohort and of CUDA, its flags, that it
// starts ready, and that device 0 is still current.
TEST_CASE("a stream on one GPU knows its device, does not block and starts ready") {
  COHORT_SKIP_UNLESS_GPUS(1);
  // The case's own device 0, given back at its end.
  cohort::scoped_device base(cohort::device_ref{0});
  const cohort::device_ref d{0};
  cohort::stream s(d);
  int now = -1;
  REQUIRE(cudaGetDevice(&now) == cudaSuccess);
  CHECK(now == 0);
  CHECK(s.device() == d);
  CHECK(cohort::stream_ref(s.native_handle()).device() == d); // asked from CUDA
  unsigned flags = 0;
  REQUIRE(cudaStreamGetFlags(s.native_handle(), &flags) == cudaSuccess);
  CHECK(flags == cudaStreamNonBlocking);
  CHECK(s.ready());
}

TEST_CASE("stream move, release and adopt keep exactly one owner") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream a(cohort::device_ref{0});
  const cudaStream_t handle = a.native_handle();
  cohort::stream b(std::move(a));
  CHECK(a.native_handle() == nullptr);
  CHECK(b.native_handle() == handle);
  cudaStream_t raw = b.release();
  CHECK(b.native_handle() == nullptr);
  cohort::stream c = cohort::stream::adopt(cohort::device_ref{0}, raw);
  CHECK(c.native_handle() == handle);
  c.synchronize();
}

TEST_CASE("an event orders a consumer stream after a producer stream") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int count = std::min(cohort::device_count(), 2);
  const cohort::device_ref producer_device{0}, consumer_device{count - 1};
  cohort::stream producer(producer_device), consumer(consumer_device);
  constexpr std::size_t n = 1 << 20;
  cohort::device_buffer<int> data(n, producer);
  cohort::device_buffer<int> copy(n, consumer);
  copy.fill_bytes(cohort::testing::poison_byte);
  consumer.synchronize();
  if (count == 2 && cohort::link_between(consumer_device, producer_device).kind ==
                        cohort::link_kind::peer)
    cohort::enable_peer_access(consumer_device, producer_device);
  // The producer writes 7 after a delay; without the wait the consumer would read garbage.
  cohort::testing::launch_write_after_delay(producer, data.data(), n, 7, 2'000'000);
  cohort::event done(producer_device);
  done.record(producer);
  consumer.wait(done);
  REQUIRE(cudaMemcpyPeerAsync(copy.data(), consumer_device.get(), data.data(),
                              producer_device.get(), n * sizeof(int),
                              consumer.native_handle()) == cudaSuccess);
  std::vector<int> host(n, 0);
  copy.copy_to_host(host);
  consumer.synchronize();
  CHECK(done.ready());
  CHECK(std::count(host.begin(), host.end(), 7) == static_cast<long>(n));
  producer.synchronize();
}

TEST_CASE("timed events measure a delay") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::stream s(d);
  cohort::event start(d, cohort::event::timing::on), stop(d, cohort::event::timing::on);
  cohort::device_buffer<int> x(1024, s);
  start.record(s);
  cohort::testing::launch_write_after_delay(s, x.data(), x.size(), 1, 5'000'000);
  stop.record(s);
  stop.synchronize();
  CHECK(stop.ready());
  const double ms = cohort::elapsed(start, stop).count();
  CHECK(ms >= 4.0);
  CHECK(ms < 1000.0);
  // Events made without timing cannot be timed, and say so.
  cohort::event a(d), b(d);
  a.record(s);
  b.record(s);
  b.synchronize();
  CHECK_THROWS_WITH_AS(cohort::elapsed(a, b), doctest::Contains("cudaEventElapsedTime failed"),
                       cohort::cuda_error);
}

// A moved-from cohort::stream holds no handle, which CUDA takes for the legacy default stream
// (synchronizing with all work on the device). Before, each call below enqueued on it; now each
// refuses it, naming the call, before it enqueues anything. The host tests check the same
// refusals without a GPU; these are the calls that need real buffers, groups and graphs.
TEST_CASE("a moved-from stream is refused by copies, forks, joins and graph launches") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::stream moved(group.device(0));
  cohort::stream owner(std::move(moved));
  cohort::device_buffer<int> a(64, owner), b(64, owner);
  a.fill_bytes(1);
  b.fill_bytes(cohort::testing::poison_byte);
  const char* problem = "has no CUDA stream";
  CHECK_THROWS_WITH_AS(a.copy_to(b, moved), doctest::Contains(problem), std::invalid_argument);
  CHECK_THROWS_WITH_AS(group.fork(moved),
                       doctest::Contains("device_group::fork: argument 'origin'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(group.join(moved),
                       doctest::Contains("device_group::join: argument 'origin'"),
                       std::invalid_argument);
  cohort::distributed_buffer<int> x(group, 1000);
  cohort::group_graph graph = cohort::group_graph::capture(
      group, [&] { cohort::multi_device_for_each(group, x, [] __device__(int& v) { v = 3; }); });
  CHECK_THROWS_WITH_AS(graph.launch(moved),
                       doctest::Contains("group_graph::launch: argument 'stream'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(moved.synchronize(), doctest::Contains("stream_ref::synchronize"),
                       std::logic_error);
  // Nothing was copied: b still holds its poison.
  std::vector<int> host(64, 0);
  b.copy_to_host(host);
  owner.synchronize();
  int poisoned = 0;
  std::memset(&poisoned, cohort::testing::poison_byte, sizeof poisoned);
  CHECK(std::count(host.begin(), host.end(), poisoned) == 64);
  group.synchronize();
}
