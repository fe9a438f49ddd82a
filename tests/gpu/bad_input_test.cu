// Bad input, one test per case: every way a public function's arguments can be wrong gives a
// std::invalid_argument that names the function and the argument, before any work is enqueued
// (outputs poisoned first stay poisoned). Cases that need two real GPUs skip with fewer; the rest
// run on emulated groups where they need a group. Pure host checks (partition, adaptive weights,
// launcher variables, unique ids) are in tests/host.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <utility>

namespace {

using namespace std::chrono_literals;
using cohort::device_ref;

// `call` must throw std::invalid_argument saying "cohort::<function>: argument '<argument>'" and,
// where given, `detail`.
template <class F>
void rejected(F&& call, const std::string& function, const std::string& argument,
              const std::string& detail = "") {
  try {
    std::forward<F>(call)();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find("cohort::" + function + ": argument '" + argument + "'") !=
                      std::string::npos,
                  what);
    if (!detail.empty()) CHECK_MESSAGE(what.find(detail) != std::string::npos, what);
    return;
  }
  FAIL("no std::invalid_argument from " << function << " for argument '" << argument << "'");
}

template <class T>
void poison(cohort::device_buffer<T>& b) {
  b.fill_bytes(cohort::testing::poison_byte);
}

// Every element of `b` still holds the poison: nothing was written.
template <class T>
void untouched(const cohort::device_buffer<T>& b) {
  std::vector<T> out(b.size());
  b.copy_to_host(out);
  b.stream().synchronize();
  const T p = cohort::testing::poison_value<T>();
  std::size_t changed = 0;
  for (const T& v : out)
    changed += std::memcmp(&v, &p, sizeof(T)) != 0;
  CHECK_MESSAGE(changed == 0, changed << " element(s) were written by a rejected call");
}

template <class T>
void untouched(const cohort::distributed_buffer<T>& b) {
  for (std::size_t i = 0; i < b.shards(); ++i) {
    cohort::scoped_device on(b.shard(i).device);
    std::vector<T> out(b.shard(i).data.size());
    cohort::check_cuda(cudaMemcpyAsync(out.data(), b.shard(i).data.data(), out.size() * sizeof(T),
                                       cudaMemcpyDeviceToHost, b.shard(i).stream.native_handle()),
                       "cudaMemcpyAsync", b.shard(i).device.get());
    b.shard(i).stream.synchronize();
    const T p = cohort::testing::poison_value<T>();
    for (const T& v : out)
      if (std::memcmp(&v, &p, sizeof(T)) != 0) FAIL("shard " << i << " was written");
  }
}

template <class T>
void poison(cohort::distributed_buffer<T>& b) {
  b.fill_bytes(cohort::testing::poison_byte);
}

#if COHORT_WITH_NCCL
cohort::communicator one_rank(device_ref d) {
  return cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
}
#endif

} // namespace

// --- devices, streams, events, groups -----------------------------------------------------------

TEST_CASE("bad input: a stream on a device out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected([] { cohort::stream s(device_ref{cohort::device_count()}); }, "stream", "device",
           "out of range");
}

TEST_CASE("bad input: an event on a negative device") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected([] { cohort::event e(device_ref{-1}); }, "event", "device", "device -1 is out of range");
}

TEST_CASE("bad input: recording an event on a stream of another device") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::stream s(device_ref{1});
  cohort::event e(device_ref{0});
  rejected([&] { e.record(s); }, "event_ref::record", "stream", "is on device 1");
}

TEST_CASE("bad input: a group of no devices") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected([] { cohort::device_group g(std::vector<device_ref>{}); }, "device_group", "devices",
           "empty");
}

TEST_CASE("bad input: a group that lists a device twice") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected(
      [] {
        cohort::device_group g({device_ref{0}, device_ref{0}});
      },
      "device_group", "devices", "listed twice");
}

TEST_CASE("bad input: a group with a device out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected(
      [] {
        cohort::device_group g({device_ref{0}, device_ref{cohort::device_count()}});
      },
      "device_group", "devices", "out of range");
}

TEST_CASE("bad input: an emulated group of no devices") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected([] { (void)cohort::device_group::emulated(device_ref{0}, 0); }, "device_group::emulated",
           "n");
}

// --- buffers ------------------------------------------------------------------------------------

TEST_CASE("bad input: a device_buffer whose bytes overflow the address space") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(device_ref{0});
  rejected([&] { cohort::device_buffer<double> b(SIZE_MAX / 4, s); }, "device_buffer", "count",
           "overflow");
}

TEST_CASE("bad input: copy_from_host from a host span of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(device_ref{0});
  cohort::device_buffer<int> b(10, s);
  poison(b);
  std::vector<int> host(9, 1);
  rejected([&] { b.copy_from_host(host); }, "device_buffer::copy_from_host", "source",
           "has 9 elements but the buffer has 10");
  untouched(b);
}

TEST_CASE("bad input: copy_to_host into a host span of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(device_ref{0});
  cohort::device_buffer<int> b(10, s);
  std::vector<int> host(11, 7);
  rejected([&] { b.copy_to_host(host); }, "device_buffer::copy_to_host", "target");
  s.synchronize();
  CHECK(std::count(host.begin(), host.end(), 7) == 11);
}

TEST_CASE("bad input: copy_to a buffer of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(device_ref{0});
  cohort::device_buffer<int> a(10, s), b(11, s);
  a.fill_bytes(0);
  poison(b);
  rejected([&] { a.copy_to(b); }, "device_buffer::copy_to", "target", "has 11 elements");
  untouched(b);
}

TEST_CASE("bad input: a distributed_buffer whose split has more parts than the group") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  rejected([&] { cohort::distributed_buffer<float> x(group, cohort::partition::even(10, 3)); },
           "distributed_buffer", "split", "has 3 parts but the group has 2");
}

TEST_CASE("bad input: a distributed_buffer filled from a host span of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::distributed_buffer<float> x(group, 10);
  poison(x);
  std::vector<float> wrong(11, 1.0f);
  rejected([&] { x.copy_from_host(wrong); }, "distributed_buffer::copy_from_host", "source");
  untouched(x);
}

TEST_CASE("bad input: a distributed_buffer read into a host span of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::distributed_buffer<float> x(group, 10);
  std::vector<float> wrong(9, 1.0f);
  rejected([&] { x.copy_to_host(wrong); }, "distributed_buffer::copy_to_host", "target");
}

// --- algorithms ---------------------------------------------------------------------------------

namespace {
struct bump {
  __device__ void operator()(float& x) const { x += 1.0f; }
};
} // namespace

TEST_CASE("bad input: for_each over a buffer made over another group") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  auto other = cohort::testing::group_of(2);
  cohort::distributed_buffer<float> x(other, 10);
  poison(x);
  rejected([&] { cohort::multi_device_for_each(group, x, bump{}); }, "multi_device_for_each",
           "buffer", "shard 0 is not on member 0's stream");
  untouched(x);
}

TEST_CASE("bad input: for_each over a buffer with more shards than the group has members") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  auto three = cohort::testing::group_of(3);
  cohort::distributed_buffer<float> y(three, 10);
  poison(y);
  rejected([&] { cohort::multi_device_for_each(group, y, bump{}); }, "multi_device_for_each",
           "buffer", "has 3 shards but the group has 2");
  untouched(y);
}

TEST_CASE("bad input: for_each_n with a split of another number of parts") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  rejected(
      [&] {
        cohort::multi_device_for_each_n(
            group, 10, [] __device__(std::size_t) {}, cohort::partition::even(10, 3));
      },
      "multi_device_for_each_n", "split", "has 3 parts");
}

TEST_CASE("bad input: for_each_n with a split that covers another n") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  rejected(
      [&] {
        cohort::multi_device_for_each_n(
            group, 10, [] __device__(std::size_t) {}, cohort::partition::even(11, 2));
      },
      "multi_device_for_each_n", "split", "covers 11 items but n is 10");
}

TEST_CASE("bad input: transform_reduce_n with a split that does not fit") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  rejected(
      [&] {
        (void)cohort::multi_device_transform_reduce_n(
            group, 10, 0L, cuda::std::plus<long>{},
            [] __device__(std::size_t i) { return long(i); }, cohort::partition::even(12, 2));
      },
      "multi_device_transform_reduce_n", "split");
}

TEST_CASE("bad input: transform_reduce over a buffer made over another group") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  auto other = cohort::testing::group_of(2);
  cohort::distributed_buffer<float> x(other, 10);
  rejected(
      [&] {
        (void)cohort::multi_device_transform_reduce(group, x, 0.0f, cuda::std::plus<float>{},
                                                    [] __device__(float v) { return v; });
      },
      "multi_device_transform_reduce", "buffer");
}

#if COHORT_WITH_NCCL
// --- NCCL communicators and collectives
// -----------------------------------------------------------

TEST_CASE("bad input: a communicator of no ranks") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected(
      [] { (void)cohort::communicator::create(cohort::unique_id::create(), 0, 0, device_ref{0}); },
      "communicator::create", "size");
}

TEST_CASE("bad input: a communicator rank out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected(
      [] { (void)cohort::communicator::create(cohort::unique_id::create(), 2, 2, device_ref{0}); },
      "communicator::create", "rank", "got 2 of 2");
}

TEST_CASE("bad input: a communicator on a device out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rejected(
      [] {
        (void)cohort::communicator::create(cohort::unique_id::create(), 1, 0,
                                           device_ref{cohort::device_count()});
      },
      "communicator::create", "device", "out of range");
}

TEST_CASE("bad input: an NCCL clique over an emulated group") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto emulated = cohort::device_group::emulated(device_ref{0}, 2);
  rejected([&] { cohort::nccl_clique nccl(emulated); }, "communicator::create_clique", "group",
           "NCCL refuses two ranks on one GPU");
}

TEST_CASE("bad input: an NCCL all_reduce into a recv of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  cohort::device_buffer<float> a(10, s), b(11, s);
  a.fill_bytes(0);
  poison(b);
  rejected([&] { cohort::all_reduce(comm, a.span(), b.span(), cohort::sum, s); }, "all_reduce",
           "recv", "has 11 elements; expected 10");
  untouched(b);
}

TEST_CASE("bad input: an NCCL all_reduce whose send and recv partly overlap") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  cohort::device_buffer<float> a(10, s);
  poison(a);
  rejected(
      [&] {
        cohort::all_reduce(comm, a.span().subspan(0, 6), a.span().subspan(2, 6), cohort::sum, s);
      },
      "all_reduce", "recv", "overlaps 'send'");
  untouched(a);
}

TEST_CASE("bad input: an NCCL all_reduce of host memory") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  std::vector<float> host(16, 1.0f);
  cohort::device_buffer<float> out(16, s);
  poison(out);
  rejected(
      [&] {
        cohort::all_reduce(comm, cuda::std::span<const float>(host.data(), host.size()), out.span(),
                           cohort::sum, s);
      },
      "all_reduce", "send", "is host memory");
  untouched(out);
}

TEST_CASE("bad input: an NCCL all_reduce of a null span that claims elements") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  rejected(
      [&] {
        cohort::all_reduce(comm, cuda::std::span<float>(static_cast<float*>(nullptr), 4),
                           cohort::sum, s);
      },
      "all_reduce", "send", "is null");
}

TEST_CASE("bad input: an NCCL all_reduce of another GPU's memory") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto comm = one_rank(device_ref{0});
  cohort::stream s0(device_ref{0}), s1(device_ref{1});
  cohort::device_buffer<float> elsewhere(16, s1);
  poison(elsewhere);
  rejected([&] { cohort::all_reduce(comm, elsewhere.span(), cohort::sum, s0); }, "all_reduce",
           "send", "is memory of device 1");
  untouched(elsewhere);
}

TEST_CASE("bad input: an NCCL all_reduce on a stream of another device") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto comm = one_rank(device_ref{0});
  cohort::stream s0(device_ref{0}), s1(device_ref{1});
  cohort::device_buffer<float> x(8, s0);
  poison(x);
  rejected([&] { cohort::all_reduce(comm, x.span(), cohort::sum, s1); }, "all_reduce", "stream",
           "is on device 1");
  untouched(x);
}

TEST_CASE("bad input: an NCCL broadcast from a root out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  cohort::device_buffer<float> a(10, s);
  poison(a);
  rejected([&] { cohort::broadcast(comm, a.span(), 1, s); }, "broadcast", "root",
           "rank 1 is not in [0, 1)");
  untouched(a);
}

TEST_CASE("bad input: an NCCL all_gather into a recv of the wrong size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  cohort::device_buffer<int> a(10, s), b(9, s);
  a.fill_bytes(0);
  poison(b);
  rejected([&] { cohort::all_gather(comm, std::as_const(a).span(), b.span(), s); }, "all_gather",
           "recv", "size() times the size of 'send'");
  untouched(b);
}

TEST_CASE("bad input: an NCCL reduce_scatter from a send of the wrong size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  cohort::device_buffer<int> a(10, s), b(9, s);
  a.fill_bytes(0);
  poison(b);
  rejected([&] { cohort::reduce_scatter(comm, std::as_const(a).span(), b.span(), cohort::sum, s); },
           "reduce_scatter", "send");
  untouched(b);
}

TEST_CASE("bad input: an NCCL send to a rank out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  cohort::device_buffer<float> a(10, s);
  rejected([&] { cohort::send(comm, a.span(), -1, s); }, "send", "peer");
}

TEST_CASE("bad input: an NCCL recv into host memory") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  std::vector<float> host(4, 3.0f);
  rejected([&] { cohort::recv(comm, cuda::std::span<float>(host.data(), 4), 0, s); }, "recv",
           "data", "is host memory");
  CHECK(std::count(host.begin(), host.end(), 3.0f) == 4);
}

TEST_CASE("bad input: a communicator split with a negative color") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto comm = one_rank(device_ref{0});
  rejected([&] { (void)comm.split(-1, 0); }, "communicator::split", "color");
}

TEST_CASE("bad input: waiting on an aborted communicator") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const device_ref d{0};
  auto comm = one_rank(d);
  cohort::stream s(d);
  comm.abort();
  rejected([&] { comm.wait(s); }, "communicator::wait", "this", "aborted or moved from");
}

TEST_CASE("bad input: a clique collective over a buffer made over another group") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group({device_ref{0}, device_ref{1}});
  cohort::device_group other({device_ref{0}, device_ref{1}}); // same GPUs, other streams
  cohort::nccl_clique nccl(group, 120s);
  cohort::distributed_buffer<float> x(other, cohort::partition::replicated(64, 2));
  poison(x);
  rejected([&] { cohort::all_reduce(nccl, x, cohort::sum); }, "all_reduce", "data",
           "the buffer was made over another group");
  untouched(x);
}

TEST_CASE("bad input: a clique split with a color per rank missing") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group({device_ref{0}, device_ref{1}});
  cohort::nccl_clique nccl(group, 120s);
  rejected([&] { (void)nccl.split({0}); }, "nccl_clique::split", "colors", "one per rank");
}

#endif // COHORT_WITH_NCCL

// --- the peer-to-peer engine --------------------------------------------------------------------

TEST_CASE("bad input: p2p one_shot above the clique's limit") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group, 1024);
  REQUIRE(peers.one_shot_limit() == 1024);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(1000, 2));
  poison(x);
  rejected(
      [&] {
        cohort::all_reduce(peers, x, cohort::sum, {.algorithm = cohort::p2p_algorithm::one_shot});
      },
      "all_reduce (p2p)", "options.algorithm", "one_shot takes at most 1024 bytes");
  untouched(x);
}

TEST_CASE("bad input: p2p all_reduce over shards of different sizes") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> uneven(group, cohort::partition::even(1001, 2));
  poison(uneven);
  rejected([&] { cohort::all_reduce(peers, uneven, cohort::sum); }, "all_reduce (p2p)", "data",
           "every rank's buffer must be the same size");
  untouched(uneven);
}

TEST_CASE("bad input: p2p all_reduce into a recv of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(1000, 2));
  cohort::distributed_buffer<float> small(group, cohort::partition::replicated(999, 2));
  poison(small);
  rejected([&] { cohort::all_reduce(peers, std::as_const(x), small, cohort::sum); },
           "all_reduce (p2p)", "recv");
  untouched(small);
}

TEST_CASE("bad input: p2p all_reduce over a buffer made over another group") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  auto other = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> x(other, cohort::partition::replicated(100, 2));
  poison(x);
  rejected([&] { cohort::all_reduce(peers, x, cohort::sum); }, "all_reduce (p2p)", "data",
           "made over another group");
  untouched(x);
}

TEST_CASE("bad input: p2p broadcast from a root out of range") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(100, 2));
  poison(x);
  rejected([&] { cohort::broadcast(peers, x, 2); }, "broadcast (p2p)", "root",
           "rank 2 is not in [0, 2)");
  untouched(x);
}

TEST_CASE("bad input: p2p reduce into a recv of another size") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(100, 2));
  cohort::distributed_buffer<float> small(group, cohort::partition::replicated(99, 2));
  poison(small);
  rejected([&] { cohort::reduce(peers, std::as_const(x), small, cohort::sum, 0); }, "reduce (p2p)",
           "recv");
  untouched(small);
}

TEST_CASE("bad input: p2p reduce_scatter from a send that is not size() times recv") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(100, 2));
  cohort::distributed_buffer<float> y(group, cohort::partition::replicated(100, 2));
  poison(y);
  rejected([&] { cohort::reduce_scatter(peers, std::as_const(x), y, cohort::sum); },
           "reduce_scatter (p2p)", "send");
  untouched(y);
}

TEST_CASE("bad input: p2p spans, fewer than the members") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  cohort::device_buffer<float> a(16, group.stream(0));
  poison(a);
  std::vector<cuda::std::span<float>> one{a.span()};
  rejected([&] { cohort::all_reduce(peers, one, cohort::sum); }, "all_reduce (p2p)", "data",
           "one span per member");
  untouched(a);
}

TEST_CASE("bad input: p2p spans of host memory") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  std::vector<float> host(10, 2.0f);
  std::vector<cuda::std::span<float>> on_host{cuda::std::span<float>(host.data(), 10),
                                              cuda::std::span<float>(host.data(), 10)};
  rejected([&] { cohort::all_reduce(peers, on_host, cohort::sum); }, "all_reduce (p2p)", "data[0]",
           "is host memory");
  CHECK(std::count(host.begin(), host.end(), 2.0f) == 10);
}

TEST_CASE("bad input: a p2p span on another member's device") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group({device_ref{0}, device_ref{1}});
  cohort::p2p_clique peers(group);
  cohort::device_buffer<float> a(16, group.stream(0)), b(16, group.stream(0));
  poison(a);
  poison(b);
  std::vector<cuda::std::span<float>> both_on_0{a.span(), b.span()};
  rejected([&] { cohort::all_reduce(peers, both_on_0, cohort::sum); }, "all_reduce (p2p)",
           "data[1]", "is memory of device 0; this call runs on device 1");
  untouched(a);
  untouched(b);
}

TEST_CASE("bad input: p2p all_gather whose send overlaps recv outside its own slot") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(2);
  cohort::p2p_clique peers(group);
  std::vector<cohort::device_buffer<int>> recv;
  std::vector<cuda::std::span<const int>> send;
  std::vector<cuda::std::span<int>> out;
  for (std::size_t i = 0; i < 2; ++i) {
    recv.emplace_back(2 * 64, group.stream(i));
    poison(recv.back());
  }
  for (std::size_t i = 0; i < 2; ++i) {
    // Rank i sends from the other rank's slot of its own recv: an overlap that is not in place.
    send.emplace_back(recv[i].data() + 64 * (1 - i), 64);
    out.push_back(recv[i].span());
  }
  rejected([&] { cohort::all_gather(peers, send, out); }, "all_gather (p2p)", "send",
           "overlaps its output");
  for (auto& r : recv)
    untouched(r);
}

TEST_CASE("bad input: a p2p clique of more than eight members") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto nine = cohort::device_group::emulated(device_ref{0}, 9);
  rejected([&] { cohort::p2p_clique peers(nine); }, "p2p_clique", "group", "at most 8");
}
