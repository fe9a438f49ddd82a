// The NCCL layer's host side: type and operator traits, the id's text and file forms, and the
// launcher environments.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

static_assert(cohort::nccl_type_v<float> == ncclFloat32);
static_assert(cohort::nccl_type_v<double> == ncclFloat64);
static_assert(cohort::nccl_type_v<__half> == ncclFloat16);
static_assert(cohort::nccl_type_v<__nv_bfloat16> == ncclBfloat16);
static_assert(cohort::nccl_type_v<int> == ncclInt32);
static_assert(cohort::nccl_type_v<unsigned long long> == ncclUint64);
static_assert(cohort::nccl_type_v<const std::int8_t> == ncclInt8);
static_assert(cohort::nccl_element<float> && !cohort::nccl_element<bool>);
static_assert(cohort::detail::nccl_op<float, cohort::sum_t>() == ncclSum);
static_assert(cohort::detail::nccl_op<float, cuda::std::plus<>>() == ncclSum);
static_assert(cohort::detail::nccl_op<int, cuda::maximum<>>() == ncclMax);
static_assert(cohort::detail::nccl_op<double, cohort::avg_t>() == ncclAvg);

namespace {

ncclUniqueId fake_id() {
  ncclUniqueId id{};
  for (std::size_t k = 0; k < sizeof id.internal; ++k)
    id.internal[k] = static_cast<char>((k * 37 + 11) & 0xff);
  return id;
}

} // namespace

TEST_CASE("a unique id survives hex text and a file") {
  const auto id = cohort::unique_id::from_native(fake_id());
  const std::string hex = id.to_hex();
  CHECK(hex.size() == 2 * sizeof(ncclUniqueId::internal));
  CHECK(std::memcmp(cohort::unique_id::from_hex(hex).native().internal, fake_id().internal,
                    sizeof(ncclUniqueId::internal)) == 0);
  const std::string path = "cohort_test_unique_id_" + std::to_string(::getpid());
  id.write_file(path);
  const auto back = cohort::unique_id::read_file(path, std::chrono::milliseconds(100));
  CHECK(back.to_hex() == hex);
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(cohort::unique_id::from_hex("abc"), doctest::Contains("argument 'text'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::unique_id::from_hex(std::string(hex.size(), 'z')),
                       doctest::Contains("not a hex digit"), std::invalid_argument);
}

// A time-out of milliseconds::max() ("wait as NCCL does") overflowed steady_clock's nanoseconds
// and put every bounded wait's deadline in the past: the wait gave up at once.
TEST_CASE("a time-out of milliseconds::max() waits for ever, not at once") {
  using clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  CHECK(cohort::detail::deadline_after(milliseconds::max()) == clock::time_point::max());
  const auto before = clock::now();
  const auto in_a_second = cohort::detail::deadline_after(std::chrono::seconds(1));
  CHECK(in_a_second >= before + std::chrono::seconds(1));
  CHECK(in_a_second <= clock::now() + std::chrono::seconds(1));
  const auto already = cohort::detail::deadline_after(milliseconds(-5));
  CHECK(already <= clock::now()); // (the two in one expression could be evaluated either way)
  // An id written 100 ms after the reader started waiting without a bound is read.
  char path[] = "/tmp/cohort_forever_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::remove(path);
  const auto id = cohort::unique_id::from_native(fake_id());
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    id.write_file(path);
  });
  std::string read;
  try {
    read = cohort::unique_id::read_file(path, milliseconds::max()).to_hex();
  } catch (const cohort::timeout_error& e) {
    read = e.what();
  }
  writer.join();
  std::remove(path);
  CHECK(read == id.to_hex());
}

// A time-out, as README promises of creation (a bootstrap's other ranks wait here for rank 0's
// file): it was a plain std::runtime_error that `catch (const cohort::timeout_error&)` missed.
TEST_CASE("reading an id that never appears times out with advice, as a timeout_error") {
  CHECK_THROWS_WITH_AS(
      cohort::unique_id::read_file("no/such/cohort.id", std::chrono::milliseconds(50)),
      doctest::Contains("did not appear within 50 ms"), cohort::timeout_error);
}

// NCCL frees an aborted communicator at once and may put the next one at the same address; the
// record of the abort belongs to the communicator, so the next one is not taken for it (the old
// registry, keyed by address, forgot A's abort when B was made, and A's owner then freed B).
// NCCL's abort and finalize do nothing for a null communicator, so this runs without a GPU.
TEST_CASE("an abort is recorded for its communicator, not for an address NCCL can hand out again") {
  const ncclComm_t same_address = nullptr;
  cohort::detail::communicator_state a(same_address, nullptr, true, cohort::device_ref{0});
  CHECK_FALSE(a.ended());
  CHECK(a.abort());       // a time-out in a call made through a ref of A
  CHECK_FALSE(a.abort()); // once: whoever comes second does nothing
  cohort::detail::communicator_state b(same_address, nullptr, true, cohort::device_ref{0});
  CHECK(a.ended());                    // A's owner still knows not to use or free it...
  CHECK_FALSE(b.ended());              // ...and B, at the same address, is usable
  a.end(std::chrono::milliseconds(0)); // A's owner going away frees nothing of B's
  CHECK_FALSE(b.ended());
  b.end(std::chrono::milliseconds(0));
  CHECK(b.ended());
}

TEST_CASE("an id file is tagged with its run: a file an earlier run left is waited past") {
  const auto id = cohort::unique_id::from_native(fake_id());
  const std::string path = "cohort_test_tagged_id_" + std::to_string(::getpid());
  id.write_file(path, "SLURM=41.0");
  // A later run (another step) must not take it: it used to read it at once.
  CHECK_THROWS_WITH_AS(
      cohort::unique_id::read_file(path, std::chrono::milliseconds(60), "SLURM=41.1"),
      doctest::Contains("holds the id of another run (SLURM=41.0)"), cohort::timeout_error);
  CHECK(cohort::unique_id::read_file(path, std::chrono::milliseconds(60), "SLURM=41.0").to_hex() ==
        id.to_hex());
  CHECK(cohort::unique_id::read_file(path, std::chrono::milliseconds(60)).to_hex() == id.to_hex());
  std::remove(path.c_str());
}

// A rank whose device cannot be made current (scoped_device throws), or whose NCCL call throws,
// used to leave this thread's NCCL group open: every later NCCL call of the thread went into it.
// Runs without a GPU (NCCL's group calls and its abort of a null communicator need none). Each
// path is told apart by what comes out, not by "something threw": without a GPU, making device 0
// current throws a cuda_error, which must come before the group opens and before any rank posts;
// with one, rank 1's call throws inside the group, and exactly its exception must come out, both
// ranks having posted. Either way no group is left open. (The path inside the group needs a
// device that can be made current; the case below drives the nccl_group guard's path inside a
// group without one.)
TEST_CASE("making communicators together closes their NCCL group when a rank's call throws") {
  const std::vector<cohort::detail::rank_of> ranks{{nullptr, cohort::device_ref{0}, 0, 2},
                                                   {nullptr, cohort::device_ref{0}, 1, 2}};
  int posted = 0;
  const auto make = [&] {
    (void)cohort::detail::post_together(
        ranks,
        [&](std::size_t i, ncclComm_t*) -> ncclResult_t {
          ++posted;
          if (i == 1) throw std::runtime_error("rank 1's call failed");
          return ncclSuccess;
        },
        "test");
  };
  if (cohort::device_count() == 0) {
    CHECK_THROWS_AS(make(), cohort::cuda_error);
    CHECK(posted == 0); // refused before any rank posted
  } else {
    CHECK_THROWS_WITH_AS(make(), "rank 1's call failed", std::runtime_error);
    CHECK(posted == 2);
  }
  CHECK(ncclGroupEnd() == ncclInvalidUsage); // no group is left open
}

// The nccl_group guard on the path where an exception leaves its scope inside the group, alone
// and nested, with no GPU needed (a group with no calls in it): NCCL's group must be closed after
// each (ncclGroupEnd then finds no group: ncclInvalidUsage), the exception must come out as it
// was thrown, and a new group on the thread must open and end as usual.
TEST_CASE("an nccl_group that an exception leaves closes its NCCL group, alone or nested") {
  const auto thrown_inside = [](auto&& body) {
    try {
      body();
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  CHECK(thrown_inside([] {
          cohort::nccl_group group;
          throw std::runtime_error("inside one group");
        }) == "inside one group");
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  CHECK(thrown_inside([] {
          cohort::nccl_group outer;
          cohort::nccl_group inner;
          throw std::runtime_error("inside a nested group");
        }) == "inside a nested group");
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  CHECK(thrown_inside([] {
          cohort::nccl_group outer;
          {
            cohort::nccl_group inner;
            inner.end();
          }
          throw std::runtime_error("after a nested group ended");
        }) == "after a nested group ended");
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  {
    cohort::nccl_group group;
    CHECK_NOTHROW(group.end());
  }
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
}

// A rank is freed on the caller's thread only where no graph holds its family (NCCL's last
// destroy of the family waits for those graphs). The check and the NCCL call are one step: a
// sibling's capture that comes between them waits until the rank is freed. Without the family's
// lock, `hold` below returns while `here` is still running, and the order check fails.
TEST_CASE("a graph cannot come to hold a family between the check and the release") {
  using clock = std::chrono::steady_clock;
  cohort::detail::communicator_family family;
  std::atomic<bool> started{false};
  clock::time_point freed{}, held{};
  bool apart_called = false;
  std::thread releasing([&] {
    family.release(
        [&] {
          started.store(true);
          std::this_thread::sleep_for(std::chrono::milliseconds(200)); // the NCCL call
          freed = clock::now();
        },
        [&] { return apart_called = true; });
  });
  while (!started.load())
    std::this_thread::yield();
  family.hold(); // a sibling's capture
  held = clock::now();
  releasing.join();
  CHECK_FALSE(apart_called); // nothing held the family at the check: freed here
  CHECK(held >= freed);
  CHECK(family.held());
}

TEST_CASE("a held family is freed apart, and here where no thread can be started") {
  cohort::detail::communicator_family family;
  family.hold();
  int here = 0, apart = 0;
  family.release([&] { ++here; }, [&] { return ++apart, true; });
  CHECK(here == 0);
  CHECK(apart == 1);
  family.release([&] { ++here; }, [&] { return ++apart, false; }); // no thread could be started
  CHECK(here == 1);
  CHECK(apart == 2);
  family.let_go(); // the graph was destroyed
  CHECK_FALSE(family.held());
  family.release([&] { ++here; }, [&] { return ++apart, true; });
  CHECK(here == 2);
  CHECK(apart == 2);
}
