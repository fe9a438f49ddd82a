// Bad input, one test per case: every way a public function's arguments can be wrong gives a
// std::invalid_argument that names the function and the argument, before any work is enqueued
// (outputs poisoned first stay poisoned). Cases that need two real GPUs skip with fewer; the rest
// run on emulated groups where they need a group. Pure host checks (partition, adaptive weights,
// launcher variables, unique ids) are in tests/host.
//
// The cases are tables of rows: the case's name, the real GPUs it needs, what the refusal must
// name, and a `prepare` that builds what the call needs in a `scene` and returns the call that
// must be refused. `scene` poisons the outputs it is asked for and checks them afterwards; each
// row is registered as a doctest case of its own, so that ctest runs each one alone.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace {

using namespace std::chrono_literals;
using cohort::device_ref;
using refused_call = std::function<void()>;

// `call` must throw std::invalid_argument saying "cohort::<function>: argument '<argument>'" and,
// where given, `detail`.
void rejected(const refused_call& call, const std::string& function, const std::string& argument,
              const std::string& detail) {
  try {
    call();
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

// What one case builds: owns every object (destroyed last made first, so buffers go before the
// streams and groups they live on), poisons the outputs asked for, and checks them after the call.
class scene {
 public:
  scene() = default;
  scene(const scene&) = delete;
  scene& operator=(const scene&) = delete;
  ~scene() {
    while (!owned_.empty())
      owned_.pop_back();
  }

  template <class T, class... Args>
  T& make(Args&&... args) {
    auto made = std::make_shared<T>(std::forward<Args>(args)...);
    T& ref = *made;
    owned_.push_back(std::move(made));
    return ref;
  }
  // One stream per device, made at the first call.
  cohort::stream& stream(int device = 0) {
    for (auto [id, s] : streams_)
      if (id == device) return *s;
    cohort::stream& s = make<cohort::stream>(device_ref{device});
    streams_.emplace_back(device, &s);
    return s;
  }
  // A new group of `n` members each call: real GPUs where `n` are visible, else emulated.
  cohort::device_group& group(std::size_t n = 2) {
    cohort::device_group& g = make<cohort::device_group>(cohort::testing::group_of(n));
    groups_.push_back(&g);
    return g;
  }
  // A new group of real GPUs 0 and 1 each call (the case needs two GPUs).
  cohort::device_group& pair() {
    cohort::device_group& g =
        make<cohort::device_group>(std::vector<device_ref>{device_ref{0}, device_ref{1}});
    groups_.push_back(&g);
    return g;
  }
  // A buffer of zeros: an input the refused call must not need to read.
  template <class Buffer, class... Args>
  Buffer& zeroed(Args&&... args) {
    Buffer& b = make<Buffer>(std::forward<Args>(args)...);
    b.fill_bytes(0);
    return b;
  }
  // A buffer filled with the poison before the call and checked unwritten after it.
  template <class Buffer, class... Args>
  Buffer& poisoned(Args&&... args) {
    Buffer& b = make<Buffer>(std::forward<Args>(args)...);
    b.fill_bytes(cohort::testing::poison_byte);
    checks_.push_back([&b] { untouched(b); });
    return b;
  }
  // Host memory of `n` copies of `value`, checked unchanged after the call.
  template <class T>
  std::vector<T>& host(std::size_t n, T value) {
    std::vector<T>& v = make<std::vector<T>>(n, value);
    checks_.push_back([&v, n, value] {
      CHECK(static_cast<std::size_t>(std::count(v.begin(), v.end(), value)) == n);
    });
    return v;
  }

  // After the refused call: waits for every stream and group, then checks the outputs.
  void check_outputs() {
    for (auto [id, s] : streams_)
      s->synchronize();
    for (cohort::device_group* g : groups_)
      g->synchronize();
    for (const auto& check : checks_)
      check();
  }

 private:
  std::vector<std::shared_ptr<void>> owned_;
  std::vector<std::pair<int, cohort::stream*>> streams_;
  std::vector<cohort::device_group*> groups_;
  std::vector<std::function<void()>> checks_;
};

// One row of a table: a bad-input case.
struct bad_input {
  const char* name;     // the doctest case
  int gpus;             // real GPUs it needs; it is skipped with fewer
  const char* function; // the refusal must name cohort::<function> ...
  const char* argument; // ... and argument '<argument>' ...
  const char* detail;   // ... and say this ("" where the two are enough)
  refused_call (*prepare)(scene&);
};

// The one helper every case runs through.
void run(const bad_input& c) {
  COHORT_SKIP_UNLESS_GPUS(c.gpus);
  scene s;
  const refused_call call = c.prepare(s);
  rejected(call, c.function, c.argument, c.detail);
  s.check_outputs();
}

template <const auto& table, std::size_t i>
void run_row() {
  run(table[i]);
}

// Registers every row of `table` as a doctest case named for the row, as TEST_CASE does.
template <const auto& table, std::size_t... i>
int register_rows(std::index_sequence<i...>) {
  (doctest::detail::regTest(
       doctest::detail::TestCase(run_row<table, i>, __FILE__, __LINE__,
                                 doctest_detail_test_suite_ns::getCurrentTestSuite()) *
       table[i].name),
   ...);
  return 0;
}
#define COHORT_REGISTER_ROWS(table)                                                                \
  [[maybe_unused]] const int table##_registered =                                                  \
      register_rows<table>(std::make_index_sequence<std::size(table)>{})

// Device functors (an extended __device__ lambda may not sit in a lambda at namespace scope).
struct bump {
  __device__ void operator()(float& x) const { x += 1.0f; }
};
struct nothing_at {
  __device__ void operator()(std::size_t) const {}
};
struct as_long {
  __device__ long operator()(std::size_t i) const { return static_cast<long>(i); }
};
struct as_is {
  __device__ float operator()(float v) const { return v; }
};

// --- devices, streams, events, groups, buffers, algorithms --------------------------------------

// An emulated group of two, moved into another that the scene also keeps.
cohort::device_group& moved_from(scene& s) {
  auto& old = s.make<cohort::device_group>(cohort::device_group::emulated(device_ref{0}, 2));
  (void)s.make<cohort::device_group>(std::move(old));
  return old;
}

const bad_input basics[] = {
    {"bad input: a stream on a device out of range", 1, "stream", "device", "out of range",
     [](scene&) -> refused_call {
       return [] { cohort::stream s(device_ref{cohort::device_count()}); };
     }},
    {"bad input: an event on a negative device", 1, "event", "device", "device -1 is out of range",
     [](scene&) -> refused_call { return [] { cohort::event e(device_ref{-1}); }; }},
    {"bad input: recording an event on a stream of another device", 2, "event_ref::record",
     "stream", "is on device 1",
     [](scene& s) -> refused_call {
       cohort::stream& on_1 = s.stream(1);
       cohort::event& e = s.make<cohort::event>(device_ref{0});
       return [&] { e.record(on_1); };
     }},
    {"bad input: a group of no devices", 1, "device_group", "devices", "empty",
     [](scene&) -> refused_call {
       return [] { cohort::device_group g(std::vector<device_ref>{}); };
     }},
    {"bad input: a group that lists a device twice", 1, "device_group", "devices", "listed twice",
     [](scene&) -> refused_call {
       return [] { cohort::device_group g({device_ref{0}, device_ref{0}}); };
     }},
    {"bad input: a group with a device out of range", 1, "device_group", "devices", "out of range",
     [](scene&) -> refused_call {
       return [] { cohort::device_group g({device_ref{0}, device_ref{cohort::device_count()}}); };
     }},
    {"bad input: a distributed_buffer over a group moved from", 1, "distributed_buffer", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { cohort::distributed_buffer<int> x(old, 10); };
     }},
    {"bad input: a graph captured over a group moved from", 1, "group_graph::capture", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { (void)cohort::group_graph::capture(old, [] {}); };
     }},
    {"bad input: a balancer over a group moved from", 1, "adaptive_balancer", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { cohort::adaptive_balancer balancer(old); };
     }},
    {"bad input: a balancer with a smoothing above 1", 1, "adaptive_balancer", "smoothing",
     "must be in (0, 1]",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       return [&] { cohort::adaptive_balancer balancer(group, 1.5); };
     }},
    {"bad input: an emulated group of no devices", 1, "device_group::emulated", "n", "",
     [](scene&) -> refused_call {
       return [] { (void)cohort::device_group::emulated(device_ref{0}, 0); };
     }},
    {"bad input: a device_buffer whose bytes overflow the address space", 1, "device_buffer",
     "count", "overflow",
     [](scene& s) -> refused_call {
       cohort::stream& st = s.stream();
       return [&] { cohort::device_buffer<double> b(SIZE_MAX / 4, st); };
     }},
    {"bad input: copy_from_host from a host span of another size", 1,
     "device_buffer::copy_from_host", "source", "has 9 elements but the buffer has 10",
     [](scene& s) -> refused_call {
       auto& b = s.poisoned<cohort::device_buffer<int>>(10, s.stream());
       auto& host = s.host<int>(9, 1);
       return [&] { b.copy_from_host(host); };
     }},
    {"bad input: copy_to_host into a host span of another size", 1, "device_buffer::copy_to_host",
     "target", "",
     [](scene& s) -> refused_call {
       auto& b = s.make<cohort::device_buffer<int>>(10, s.stream());
       auto& host = s.host<int>(11, 7);
       return [&] { b.copy_to_host(host); };
     }},
    {"bad input: copy_to a buffer of another size", 1, "device_buffer::copy_to", "target",
     "has 11 elements",
     [](scene& s) -> refused_call {
       auto& a = s.zeroed<cohort::device_buffer<int>>(10, s.stream());
       auto& b = s.poisoned<cohort::device_buffer<int>>(11, s.stream());
       return [&] { a.copy_to(b); };
     }},
    {"bad input: a distributed_buffer whose split has more parts than the group", 1,
     "distributed_buffer", "split", "has 3 parts but the group has 2",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       return [&] { cohort::distributed_buffer<float> x(group, cohort::partition::even(10, 3)); };
     }},
    {"bad input: a distributed_buffer filled from a host span of another size", 1,
     "distributed_buffer::copy_from_host", "source", "",
     [](scene& s) -> refused_call {
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(s.group(), 10);
       auto& wrong = s.host<float>(11, 1.0f);
       return [&] { x.copy_from_host(wrong); };
     }},
    {"bad input: a distributed_buffer read into a host span of another size", 1,
     "distributed_buffer::copy_to_host", "target", "",
     [](scene& s) -> refused_call {
       auto& x = s.make<cohort::distributed_buffer<float>>(s.group(), 10);
       auto& wrong = s.host<float>(9, 1.0f);
       return [&] { x.copy_to_host(wrong); };
     }},
    {"bad input: for_each over a buffer made over another group", 1, "multi_device_for_each",
     "range", "shard 0 is not on member 0's stream",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(s.group(), 10);
       return [&] { cohort::multi_device_for_each(group, x, bump{}); };
     }},
    {"bad input: for_each over a group moved from", 1, "multi_device_for_each", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(s.group(), 10);
       return [&] { cohort::multi_device_for_each(old, x, bump{}); };
     }},
    {"bad input: a scan over a group moved from", 1, "multi_device_inclusive_scan", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       auto& x = s.poisoned<cohort::distributed_buffer<int>>(s.group(), 10);
       return [&] { cohort::multi_device_inclusive_scan(old, x, cuda::std::plus<>{}); };
     }},
    {"bad input: a sort over a group moved from", 1, "multi_device_sort", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       auto& x = s.poisoned<cohort::distributed_buffer<unsigned>>(s.group(), 10);
       return [&] { cohort::multi_device_sort(old, x); };
     }},
    // The index forms and the device result take no buffer whose check would see the group
    // first: each checks the group itself, before making an even split of its members.
    {"bad input: for_each over indices split evenly over a group moved from", 1,
     "multi_device_for_each", "group", "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { cohort::multi_device_for_each(old, cohort::indices(10), nothing_at{}); };
     }},
    {"bad input: for_each over indices with a split over a group moved from", 1,
     "multi_device_for_each", "group", "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] {
         cohort::multi_device_for_each(old, cohort::indices(10, cohort::partition::even(10, 2)),
                                       nothing_at{});
       };
     }},
    {"bad input: for_each over indices with a balancer over a group moved from", 1,
     "multi_device_for_each", "group", "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       auto& balancer = s.make<cohort::adaptive_balancer>(s.group());
       return
           [&] { cohort::multi_device_for_each(old, cohort::indices(10, balancer), nothing_at{}); };
     }},
    {"bad input: transform_reduce over indices split evenly over a group moved from", 1,
     "multi_device_transform_reduce", "group", "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] {
         (void)cohort::multi_device_transform_reduce(old, cohort::indices(10), 0L,
                                                     cuda::std::plus<long>{}, as_long{});
       };
     }},
    {"bad input: transform_reduce over indices into a device_result over a group moved from", 1,
     "multi_device_transform_reduce", "group", "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       auto& result = s.make<cohort::device_result<long>>(s.group());
       return [&] {
         cohort::multi_device_transform_reduce(old, cohort::indices(10), 0L,
                                               cuda::std::plus<long>{}, as_long{}, result);
       };
     }},
    {"bad input: capability weights of a group moved from", 1, "by_capability", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { (void)cohort::by_capability(old); };
     }},
    {"bad input: a device_result over a group moved from", 1, "device_result", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { cohort::device_result<long> result(old); };
     }},
    {"bad input: a sort by key with the keys as their own values", 1, "multi_device_sort_by_key",
     "values", "is the keys buffer",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& x = s.poisoned<cohort::distributed_buffer<unsigned>>(group, 10);
       return [&] { cohort::multi_device_sort_by_key(group, x, x); };
     }},
    {"bad input: for_each over a buffer with more shards than the group has members", 1,
     "multi_device_for_each", "range", "has 3 shards but the group has 2",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& y = s.poisoned<cohort::distributed_buffer<float>>(s.group(3), 10);
       return [&] { cohort::multi_device_for_each(group, y, bump{}); };
     }},
    {"bad input: for_each over indices with a split of another number of parts", 1,
     "multi_device_for_each", "range", "is split in 3 parts",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       return [&] {
         cohort::multi_device_for_each(group, cohort::indices(10, cohort::partition::even(10, 3)),
                                       nothing_at{});
       };
     }},
    {"bad input: for_each over indices with a split that covers another n", 1,
     "multi_device_for_each", "range", "is split in 2 parts covering 11 items",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       return [&] {
         cohort::multi_device_for_each(group, cohort::indices(10, cohort::partition::even(11, 2)),
                                       nothing_at{});
       };
     }},
    {"bad input: transform_reduce over indices with a split that does not fit", 1,
     "multi_device_transform_reduce", "input", "",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       return [&] {
         (void)cohort::multi_device_transform_reduce(
             group, cohort::indices(10, cohort::partition::even(12, 2)), 0L,
             cuda::std::plus<long>{}, as_long{});
       };
     }},
    {"bad input: transform_reduce over a buffer made over another group", 1,
     "multi_device_transform_reduce", "input", "",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& x = s.make<cohort::distributed_buffer<float>>(s.group(), 10);
       return [&] {
         (void)cohort::multi_device_transform_reduce(group, x, 0.0f, cuda::std::plus<float>{},
                                                     as_is{});
       };
     }},
};
COHORT_REGISTER_ROWS(basics);

// --- NCCL communicators and collectives ---------------------------------------------------------

#if COHORT_WITH_NCCL
cohort::communicator& one_rank(scene& s, device_ref d = device_ref{0}) {
  return s.make<cohort::communicator>(
      cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s));
}

const bad_input nccl[] = {
    {"bad input: a communicator of no ranks", 1, "communicator::create", "size", "",
     [](scene&) -> refused_call {
       return [] {
         (void)cohort::communicator::create(cohort::unique_id::create(), 0, 0, device_ref{0});
       };
     }},
    {"bad input: a communicator rank out of range", 1, "communicator::create", "rank", "got 2 of 2",
     [](scene&) -> refused_call {
       return [] {
         (void)cohort::communicator::create(cohort::unique_id::create(), 2, 2, device_ref{0});
       };
     }},
    {"bad input: a communicator on a device out of range", 1, "communicator::create", "device",
     "out of range",
     [](scene&) -> refused_call {
       return [] {
         (void)cohort::communicator::create(cohort::unique_id::create(), 1, 0,
                                            device_ref{cohort::device_count()});
       };
     }},
    {"bad input: an NCCL clique over a group moved from", 1, "nccl_clique", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { cohort::nccl_clique clique(old); };
     }},
    {"bad input: NCCL communicators over a group moved from", 1, "communicator::create_clique",
     "group", "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { (void)cohort::communicator::create_clique(old); };
     }},
    {"bad input: an NCCL clique over an emulated group", 1, "communicator::create_clique", "group",
     "NCCL refuses two ranks on one GPU",
     [](scene& s) -> refused_call {
       auto& emulated =
           s.make<cohort::device_group>(cohort::device_group::emulated(device_ref{0}, 2));
       return [&] { cohort::nccl_clique clique(emulated); };
     }},
    {"bad input: an NCCL all_reduce into a recv of another size", 1, "all_reduce", "recv",
     "has 11 elements; expected 10",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& a = s.zeroed<cohort::device_buffer<float>>(10, st);
       auto& b = s.poisoned<cohort::device_buffer<float>>(11, st);
       return [&] { cohort::all_reduce(comm, st, a.span(), b.span(), cohort::sum); };
     }},
    {"bad input: an NCCL all_reduce whose send and recv partly overlap", 1, "all_reduce", "recv",
     "overlaps 'send'",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& a = s.poisoned<cohort::device_buffer<float>>(10, st);
       return [&] {
         cohort::all_reduce(comm, st, a.span().subspan(0, 6), a.span().subspan(2, 6), cohort::sum);
       };
     }},
    {"bad input: an NCCL all_reduce of host memory", 1, "all_reduce", "send", "is host memory",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& host = s.host<float>(16, 1.0f);
       auto& out = s.poisoned<cohort::device_buffer<float>>(16, st);
       return [&] {
         cohort::all_reduce(comm, st, cuda::std::span<const float>(host.data(), host.size()),
                            out.span(), cohort::sum);
       };
     }},
    {"bad input: an NCCL all_reduce of a null span that claims elements", 1, "all_reduce", "send",
     "is null",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       return [&] {
         cohort::all_reduce(comm, st, cuda::std::span<float>(static_cast<float*>(nullptr), 4),
                            cohort::sum);
       };
     }},
    {"bad input: an NCCL all_reduce of another GPU's memory", 2, "all_reduce", "send",
     "is memory of device 1",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& s0 = s.stream(0);
       auto& elsewhere = s.poisoned<cohort::device_buffer<float>>(16, s.stream(1));
       return [&] { cohort::all_reduce(comm, s0, elsewhere.span(), cohort::sum); };
     }},
    {"bad input: an NCCL all_reduce on a stream of another device", 2, "all_reduce", "stream",
     "is on device 1",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       auto& x = s.poisoned<cohort::device_buffer<float>>(8, s.stream(0));
       cohort::stream& s1 = s.stream(1);
       return [&] { cohort::all_reduce(comm, s1, x.span(), cohort::sum); };
     }},
    {"bad input: an NCCL broadcast from a root out of range", 1, "broadcast", "root",
     "rank 1 is not in [0, 1)",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& a = s.poisoned<cohort::device_buffer<float>>(10, st);
       return [&] { cohort::broadcast(comm, st, a.span(), 1); };
     }},
    {"bad input: an NCCL all_gather into a recv of the wrong size", 1, "all_gather", "recv",
     "size() times the size of 'send'",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& a = s.zeroed<cohort::device_buffer<int>>(10, st);
       auto& b = s.poisoned<cohort::device_buffer<int>>(9, st);
       return [&] { cohort::all_gather(comm, st, std::as_const(a).span(), b.span()); };
     }},
    {"bad input: an NCCL reduce_scatter from a send of the wrong size", 1, "reduce_scatter", "send",
     "",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& a = s.zeroed<cohort::device_buffer<int>>(10, st);
       auto& b = s.poisoned<cohort::device_buffer<int>>(9, st);
       return [&] {
         cohort::reduce_scatter(comm, st, std::as_const(a).span(), b.span(), cohort::sum);
       };
     }},
    {"bad input: an NCCL send to a rank out of range", 1, "send", "peer", "",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& a = s.make<cohort::device_buffer<float>>(10, st);
       return [&] { cohort::send(comm, st, a.span(), -1); };
     }},
    {"bad input: an NCCL recv into host memory", 1, "recv", "data", "is host memory",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       auto& host = s.host<float>(4, 3.0f);
       return [&] { cohort::recv(comm, st, cuda::std::span<float>(host.data(), 4), 0); };
     }},
    {"bad input: a communicator split with a negative color", 1, "communicator::split", "color", "",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       return [&] { (void)comm.split(-1, 0); };
     }},
    {"bad input: waiting on an aborted communicator", 1, "communicator::wait", "this",
     "aborted or moved from",
     [](scene& s) -> refused_call {
       auto& comm = one_rank(s);
       cohort::stream& st = s.stream();
       comm.abort();
       return [&] { comm.wait(st); };
     }},
    {"bad input: a clique collective over a buffer made over another group", 2, "all_reduce",
     "data", "the buffer was made over another group",
     [](scene& s) -> refused_call {
       auto& clique = s.make<cohort::nccl_clique>(s.pair(), 120s);
       // The same GPUs, other streams.
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(
           s.pair(), cohort::partition::replicated(64, 2));
       return [&] { cohort::all_reduce(clique, x, cohort::sum); };
     }},
    {"bad input: a clique split with a color per rank missing", 2, "nccl_clique::split", "colors",
     "one per rank",
     [](scene& s) -> refused_call {
       auto& clique = s.make<cohort::nccl_clique>(s.pair(), 120s);
       return [&] { (void)clique.split({0}); };
     }},
};
COHORT_REGISTER_ROWS(nccl);
#endif // COHORT_WITH_NCCL

// --- the peer-to-peer engine --------------------------------------------------------------------

const bad_input p2p[] = {
    {"bad input: p2p one_shot above the clique's limit", 1, "all_reduce (p2p)", "options.algorithm",
     "one_shot takes at most 1024 bytes",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group, 1024);
       REQUIRE(peers.one_shot_limit() == 1024);
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(
           group, cohort::partition::replicated(1000, 2));
       return [&] {
         cohort::all_reduce(peers, x, cohort::sum, {.algorithm = cohort::p2p_algorithm::one_shot});
       };
     }},
    {"bad input: p2p all_reduce over shards of different sizes", 1, "all_reduce (p2p)", "data",
     "every rank's buffer must be the same size",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& uneven =
           s.poisoned<cohort::distributed_buffer<float>>(group, cohort::partition::even(1001, 2));
       return [&] { cohort::all_reduce(peers, uneven, cohort::sum); };
     }},
    {"bad input: p2p all_reduce into a recv of another size", 1, "all_reduce (p2p)", "recv", "",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& x =
           s.make<cohort::distributed_buffer<float>>(group, cohort::partition::replicated(1000, 2));
       auto& small = s.poisoned<cohort::distributed_buffer<float>>(
           group, cohort::partition::replicated(999, 2));
       return [&] { cohort::all_reduce(peers, std::as_const(x), small, cohort::sum); };
     }},
    {"bad input: p2p all_reduce over a buffer made over another group", 1, "all_reduce (p2p)",
     "data", "made over another group",
     [](scene& s) -> refused_call {
       auto& peers = s.make<cohort::p2p_clique>(s.group());
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(
           s.group(), cohort::partition::replicated(100, 2));
       return [&] { cohort::all_reduce(peers, x, cohort::sum); };
     }},
    {"bad input: p2p broadcast from a root out of range", 1, "broadcast (p2p)", "root",
     "rank 2 is not in [0, 2)",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& x = s.poisoned<cohort::distributed_buffer<float>>(
           group, cohort::partition::replicated(100, 2));
       return [&] { cohort::broadcast(peers, x, 2); };
     }},
    {"bad input: p2p reduce into a recv of another size", 1, "reduce (p2p)", "recv", "",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& x =
           s.make<cohort::distributed_buffer<float>>(group, cohort::partition::replicated(100, 2));
       auto& small = s.poisoned<cohort::distributed_buffer<float>>(
           group, cohort::partition::replicated(99, 2));
       return [&] { cohort::reduce(peers, std::as_const(x), small, cohort::sum, 0); };
     }},
    {"bad input: p2p reduce_scatter from a send that is not size() times recv", 1,
     "reduce_scatter (p2p)", "send", "",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& x =
           s.make<cohort::distributed_buffer<float>>(group, cohort::partition::replicated(100, 2));
       auto& y = s.poisoned<cohort::distributed_buffer<float>>(
           group, cohort::partition::replicated(100, 2));
       return [&] { cohort::reduce_scatter(peers, std::as_const(x), y, cohort::sum); };
     }},
    {"bad input: p2p spans, fewer than the members", 1, "all_reduce (p2p)", "data",
     "one span per member",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& a = s.poisoned<cohort::device_buffer<float>>(16, group.stream(0));
       auto& one = s.make<std::vector<cuda::std::span<float>>>(1, a.span());
       return [&] { cohort::all_reduce(peers, one, cohort::sum); };
     }},
    {"bad input: p2p spans of host memory", 1, "all_reduce (p2p)", "data[0]", "is host memory",
     [](scene& s) -> refused_call {
       auto& peers = s.make<cohort::p2p_clique>(s.group());
       auto& host = s.host<float>(10, 2.0f);
       auto& on_host =
           s.make<std::vector<cuda::std::span<float>>>(2, cuda::std::span<float>(host.data(), 10));
       return [&] { cohort::all_reduce(peers, on_host, cohort::sum); };
     }},
    {"bad input: p2p spans that claim more than their buffers hold", 1, "all_reduce (p2p)",
     "data[0]", "runs past the end of its allocation",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& too_long = s.make<std::vector<cuda::std::span<float>>>();
       // 16 floats each, claimed as 2^38 (1 TiB): the last byte lies where no allocation is.
       for (std::size_t i = 0; i < 2; ++i)
         too_long.emplace_back(s.poisoned<cohort::device_buffer<float>>(16, group.stream(i)).data(),
                               std::size_t{1} << 38);
       return [&] { cohort::all_reduce(peers, too_long, cohort::sum); };
     }},
    {"bad input: a p2p span on another member's device", 2, "all_reduce (p2p)", "data[1]",
     "is memory of device 0; this call runs on device 1",
     [](scene& s) -> refused_call {
       auto& group = s.pair();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& a = s.poisoned<cohort::device_buffer<float>>(16, group.stream(0));
       auto& b = s.poisoned<cohort::device_buffer<float>>(16, group.stream(0));
       auto& both_on_0 =
           s.make<std::vector<cuda::std::span<float>>>(std::vector{a.span(), b.span()});
       return [&] { cohort::all_reduce(peers, both_on_0, cohort::sum); };
     }},
    {"bad input: p2p all_gather whose send overlaps recv outside its own slot", 1,
     "all_gather (p2p)", "send", "overlaps its output",
     [](scene& s) -> refused_call {
       auto& group = s.group();
       auto& peers = s.make<cohort::p2p_clique>(group);
       auto& send = s.make<std::vector<cuda::std::span<const int>>>();
       auto& out = s.make<std::vector<cuda::std::span<int>>>();
       for (std::size_t i = 0; i < 2; ++i)
         out.push_back(s.poisoned<cohort::device_buffer<int>>(2 * 64, group.stream(i)).span());
       // Rank i sends from the other rank's slot of its own recv: an overlap that is not in place.
       for (std::size_t i = 0; i < 2; ++i)
         send.emplace_back(out[i].data() + 64 * (1 - i), 64);
       return [&] { cohort::all_gather(peers, send, out); };
     }},
    {"bad input: a p2p clique over a group moved from", 1, "p2p_clique", "group",
     "it was moved from",
     [](scene& s) -> refused_call {
       auto& old = moved_from(s);
       return [&] { cohort::p2p_clique peers(old); };
     }},
    {"bad input: a p2p clique of more than eight members", 1, "p2p_clique", "group", "at most 8",
     [](scene& s) -> refused_call {
       auto& nine = s.make<cohort::device_group>(cohort::device_group::emulated(device_ref{0}, 9));
       return [&] { cohort::p2p_clique peers(nine); };
     }},
};
COHORT_REGISTER_ROWS(p2p);

} // namespace
