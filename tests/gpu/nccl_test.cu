// NCCL communicators and collectives: one-rank communicators and time-outs on one GPU; a clique
// over two or more real GPUs against host references for every type and operator.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>

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

} // namespace

TYPE_TO_STRING(__half);
TYPE_TO_STRING(__nv_bfloat16);

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
    cohort::stream s(d);
    const std::size_t n = 4099;
    const auto in = cohort::testing::random_values<float>(n, 1);
    cohort::device_buffer<float> a(n, s), b(n, s);
    a.copy_from_host(in);
    b.fill_bytes(cohort::testing::poison_byte);
    cohort::all_reduce(comm, a.span(), b.span(), cohort::sum, s);
    cohort::all_reduce(comm, b.span(), cohort::max, s);
    cohort::broadcast(comm, b.span(), 0, s);
    cohort::reduce(comm, b.span(), a.span(), cohort::avg, 0, s);
    cohort::all_gather(comm, a.span(), b.span(), s);
    cohort::reduce_scatter(comm, b.span(), a.span(), cohort::min, s);
    {
      cohort::nccl_group both; // a send to oneself needs its recv in the same group
      cohort::send(comm, a.span(), 0, s);
      cohort::recv(comm, b.span(), 0, s);
      both.end();
    }
    comm.wait(s, 60s);
    std::vector<float> out(n);
    b.copy_to_host(out);
    s.synchronize();
    CHECK(out == in);
  }
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
  cohort::device_buffer<int> x(3, s);
  x.fill_bytes(0);
  cohort::all_reduce(fresh, x.span(), cohort::sum, s);
  CHECK_NOTHROW(fresh.wait(s, 60s));
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
      std::size_t wrong = 0;
      for (int r = 0; r < ranks; ++r) {
        std::vector<T> out(n);
        recv.local(r).copy_to_host(out);
        group.synchronize();
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
          wrong += std::fabs(as_double(out[i]) - e) > 1e-2 * (1 + std::fabs(e));
        }
      }
      CHECK(wrong == 0);
    }
  }
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
    // Broadcast from the last rank, then a ring: rank r sends to r+1.
    cohort::broadcast(nccl, mine, static_cast<int>(ranks - 1));
    nccl.wait(120s);
    cohort::distributed_buffer<int> ring(group, cohort::partition::replicated(n, ranks));
    {
      cohort::nccl_group batch;
      for (std::size_t r = 0; r < ranks; ++r) {
        cohort::send(nccl.rank(r), mine.shard(r).data, static_cast<int>((r + 1) % ranks),
                     group.stream(r));
        cohort::recv(nccl.rank(r), ring.shard(r).data, static_cast<int>((r + ranks - 1) % ranks),
                     group.stream(r));
      }
      batch.end();
    }
    nccl.wait(120s);
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<int> got(n);
      ring.local(r).copy_to_host(got);
      group.synchronize();
      CHECK(got == in[ranks - 1]);
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
          cohort::all_reduce(nccl.rank(0), x.shard(0).data, cohort::sum, x.shard(0).stream);
          nccl.rank(0).wait(x.shard(0).stream, 2s);
        },
        cohort::timeout_error);
    CHECK(std::chrono::steady_clock::now() - started < 60s);
    CHECK(nccl.rank(0).empty());     // aborted
    x.shard(0).stream.synchronize(); // the aborted collective has left the stream
  }
  cohort::nccl_clique again(group, 120s);
  cohort::distributed_buffer<float> y(group, cohort::partition::replicated(16, group.size()));
  y.fill_bytes(0);
  cohort::all_reduce(again, y, cohort::sum);
  CHECK_NOTHROW(again.wait(120s));
}

TEST_CASE("a bounded clique all-reduces and splits into bounded communicators") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::device_group group(cohort::devices());
  cohort::nccl_clique nccl(group, 120s, cohort::nccl_calls::bounded);
  const int ranks = static_cast<int>(group.size());
  auto halves = nccl.split(std::vector<int>(ranks, 0));
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(4099, ranks));
  for (int r = 0; r < ranks; ++r)
    x.local(r).copy_from_host(std::vector<int>(4099, r + 1));
  {
    cohort::nccl_group batch;
    for (int r = 0; r < ranks; ++r) {
      CHECK(halves[r].calls() == cohort::nccl_calls::bounded);
      cohort::all_reduce(halves[r], x.shard(r).data, cohort::sum, group.stream(r));
    }
    batch.end();
  }
  cohort::all_reduce(nccl, x, cohort::max); // and the clique itself
  nccl.wait(120s);
  for (int r = 0; r < ranks; ++r) {
    std::vector<int> out(4099);
    x.local(r).copy_to_host(out);
    group.synchronize();
    CHECK(out == std::vector<int>(4099, ranks * (ranks + 1) / 2));
  }
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
  // The reversed communicator all-reduces.
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(1000, ranks));
  for (int r = 0; r < ranks; ++r)
    x.local(r).copy_from_host(std::vector<int>(1000, r + 1));
  {
    cohort::nccl_group batch;
    for (int r = 0; r < ranks; ++r)
      cohort::all_reduce(reversed[r], x.shard(r).data, cohort::sum, group.stream(r));
    batch.end();
  }
  for (int r = 0; r < ranks; ++r)
    reversed[r].wait(group.stream(r), 120s);
  std::vector<int> out(1000);
  x.local(0).copy_to_host(out);
  group.synchronize();
  CHECK(out == std::vector<int>(1000, ranks * (ranks + 1) / 2));
}
