// NCCL communicators and collectives: one-rank communicators and time-outs on one GPU; a clique
// over two or more real GPUs against host references for every type and operator.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

namespace {

using namespace std::chrono_literals;

template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return static_cast<double>(v);
}

// The distance from 1 to the next value of T.
template <class T>
double epsilon_of() {
  if constexpr (std::is_same_v<T, __half>)
    return 1.0 / 1024;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return 1.0 / 128;
  else if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::epsilon();
  else
    return 0.0;
}

// Values for rank r: small integers so sums and products are exact in every type.
template <class T>
std::vector<T> rank_values(std::size_t n, int rank, bool for_product) {
  std::vector<T> v(n);
  const auto r = cohort::testing::random_values<int>(n, 100 + rank);
  for (std::size_t i = 0; i < n; ++i) {
    const int x = for_product ? (r[i] % 2 == 0 ? 1 : 2) : r[i] % 16;
    v[i] = static_cast<T>(static_cast<float>(x));
  }
  return v;
}

const std::size_t counts[] = {0, 1, 2, 7919, (1u << 20) + 7};

// Fresh random values in every rank's shard of `x`, returned for the host reference.
std::vector<std::vector<int>> fresh_inputs(cohort::distributed_buffer<int>& x, unsigned seed) {
  std::vector<std::vector<int>> in(x.shards());
  for (std::size_t r = 0; r < in.size(); ++r) {
    in[r] = cohort::testing::random_values<int>(x.shard(r).data.size(), seed + r);
    x.local(r).copy_from_host(in[r]);
  }
  return in;
}

// Elements of `y`'s shards that are not the sum over ranks of `in`, and (where `root` is given)
// elements of `root`'s shards that are not rank 0's input.
std::size_t wrong_sums(cohort::device_group& group, const cohort::distributed_buffer<int>& y,
                       const std::vector<std::vector<int>>& in,
                       const cohort::distributed_buffer<int>* root = nullptr) {
  std::size_t bad = 0;
  const std::size_t n = in[0].size();
  for (std::size_t r = 0; r < in.size(); ++r) {
    std::vector<int> out(n), from_root(n);
    y.local(r).copy_to_host(out);
    if (root != nullptr) root->local(r).copy_to_host(from_root);
    group.synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      int total = 0;
      for (const auto& mine : in)
        total += mine[i];
      bad += out[i] != total;
      if (root != nullptr) bad += from_root[i] != in[0][i];
    }
  }
  return bad;
}

} // namespace

TYPE_TO_STRING(__half);
TYPE_TO_STRING(__nv_bfloat16);

// The byte movers take every bitwise copyable type (memory/bitwise_copyable.cuh): __half2, which
// declares a copy constructor, and a type of the user's that specializes the trait. Before, they
// took only trivially copyable types and neither compiled.
namespace {
struct tagged_pair {
  __half2 value;
  int tag;
};
} // namespace
template <>
struct cohort::bitwise_copyable<tagged_pair> : std::true_type {};
namespace {

// On one rank every collective is the identity: each one T allows (the reductions only for
// arithmetic T) writes its own poisoned output, out of place, and is checked byte for byte, so a
// collective that does nothing leaves poison.
template <class T>
void check_one_rank_identities(cohort::communicator& comm, const std::vector<T>& in) {
  cohort::stream s(comm.device());
  const std::size_t n = in.size();
  cohort::device_buffer<T> a(n, s);
  a.copy_from_host(in);
  std::vector<const char*> names;
  std::vector<cohort::device_buffer<T>> out;
  out.reserve(6);
  const auto poisoned = [&](const char* name) {
    names.push_back(name);
    out.emplace_back(n, s);
    out.back().fill_bytes(cohort::testing::poison_byte);
    return out.back().span();
  };
  const cuda::std::span<const T> from(a.span());
  cohort::broadcast(comm, s, from, poisoned("broadcast"), 0);
  cohort::all_gather(comm, s, from, poisoned("all_gather"));
  const auto received = poisoned("send/recv");
  {
    cohort::nccl_group both; // a send to oneself needs its recv in the same group
    cohort::send(comm, s, from, 0);
    cohort::recv(comm, s, received, 0);
    both.end();
  }
  if constexpr (std::is_arithmetic_v<T>) {
    cohort::all_reduce(comm, s, from, poisoned("all_reduce"), cohort::max);
    cohort::reduce(comm, s, from, poisoned("reduce"), cohort::avg, 0);
    cohort::reduce_scatter(comm, s, from, poisoned("reduce_scatter"), cohort::min);
  }
  comm.wait(s, 60s);
  for (std::size_t k = 0; k < out.size(); ++k) {
    CAPTURE(names[k]);
    std::vector<T> got(n);
    out[k].copy_to_host(got);
    s.synchronize();
    CHECK(std::memcmp(got.data(), in.data(), n * sizeof(T)) == 0);
  }
}

} // namespace

TEST_CASE("a one-rank communicator runs every collective, its calls blocking or bounded") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  for (const auto calls : {cohort::nccl_calls::blocking, cohort::nccl_calls::bounded}) {
    const int mode = static_cast<int>(calls);
    CAPTURE(mode);
    auto comm = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s, calls);
    CHECK(comm.calls() == calls);
    CHECK(comm.rank() == 0);
    CHECK(comm.size() == 1);
    CHECK(comm.device() == d);
    check_one_rank_identities(comm, cohort::testing::random_values<float>(4099, 1));
  }
}

// NCCL's one-rank kernel for an average splits the count over its blocks in 16-byte units rounded
// down: 100,004 floats over its 25 blocks stopped at 100,000, leaving the last four unwritten.
TEST_CASE("a one-rank average writes every element, whatever the count") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  auto comm = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
  cohort::stream s(d);
  for (std::size_t n : {std::size_t{100004}, std::size_t{65540}, std::size_t{1000003}}) {
    CAPTURE(n);
    const auto values = cohort::testing::random_values<float>(n, 11);
    cohort::device_buffer<float> send(n, s), recv(n, s);
    send.copy_from_host(values);
    auto check = [&](const char* call) {
      std::vector<float> got(n);
      recv.copy_to_host(got);
      s.synchronize();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += got[i] != values[i];
      CHECK_MESSAGE(wrong == 0, call);
      recv.fill_bytes(cohort::testing::poison_byte);
    };
    recv.fill_bytes(cohort::testing::poison_byte);
    cohort::all_reduce(comm, s, std::as_const(send).span(), recv.span(), cohort::avg);
    check("all_reduce");
    cohort::reduce(comm, s, std::as_const(send).span(), recv.span(), cohort::avg, 0);
    check("reduce");
    cohort::reduce_scatter(comm, s, std::as_const(send).span(), recv.span(), cohort::avg);
    check("reduce_scatter");
  }
}

TEST_CASE("broadcast, all_gather, send and recv move bitwise copyable types NCCL has no type for") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const std::size_t n = 7919;
  const auto r = cohort::testing::random_values<float>(2 * n, 5);
  std::vector<__half2> pairs(n);
  std::vector<tagged_pair> tagged(n);
  for (std::size_t i = 0; i < n; ++i) {
    pairs[i] = __floats2half2_rn(r[2 * i], r[2 * i + 1]);
    tagged[i] = {pairs[i], int(i)};
  }
  auto comm =
      cohort::communicator::create(cohort::unique_id::create(), 1, 0, cohort::device_ref{0}, 60s);
  check_one_rank_identities(comm, pairs);
  check_one_rank_identities(comm, tagged);
}

// A rank whose rank 0 never writes the id file: a timeout_error naming the rank and its GPU (it
// was a std::runtime_error naming neither). LOCAL_RANK 0: GPU 0 wherever one GPU is visible.
TEST_CASE("a bootstrap whose id file never appears throws a timeout_error naming the rank") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::testing::environment_guard rank("RANK", "1"), size("WORLD_SIZE", "2"),
      local("LOCAL_RANK", "0");
  CHECK_THROWS_WITH_AS(
      (void)cohort::bootstrap_from_environment("no/such/cohort_bootstrap.id", 50ms),
      doctest::Contains("bootstrap_from_environment (rank 1, GPU 0): cohort::unique_id::read_file"),
      cohort::timeout_error);
}

TEST_CASE("a rank that never joins makes creation time out and a new communicator works after") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  const auto started = std::chrono::steady_clock::now();
  try {
    (void)cohort::communicator::create(cohort::unique_id::create(), 2, 0, d, 2s);
    FAIL("creation with a missing rank did not fail");
  } catch (const cohort::timeout_error& e) {
    const std::string text = e.what();
    CHECK(text.find("rank 0 of 2") != std::string::npos);
    CHECK(text.find("within 2000 ms") != std::string::npos);
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(waited >= 1.9);
  CHECK(waited < 30.0);
  auto fresh = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
  cohort::stream s(d);
  const auto in = cohort::testing::random_values<int>(3, 5);
  cohort::device_buffer<int> x(3, s), y(3, s);
  x.copy_from_host(in);
  y.fill_bytes(cohort::testing::poison_byte);
  cohort::all_reduce(fresh, s, x.span(), y.span(), cohort::sum);
  CHECK_NOTHROW(fresh.wait(s, 60s));
  std::vector<int> out(3);
  y.copy_to_host(out);
  s.synchronize();
  CHECK(out == in);
}

// NCCL frees an aborted communicator at once and often puts the next one at the same address.
// Before the abort was recorded per communicator, making B forgot A's abort (the registry was
// keyed by address), so A's owner then finalized and destroyed B.
TEST_CASE("a communicator aborted through a ref stays aborted when NCCL reuses its address") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::stream s(d);
  const auto in = cohort::testing::random_values<int>(1000, 9);
  cohort::device_buffer<int> x(1000, s), y(1000, s);
  x.copy_from_host(in);
  auto a = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
  const ncclComm_t old_address = a.native_handle();
  cohort::detail::abort(cohort::communicator_ref(a)); // as a time-out inside a collective does
  CHECK(a.empty());
  {
    auto b = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
    if (b.native_handle() == old_address)
      MESSAGE("NCCL put the new communicator at the aborted one's address");
    CHECK(a.empty());
    CHECK_FALSE(b.empty());
    CHECK_THROWS_AS(cohort::all_reduce(a, s, x.span(), y.span(), cohort::sum),
                    std::invalid_argument);
    { cohort::communicator gone = std::move(a); } // A's owner ends: B must live on
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::all_reduce(b, s, x.span(), y.span(), cohort::sum);
    b.wait(s, 60s);
    std::vector<int> out(1000);
    y.copy_to_host(out);
    s.synchronize();
    CHECK(out == in);
  }
}

TEST_CASE_TEMPLATE("a clique all-reduces every type with every operator", T, float, double, int,
                   __half, __nv_bfloat16) {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group, 120s);
  const int ranks = static_cast<int>(group.size());
  for (std::size_t n : counts) {
    CAPTURE(n);
    for (int which = 0; which < 5; ++which) {
      CAPTURE(which);
      if (which == 4 && std::is_same_v<T, int>) continue; // avg on integers rounds: left out
      const bool product = which == 1;
      std::vector<std::vector<T>> in(ranks);
      for (int r = 0; r < ranks; ++r)
        in[r] = rank_values<T>(n, r, product);
      cohort::distributed_buffer<T> send(group, cohort::partition::replicated(n, ranks));
      cohort::distributed_buffer<T> recv(group, cohort::partition::replicated(n, ranks));
      for (int r = 0; r < ranks; ++r)
        send.local(r).copy_from_host(in[r]);
      recv.fill_bytes(cohort::testing::poison_byte);
      switch (which) {
      case 0:
        cohort::all_reduce(nccl, send, recv, cohort::sum);
        break;
      case 1:
        cohort::all_reduce(nccl, send, recv, cohort::prod);
        break;
      case 2:
        cohort::all_reduce(nccl, send, recv, cohort::min);
        break;
      case 3:
        cohort::all_reduce(nccl, send, recv, cohort::max);
        break;
      default:
        cohort::all_reduce(nccl, send, recv, cohort::avg);
        break;
      }
      nccl.wait(120s);
      // The inputs are small integers, so every sum, product, minimum and maximum is exact in
      // every type and is compared exactly. An average divides by the rank count (NCCL multiplies
      // each input by 1 / ranks before summing), which is exact where the count is a power of
      // two; otherwise each of those roundings may be off by half a unit in the last place of a
      // value below 16, which `slack` allows and nothing more.
      const bool exact = which != 4 || (ranks & (ranks - 1)) == 0;
      const double slack = exact ? 0.0 : ranks * 16.0 * epsilon_of<T>();
      std::size_t wrong = 0;
      for (int r = 0; r < ranks; ++r) {
        const std::vector<T> out = cohort::testing::shard_to_host(recv, r);
        for (std::size_t i = 0; i < n; ++i) {
          double e = as_double(in[0][i]);
          for (int q = 1; q < ranks; ++q) {
            const double v = as_double(in[q][i]);
            e = which == 0 || which == 4 ? e + v
                : which == 1             ? e * v
                : which == 2             ? std::min(e, v)
                                         : std::max(e, v);
          }
          if (which == 4) e /= ranks;
          wrong += exact ? as_double(out[i]) != e : std::fabs(as_double(out[i]) - e) > slack;
        }
      }
      CHECK(wrong == 0);
    }
  }
}

// The clique keeps its members' devices and streams, not the group: a group moved away (as a
// std::vector<device_group> that grows moves its groups) leaves the clique working. Before the fix
// the clique read the destroyed group and refused the buffer (0 members against 1 shard).
TEST_CASE("a clique keeps working after its group is moved and the old group is destroyed") {
  COHORT_SKIP_UNLESS_GPUS(1);
  std::vector<cohort::device_group> groups;
  groups.emplace_back(cohort::devices());
  cohort::nccl_clique nccl(groups[0], 120s);
  cohort::device_group group(std::move(groups[0]));
  groups.clear();
  const int ranks = static_cast<int>(group.size());
  REQUIRE(nccl.size() == group.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(nccl.stream(i) == group.stream(i));
    CHECK(nccl.device(i) == group.device(i));
  }
  const std::size_t n = 1009;
  cohort::distributed_buffer<int> send(group, cohort::partition::replicated(n, ranks));
  cohort::distributed_buffer<int> recv(group, cohort::partition::replicated(n, ranks));
  std::vector<std::vector<int>> in(ranks);
  for (int r = 0; r < ranks; ++r) {
    in[r] = rank_values<int>(n, r, false);
    send.local(r).copy_from_host(in[r]);
  }
  recv.fill_bytes(cohort::testing::poison_byte);
  cohort::all_reduce(nccl, send, recv, cohort::sum);
  nccl.wait(120s);
  std::size_t wrong = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<int> out = cohort::testing::shard_to_host(recv, r);
    for (std::size_t i = 0; i < n; ++i) {
      long long e = 0;
      for (int q = 0; q < ranks; ++q)
        e += in[q][i];
      wrong += out[i] != e;
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("a clique broadcasts, gathers, scatters and passes a ring of sends") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group, 120s);
  const std::size_t ranks = group.size();
  for (std::size_t n : counts) {
    CAPTURE(n);
    std::vector<std::vector<int>> in(ranks);
    for (std::size_t r = 0; r < ranks; ++r)
      in[r] = cohort::testing::random_values<int>(n, 7 + r);
    cohort::distributed_buffer<int> mine(group, cohort::partition::replicated(n, ranks));
    cohort::distributed_buffer<int> all(group, cohort::partition::replicated(n * ranks, ranks));
    cohort::distributed_buffer<int> scattered(group, cohort::partition::replicated(n, ranks));
    for (std::size_t r = 0; r < ranks; ++r)
      mine.local(r).copy_from_host(in[r]);
    all.fill_bytes(cohort::testing::poison_byte);
    cohort::all_gather(nccl, mine, all);
    cohort::reduce_scatter(nccl, all, scattered, cohort::sum); // block r of the sum over ranks
    nccl.wait(120s);
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<int> gathered(n * ranks), block(n);
      all.local(r).copy_to_host(gathered);
      scattered.local(r).copy_to_host(block);
      group.synchronize();
      std::size_t wrong = 0;
      for (std::size_t q = 0; q < ranks; ++q)
        for (std::size_t i = 0; i < n; ++i)
          wrong += gathered[q * n + i] != in[q][i];
      // Every rank gathered the same array, so block r of the sum is ranks * in[r].
      for (std::size_t i = 0; i < n; ++i)
        wrong += block[i] != static_cast<int>(ranks) * in[r][i];
      CHECK(wrong == 0);
    }
    // Broadcast from the last rank: every rank holds its data.
    cohort::broadcast(nccl, mine, static_cast<int>(ranks - 1));
    nccl.wait(120s);
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<int> got(n);
      mine.local(r).copy_to_host(got);
      group.synchronize();
      CHECK(got == in[ranks - 1]);
    }
    // A ring of each rank's own data: rank r sends to r+1, so receives rank r-1's.
    for (std::size_t r = 0; r < ranks; ++r)
      mine.local(r).copy_from_host(in[r]);
    cohort::distributed_buffer<int> ring(group, cohort::partition::replicated(n, ranks));
    ring.fill_bytes(cohort::testing::poison_byte);
    {
      cohort::nccl_group batch;
      for (std::size_t r = 0; r < ranks; ++r) {
        cohort::send(nccl.rank(r), group.stream(r), mine.shard(r).data,
                     static_cast<int>((r + 1) % ranks));
        cohort::recv(nccl.rank(r), group.stream(r), ring.shard(r).data,
                     static_cast<int>((r + ranks - 1) % ranks));
      }
      batch.end();
    }
    nccl.wait(120s);
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<int> got(n);
      ring.local(r).copy_to_host(got);
      group.synchronize();
      CHECK(got == in[(r + ranks - 1) % ranks]);
    }
  }
}

TEST_CASE("a collective one rank never joins is aborted by the time-out and a new clique works") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(cohort::devices());
  {
    // The communicators' time-out (20 s) bounds every wait for NCCL to take an operation.
    cohort::nccl_clique nccl(group, 20s, cohort::nccl_calls::bounded);
    cohort::distributed_buffer<float> x(group, cohort::partition::replicated(1024, group.size()));
    x.fill_bytes(0);
    group.synchronize();
    // Only rank 0 calls: it waits for the others forever, unless a time-out ends it. Depending
    // on NCCL, the call itself waits (for its peers to connect) or the collective runs and waits.
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(
        {
          cohort::all_reduce(nccl.rank(0), x.shard(0).stream, x.shard(0).data, cohort::sum);
          nccl.rank(0).wait(x.shard(0).stream, 2s);
        },
        cohort::timeout_error);
    CHECK(std::chrono::steady_clock::now() - started < 60s);
    CHECK(nccl.rank(0).empty());     // aborted
    x.shard(0).stream.synchronize(); // the aborted collective has left the stream
  }
  // The new clique sums rank-distinct values, checked exactly (zeros summed would pass a
  // collective that does nothing).
  cohort::nccl_clique again(group, 120s);
  const std::size_t ranks = group.size(), n = 1031;
  cohort::distributed_buffer<int> y(group, cohort::partition::replicated(n, ranks));
  const auto in = fresh_inputs(y, 4242);
  cohort::all_reduce(again, y, cohort::sum);
  again.wait(120s);
  CHECK(wrong_sums(group, y, in) == 0);
}

TEST_CASE("a bounded clique all-reduces and splits into bounded communicators") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group, 120s, cohort::nccl_calls::bounded);
  const int ranks = static_cast<int>(group.size());
  auto halves = nccl.split(std::vector<int>(ranks, 0));
  const std::size_t n = 4099;
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, ranks));
  const auto summed = fresh_inputs(x, 77);
  {
    cohort::nccl_group batch;
    for (int r = 0; r < ranks; ++r) {
      CHECK(halves[r].calls() == cohort::nccl_calls::bounded);
      cohort::all_reduce(halves[r], group.stream(r), x.shard(r).data, cohort::sum);
    }
    batch.end();
  }
  for (int r = 0; r < ranks; ++r)
    halves[r].wait(group.stream(r), 120s);
  CHECK(wrong_sums(group, x, summed) == 0);
  // And the clique itself, on fresh rank-distinct values: after the sum every rank holds the
  // same values, whose maximum a collective that does nothing would also leave.
  const auto maxed = fresh_inputs(x, 78);
  cohort::all_reduce(nccl, x, cohort::max);
  nccl.wait(120s);
  std::size_t wrong = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<int> out = cohort::testing::shard_to_host(x, r);
    for (std::size_t i = 0; i < n; ++i) {
      int biggest = maxed[0][i];
      for (int q = 1; q < ranks; ++q)
        biggest = std::max(biggest, maxed[q][i]);
      wrong += out[i] != biggest;
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("a clique splits into sub-communicators that work") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group, 120s);
  const int ranks = static_cast<int>(group.size());
  // One communicator of every rank, in reverse order.
  std::vector<int> colors(ranks, 0), keys;
  for (int r = 0; r < ranks; ++r)
    keys.push_back(ranks - 1 - r);
  auto reversed = nccl.split(colors, keys);
  REQUIRE(reversed.size() == static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    CHECK(reversed[r].size() == ranks);
    CHECK(reversed[r].rank() == ranks - 1 - r);
    CHECK(reversed[r].device() == group.device(r));
    CHECK(reversed[r].calls() == cohort::nccl_calls::blocking); // as the clique's
  }
  // Every rank alone.
  std::vector<int> own(ranks);
  for (int r = 0; r < ranks; ++r)
    own[r] = r;
  auto alone = nccl.split(own);
  for (int r = 0; r < ranks; ++r)
    CHECK(alone[r].size() == 1);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(1000, ranks));
  // Every rank's `collective(r)` on the reversed communicator in one group; then every rank holds
  // `value` everywhere.
  auto every_rank_gets = [&](auto collective, int value) {
    {
      cohort::nccl_group batch;
      for (int r = 0; r < ranks; ++r)
        collective(r);
      batch.end();
    }
    for (int r = 0; r < ranks; ++r)
      reversed[r].wait(group.stream(r), 120s);
    for (int r = 0; r < ranks; ++r) {
      std::vector<int> out(1000);
      x.local(r).copy_to_host(out);
      group.synchronize();
      CHECK(out == std::vector<int>(1000, value));
    }
  };
  // The reversed communicator all-reduces.
  for (int r = 0; r < ranks; ++r)
    x.local(r).copy_from_host(std::vector<int>(1000, r + 1));
  every_rank_gets(
      [&](int r) {
        cohort::all_reduce(reversed[r], group.stream(r), x.shard(r).data, cohort::sum);
      },
      ranks * (ranks + 1) / 2);
  // The reversed order itself: its root (rank 0) is the group's last member, whose data every
  // member receives (a sum could not tell the order).
  for (int r = 0; r < ranks; ++r)
    x.local(r).copy_from_host(std::vector<int>(1000, 10 * (r + 1)));
  every_rank_gets(
      [&](int r) { cohort::broadcast(reversed[r], group.stream(r), x.shard(r).data, 0); },
      10 * ranks);
}

namespace {

__global__ void spin_for(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Runs `destroy` on a thread of its own and returns the seconds it took. Where it has not returned
// after `limit` seconds (it hangs), runs `release`, which lets it end, so that the test fails
// instead of hanging; the result is then at least `limit`.
template <class Destroy, class Release>
double seconds_to_destroy(Destroy&& destroy, double limit, Release&& release) {
  std::atomic<bool> done{false};
  const auto started = std::chrono::steady_clock::now();
  std::thread destroying([&] {
    destroy();
    done = true;
  });
  while (!done && seconds_since(started) < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double took = seconds_since(started);
  if (!done) release();
  destroying.join();
  return took;
}

} // namespace

// Before, ncclCommFinalize of the blocking communicator waited for the collective forever: the
// test then lets rank 1 join after the limit, so that it fails instead of hanging.
TEST_CASE("destroying a blocking communicator whose collective a peer never joins ends within its "
          "time-out") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(
      std::vector<cohort::device_ref>{cohort::device_ref{0}, cohort::device_ref{1}});
  const auto timeout = 10s; // also bounds the creation
  auto ranks = cohort::communicator::create_clique(group, timeout);
  const std::size_t n = 1 << 16;
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(n, 2));
  x.fill_bytes(0);
  {
    cohort::nccl_group both; // connects the peers for this size, so rank 0's call alone returns
    for (int r = 0; r < 2; ++r)
      cohort::all_reduce(ranks[r], group.stream(r), x.shard(r).data, cohort::sum);
    both.end();
  }
  cohort::communicator::wait_all(
      ranks, [&](std::size_t i) { return group.stream(i); }, 60s, "test");
  cohort::all_reduce(ranks[0], group.stream(0), x.shard(0).data, cohort::sum); // rank 1 never comes
  const double took = seconds_to_destroy(
      [&] { cohort::communicator doomed = std::move(ranks[0]); }, 10.0 + 20.0,
      [&] { // the old destructor: let rank 1 join, which ends it
        cohort::all_reduce(ranks[1], group.stream(1), x.shard(1).data, cohort::sum);
      });
  CHECK(took < 10.0 + 20.0);
  CHECK(took >= 9.9);            // it waited for the collective first
  group.stream(0).synchronize(); // the aborted collective has left the stream
  ranks.clear();
  cohort::nccl_clique again(group, 60s);
  const auto in = cohort::testing::random_values<int>(64, 3);
  cohort::distributed_buffer<int> y(group, cohort::partition::replicated(64, 2));
  cohort::distributed_buffer<int> z(group, cohort::partition::replicated(64, 2));
  for (int r = 0; r < 2; ++r)
    y.local(r).copy_from_host(in);
  z.fill_bytes(cohort::testing::poison_byte);
  cohort::all_reduce(again, y, z, cohort::sum);
  again.wait(60s);
  std::vector<int> out(64), twice(64);
  for (std::size_t i = 0; i < 64; ++i)
    twice[i] = 2 * in[i];
  z.local(1).copy_to_host(out);
  group.synchronize();
  CHECK(out == twice);
}

// Two cliques, a rank of each stuck in a collective its peer never joins (A's on GPU 0, B's on
// GPU 1). Before, ranks ended in turn took a time-out each (an nccl_clique's too): ended together
// they take one for all. The test lets the peers join after the limit, so that it fails instead of
// waiting out every time-out.
TEST_CASE("stuck ranks ended together take one time-out for all, not one each") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(
      std::vector<cohort::device_ref>{cohort::device_ref{0}, cohort::device_ref{1}});
  const auto timeout = 8s;
  auto a = cohort::communicator::create_clique(group, timeout);
  auto b = cohort::communicator::create_clique(group, timeout);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(1 << 16, 2));
  x.fill_bytes(0);
  for (auto* ranks : {&a, &b}) { // connects the peers, so that one rank's call alone returns
    {
      cohort::nccl_group both;
      for (int r = 0; r < 2; ++r)
        cohort::all_reduce((*ranks)[r], group.stream(r), x.shard(r).data, cohort::sum);
    }
    cohort::communicator::wait_all(
        *ranks, [&](std::size_t i) { return group.stream(i); }, 60s, "test");
  }
  cohort::all_reduce(a[0], group.stream(0), x.shard(0).data, cohort::sum); // a[1] never comes
  cohort::all_reduce(b[1], group.stream(1), x.shard(1).data, cohort::sum); // b[0] never comes
  std::vector<cohort::communicator> stuck;
  stuck.push_back(std::move(a[0]));
  stuck.push_back(std::move(b[1]));
  const double took = seconds_to_destroy(
      [&] { cohort::communicator::end_together(stuck); }, 8.0 + 6.0,
      [&] { // the old way, a time-out each: a[0] was aborted, b[1] still waits; let b[0] join
        cohort::all_reduce(b[0], group.stream(0), x.shard(0).data, cohort::sum);
      });
  CHECK(took < 8.0 + 6.0);
  CHECK(took >= 7.9); // the first rank waited for its collective
  for (const cohort::communicator& c : stuck)
    CHECK(c.empty());
  group.synchronize(); // the aborted collectives have left the streams
}

// An exception inside a user's nccl_group posts rank 0's call without rank 1's: the communicators
// are aborted at once when destroyed, not after their time-out.
TEST_CASE("communicators left with a group an exception ended are aborted at once when destroyed") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(
      std::vector<cohort::device_ref>{cohort::device_ref{0}, cohort::device_ref{1}});
  auto ranks = cohort::communicator::create_clique(group, 60s);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(1 << 16, 2));
  x.fill_bytes(0);
  {
    cohort::nccl_group both;
    for (int r = 0; r < 2; ++r)
      cohort::all_reduce(ranks[r], group.stream(r), x.shard(r).data, cohort::sum);
    both.end();
  }
  cohort::communicator::wait_all(
      ranks, [&](std::size_t i) { return group.stream(i); }, 60s, "test");
  try {
    cohort::nccl_group batch;
    cohort::all_reduce(ranks[0], group.stream(0), x.shard(0).data, cohort::sum);
    cohort::all_reduce(ranks[1], group.stream(0), x.shard(1).data, cohort::sum); // wrong stream
    FAIL("a stream of another device was accepted");
  } catch (const std::invalid_argument&) {
  }
  const double took = seconds_to_destroy(
      [&] { cohort::communicator doomed = std::move(ranks[0]); }, 20.0,
      [&] { // the old destructor: let rank 1 join, which ends it
        cohort::all_reduce(ranks[1], group.stream(1), x.shard(1).data, cohort::sum);
      });
  CHECK(took < 20.0);
  ranks.clear();
  group.synchronize();
}

// Before, each rank's wait had a time-out of its own: rank 0 done at 1.5 s, rank 1 then got 2 s
// more and finished at 3 s without an error. What is checked is what happened, not how fast: the
// wait throws (with a time-out each it would have returned, rank 1 done at 3 s, before its own
// deadline at 3.5 s) and gave up no sooner than its time-out. How long it took past that is left
// alone: on a loaded machine, or where the abort waits for the spinning kernels, it may be more.
TEST_CASE("nccl_clique::wait gives all ranks together one time-out") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(
      std::vector<cohort::device_ref>{cohort::device_ref{0}, cohort::device_ref{1}});
  cohort::nccl_clique nccl(group, 60s);
  const auto started = std::chrono::steady_clock::now();
  cohort::launch(group.stream(0), {}, spin_for, 1'500'000'000ull);
  cohort::launch(group.stream(1), {}, spin_for, 3'000'000'000ull);
  // The error names the rank whose work did not finish, and not the one that did.
  try {
    nccl.wait(2s);
    FAIL("no timeout_error");
  } catch (const cohort::timeout_error& e) {
    const std::string text = e.what();
    CHECK(text.find("rank 1 of 2 (device 1)") != std::string::npos);
    CHECK(text.find("rank 0 of 2") == std::string::npos);
  }
  CHECK(seconds_since(started) >= 1.9);
  group.synchronize();
}

namespace {

// The clique's collectives, each into its own output, checked against host references.
struct clique_work {
  cohort::device_group& group;
  std::size_t n, ranks;
  cohort::distributed_buffer<float> send, sum, bcast, maxed, reduced;
  cohort::distributed_buffer<float> gathered, scattered;
  std::vector<std::vector<float>> in;

  clique_work(cohort::device_group& g, std::size_t count)
      : group(g)
      , n(count)
      , ranks(g.size())
      , send(g, cohort::partition::replicated(count, g.size()))
      , sum(g, cohort::partition::replicated(count, g.size()))
      , bcast(g, cohort::partition::replicated(count, g.size()))
      , maxed(g, cohort::partition::replicated(count, g.size()))
      , reduced(g, cohort::partition::replicated(count, g.size()))
      , gathered(g, cohort::partition::replicated(count * g.size(), g.size()))
      , scattered(g, cohort::partition::replicated(count, g.size()))
      , in(g.size()) {}

  // Fresh inputs and poisoned outputs (small integers: every sum is exact). The broadcast is in
  // place: each rank starts from its own input, and all must end with the root's.
  void prepare(unsigned seed) {
    for (auto* b : {&sum, &maxed, &reduced, &gathered, &scattered})
      b->fill_bytes(cohort::testing::poison_byte);
    for (std::size_t r = 0; r < ranks; ++r) {
      in[r] = rank_values<float>(n, static_cast<int>(seed * 17 + r), false);
      send.local(r).copy_from_host(in[r]);
      bcast.local(r).copy_from_host(in[r]);
    }
    group.synchronize();
  }

  void call(cohort::nccl_clique& nccl) {
    cohort::all_reduce(nccl, send, sum, cohort::sum);
    cohort::all_reduce(nccl, send, maxed, cohort::max);
    cohort::all_gather(nccl, send, gathered);
    cohort::reduce_scatter(nccl, gathered, scattered, cohort::sum);
    cohort::reduce(nccl, send, reduced, cohort::max, 0);
    cohort::broadcast(nccl, bcast, static_cast<int>(ranks - 1));
  }

  std::size_t wrong() {
    std::size_t bad = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<float> s(n), b(n), m(n), g(n * ranks), sc(n), red(n);
      sum.local(r).copy_to_host(s);
      reduced.local(r).copy_to_host(red);
      bcast.local(r).copy_to_host(b);
      maxed.local(r).copy_to_host(m);
      gathered.local(r).copy_to_host(g);
      scattered.local(r).copy_to_host(sc);
      group.synchronize();
      for (std::size_t i = 0; i < n; ++i) {
        float total = 0, biggest = in[0][i];
        for (std::size_t q = 0; q < ranks; ++q) {
          total += in[q][i];
          biggest = std::max(biggest, in[q][i]);
          bad += g[q * n + i] != in[q][i];
        }
        bad += s[i] != total;
        bad += m[i] != biggest;
        bad += b[i] != in[ranks - 1][i];
        if (r == 0) bad += red[i] != biggest; // the reduce's root
        // every rank gathered the same array: block r of the sum is ranks * in[r]
        bad += sc[i] != static_cast<float>(ranks) * in[r][i];
      }
    }
    return bad;
  }
};

cohort::device_group every_gpu() {
  return cohort::device_group(cohort::devices());
}

// `work` captured on `origin` (the group's streams forked from it and joined back) and
// instantiated; destroyed with the object or by destroy().
struct captured_graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;

  template <class F>
  captured_graph(cohort::device_group& group, cohort::stream_ref origin, cudaStreamCaptureMode mode,
                 F&& work) {
    cohort::check_cuda(cudaStreamBeginCapture(origin.native_handle(), mode),
                       "cudaStreamBeginCapture");
    group.fork(origin);
    work();
    group.join(origin);
    cohort::check_cuda(cudaStreamEndCapture(origin.native_handle(), &graph),
                       "cudaStreamEndCapture");
    cohort::check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  }
  captured_graph(const captured_graph&) = delete;
  captured_graph& operator=(const captured_graph&) = delete;
  ~captured_graph() { destroy(); }

  void launch(cohort::stream_ref on) {
    cohort::check_cuda(cudaGraphLaunch(exec, on.native_handle()), "cudaGraphLaunch");
  }
  void destroy() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
};

// The bodies of the cases below, on a clique over `group`'s members. Only with two or more ranks
// can they fail: a one-rank clique's sum, max, gather and broadcast are copies of the input, and
// its abort and finalize wait for no peer, so the full cases need two GPUs and the one-GPU smoke
// case at the end only shows that the calls run.
void check_captured_collectives(cohort::device_group& group) {
  cohort::nccl_clique nccl(group, 120s);
  clique_work work(group, 10007);
  work.prepare(0);
  work.call(nccl); // connects the peers before the capture
  nccl.wait(120s);
  CHECK(work.wrong() == 0);
  for (const auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    CAPTURE(static_cast<int>(mode));
    cohort::stream origin(group.device(0));
    captured_graph graph(group, origin, mode, [&] { work.call(nccl); });
    std::size_t bad_replays = 0;
    for (unsigned k = 1; k <= 100; ++k) {
      work.prepare(k);
      if (k % 3 == 0) { // a direct call between replays
        work.call(nccl);
        nccl.wait(120s);
      } else {
        graph.launch(origin);
        origin.synchronize();
      }
      bad_replays += work.wrong() != 0;
    }
    CHECK(bad_replays == 0);
  }
}

void check_captured_span_collectives(cohort::device_group& group) {
  cohort::nccl_clique nccl(group, 120s);
  const std::size_t ranks = group.size(), n = 4099;
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, ranks));
  cohort::distributed_buffer<int> y(group, cohort::partition::replicated(n, ranks));
  cohort::distributed_buffer<int> b(group, cohort::partition::replicated(n, ranks));
  auto call = [&] {
    cohort::nccl_group batch;
    for (std::size_t r = 0; r < ranks; ++r) {
      cohort::all_reduce(nccl.rank(r), group.stream(r), x.shard(r).data, y.shard(r).data,
                         cohort::sum);
      cohort::broadcast(nccl.rank(r), group.stream(r), cuda::std::span<const int>(x.shard(r).data),
                        b.shard(r).data, 0);
    }
    batch.end();
  };
  // Every read is of written memory: initcheck reported the first call's read of x, unwritten.
  const auto first = fresh_inputs(x, 999);
  y.fill_bytes(cohort::testing::poison_byte);
  b.fill_bytes(cohort::testing::poison_byte);
  call();
  nccl.wait(120s);
  CHECK(wrong_sums(group, y, first, &b) == 0);
  for (const auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    CAPTURE(static_cast<int>(mode));
    cohort::stream origin(group.device(0));
    captured_graph graph(group, origin, mode, call);
    std::size_t bad = 0;
    for (unsigned k = 0; k < 100; ++k) {
      const auto in = fresh_inputs(x, 1000 + k * 7);
      y.fill_bytes(cohort::testing::poison_byte);
      b.fill_bytes(cohort::testing::poison_byte);
      group.synchronize();
      if (k % 4 == 3) { // a direct call between replays
        call();
        nccl.wait(120s);
      } else {
        graph.launch(origin);
        origin.synchronize();
      }
      bad += wrong_sums(group, y, in, &b);
    }
    CHECK(bad == 0);
  }
}

} // namespace

TEST_CASE("a clique's collectives captured into a CUDA graph replay right, mixed with direct "
          "calls, in global and thread-local capture") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto group = every_gpu();
  check_captured_collectives(group);
}

TEST_CASE("span collectives of a clique's ranks captured in one nccl_group replay right, mixed "
          "with direct calls") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto group = every_gpu();
  check_captured_span_collectives(group);
}

// A bounded clique's collectives go through NCCL's helper thread and `wait` polls the stream:
// neither can be captured, and both say so before anything is enqueued.
TEST_CASE("what cannot be captured refuses the capture by name, leaving the graph empty") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = every_gpu();
  cohort::nccl_clique bounded(group, 60s, cohort::nccl_calls::bounded);
  cohort::nccl_clique blocking(group, 60s);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(256, group.size()));
  const auto in = fresh_inputs(x, 123);
  group.synchronize();
  cohort::stream origin(group.device(0));
  cudaGraph_t graph = nullptr;
  cohort::check_cuda(cudaStreamBeginCapture(origin.native_handle(), cudaStreamCaptureModeGlobal),
                     "begin capture");
  group.fork(origin);
  CHECK_THROWS_WITH_AS(cohort::all_reduce(bounded, x, cohort::sum),
                       doctest::Contains("cohort::all_reduce"), std::logic_error);
  CHECK_THROWS_WITH_AS(cohort::broadcast(bounded.rank(0), x.shard(0).stream, x.shard(0).data, 0),
                       doctest::Contains("nccl_calls::bounded"), std::logic_error);
  CHECK_THROWS_WITH_AS(bounded.wait(60s), doctest::Contains("nccl_clique::wait"), std::logic_error);
  CHECK_THROWS_WITH_AS(blocking.wait(60s), doctest::Contains("nccl_clique::wait"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS(blocking.rank(0).wait(group.stream(0), 60s),
                       doctest::Contains("communicator::wait"), std::logic_error);
  group.join(origin);
  REQUIRE(cudaStreamEndCapture(origin.native_handle(), &graph) == cudaSuccess); // still valid
  std::size_t nodes = 0;
  cohort::check_cuda(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> all(nodes);
  if (nodes > 0) cohort::check_cuda(cudaGraphGetNodes(graph, all.data(), &nodes), "nodes");
  std::size_t work_nodes = 0;
  for (cudaGraphNode_t node : all) {
    cudaGraphNodeType type{};
    cohort::check_cuda(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    work_nodes += type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy;
  }
  CHECK(work_nodes == 0);
  cohort::check_cuda(cudaGraphDestroy(graph), "graph destroy");
  // Outside a capture both work, on the rank-distinct values the refused calls left untouched.
  cohort::distributed_buffer<int> y(group, cohort::partition::replicated(256, group.size()));
  y.fill_bytes(cohort::testing::poison_byte);
  cohort::all_reduce(bounded, x, y, cohort::sum);
  bounded.wait(60s);
  CHECK(wrong_sums(group, y, in) == 0);
  const auto again = fresh_inputs(x, 124);
  y.fill_bytes(cohort::testing::poison_byte);
  cohort::all_reduce(blocking, x, y, cohort::sum);
  blocking.wait(60s);
  CHECK(wrong_sums(group, y, again) == 0);
}

// A clique's collective with member 0's stream captured and member 1's not: NCCL refused it only
// in ncclGroupEnd, after preparing rank 0's captured launch, as an nccl_error naming no rank. It
// is refused first, by name, naming the members, and nothing is captured.
TEST_CASE("a clique's collective with only some members' streams captured is refused by name") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto group = cohort::testing::group_of(2);
  cohort::nccl_clique nccl(group, 60s);
  const auto values = cohort::testing::random_values<int>(256, 5);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(256, 2));
  for (std::size_t r = 0; r < 2; ++r)
    x.local(r).copy_from_host(values);
  group.synchronize();
  cudaGraph_t graph = nullptr;
  cohort::check_cuda(
      cudaStreamBeginCapture(group.stream(0).native_handle(), cudaStreamCaptureModeThreadLocal),
      "begin capture");
  std::string message;
  try {
    cohort::all_reduce(nccl, x, cohort::sum);
  } catch (const std::logic_error& e) {
    message = e.what();
  }
  REQUIRE(cudaStreamEndCapture(group.stream(0).native_handle(), &graph) == cudaSuccess);
  std::size_t nodes = 0;
  cohort::check_cuda(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
  cohort::check_cuda(cudaGraphDestroy(graph), "graph destroy");
  CAPTURE(message);
  CHECK(message.find("cohort::all_reduce: member 0's stream") != std::string::npos);
  CHECK(message.find("member 1's") != std::string::npos);
  CHECK(nodes == 0);
  cohort::all_reduce(nccl, x, cohort::sum); // outside a capture it works (x is still `values`)
  for (std::size_t r = 0; r < 2; ++r) {
    std::vector<int> got(256);
    x.local(r).copy_to_host(got);
    group.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < 256; ++i)
      wrong += got[i] != 2 * values[i];
    CHECK(wrong == 0);
  }
}

namespace {

// NCCL's finalize, and its abort, wait until every graph that captured the communicator's calls is
// destroyed. Before, destroying the communicator first waited for that forever: the test destroys
// the graph after the limit so that it fails instead of hanging.
void check_destroy_while_graph_holds_calls(cohort::device_group& group) {
  const std::size_t ranks = group.size(), n = 1000;
  auto nccl = std::make_unique<cohort::nccl_clique>(group, 10s);
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, ranks));
  cohort::distributed_buffer<int> y(group, cohort::partition::replicated(n, ranks));
  (void)fresh_inputs(x, 39); // the graph's capture reads nothing, but this call does
  cohort::all_reduce(*nccl, x, y, cohort::sum);
  nccl->wait(60s);
  cohort::stream origin(group.device(0));
  captured_graph graph(group, origin, cudaStreamCaptureModeGlobal,
                       [&] { cohort::all_reduce(*nccl, x, y, cohort::sum); });
  const double took = seconds_to_destroy([&] { nccl.reset(); }, 10.0 + 20.0,
                                         [&] { graph.destroy(); }); // the old destructor
  REQUIRE(took < 10.0 + 20.0);
  const auto in = fresh_inputs(x, 40);
  y.fill_bytes(cohort::testing::poison_byte);
  group.synchronize();
  graph.launch(origin);
  origin.synchronize();
  // The communicator was left to the graph, not freed under it.
  CHECK(wrong_sums(group, y, in) == 0);
}

// NCCL's abort raises its abort flag and then waits until every graph that captured the
// communicator is destroyed. Before, abort() (and a wait that timed out) waited for that forever:
// the thread that would destroy the graph was the one waiting. The test destroys the graph after
// the limit so that it fails instead of hanging. Only with two or more ranks can it fail against
// the old code: NCCL runs a one-rank communicator's collectives as plain launches, which no graph
// plan holds, so its abort does not wait.
void check_abort_while_graph_holds_calls(cohort::device_group& group) {
  const std::size_t ranks = group.size(), n = 1000;
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(n, ranks));
  cohort::distributed_buffer<int> y(group, cohort::partition::replicated(n, ranks));
  (void)fresh_inputs(x, 42);
  {
    cohort::nccl_clique nccl(group, 60s);
    cohort::all_reduce(nccl, x, y, cohort::sum);
    nccl.wait(60s);
    cohort::stream origin(group.device(0));
    captured_graph graph(group, origin, cudaStreamCaptureModeGlobal,
                         [&] { cohort::all_reduce(nccl, x, y, cohort::sum); });
    const double took = seconds_to_destroy(
        [&] {
          for (std::size_t r = 0; r < ranks; ++r)
            nccl.rank(r).abort();
        },
        20.0, [&] { graph.destroy(); }); // the old abort: it returns once the graph is gone
    REQUIRE(took < 20.0);
    for (std::size_t r = 0; r < ranks; ++r)
      CHECK(nccl.rank(r).empty());
  } // the graph goes, then the clique of aborted ranks
  cohort::nccl_clique again(group, 60s);
  const auto in = fresh_inputs(x, 41);
  y.fill_bytes(cohort::testing::poison_byte);
  cohort::all_reduce(again, x, y, cohort::sum);
  again.wait(60s);
  CHECK(wrong_sums(group, y, in) == 0);
}

} // namespace

TEST_CASE("a communicator destroyed while a graph holds its calls returns within its time-out, "
          "and the graph still replays") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto group = every_gpu();
  check_destroy_while_graph_holds_calls(group);
}

TEST_CASE("aborting a communicator a graph still holds returns at once, and new ones work after") {
  COHORT_SKIP_UNLESS_GPUS(2);
  auto group = every_gpu();
  check_abort_while_graph_holds_calls(group);
}

// A smoke run of the four cases above on a one-rank clique of GPU 0: it shows that the calls,
// the captures, the replays, the destruction and the abort run on one GPU (cohort's path for a
// communicator its graphs hold included), not that the collectives combine ranks.
TEST_CASE("one-GPU smoke run: a one-rank clique's captured collectives, destruction and abort") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::testing::group_of(1);
  SUBCASE("captured collectives") {
    check_captured_collectives(group);
  }
  SUBCASE("captured span collectives") {
    check_captured_span_collectives(group);
  }
  SUBCASE("destroyed while a graph holds its calls") {
    check_destroy_while_graph_holds_calls(group);
  }
  SUBCASE("aborted while a graph holds its calls") {
    check_abort_while_graph_holds_calls(group);
  }
}
