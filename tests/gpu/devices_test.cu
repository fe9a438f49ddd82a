// Devices, properties, memory info, scoped_device and topology on real GPUs.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <stdexcept>
#include <utility>

TEST_CASE("properties describe every visible GPU") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (cohort::device_ref d : cohort::devices()) {
    const cohort::device_properties p = cohort::properties(d);
    cudaDeviceProp raw{};
    REQUIRE(cudaGetDeviceProperties(&raw, d.get()) == cudaSuccess);
    CHECK(p.name == std::string(raw.name));
    CHECK(p.major == raw.major);
    CHECK(p.minor == raw.minor);
    CHECK(p.multiprocessors == raw.multiProcessorCount);
    CHECK(p.total_memory == raw.totalGlobalMem);
    CHECK(p.clock_khz > 0);
    CHECK(p.memory_bus_width_bits > 0);
    CHECK(p.peak_memory_bandwidth_bytes_per_s() > 1e9);
    CHECK(p.pci_bus_id.size() >= 12);
  }
}

TEST_CASE("memory_info reports free below total and sees an allocation [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  const auto before = cohort::memory_info(d);
  CHECK(before.total == cohort::properties(d).total_memory);
  CHECK(before.free <= before.total);
  void* p = nullptr;
  constexpr std::size_t bytes = std::size_t{1} << 30;
  {
    cohort::scoped_device on(d);
    REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  }
  const auto during = cohort::memory_info(d);
  CHECK(during.free + bytes / 2 < before.free);
  REQUIRE(cudaFree(p) == cudaSuccess);
}

// Needs two GPUs: on one, the scope's device and the one before it are both 0, and a scope that
// never switched or never switched back would pass. Both directions, so that a scope that
// "restores" a fixed device 0 instead of the one before it fails too.
TEST_CASE("scoped_device restores the previous device even when the body throws") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const int first = 0, last = cohort::device_count() - 1;
  for (const auto [before, inside] : {std::pair{first, last}, std::pair{last, first}}) {
    CAPTURE(before);
    CAPTURE(inside);
    cohort::scoped_device base(cohort::device_ref{before}); // given back at the end of the round
    try {
      cohort::scoped_device on(cohort::device_ref{inside});
      int now = -1;
      REQUIRE(cudaGetDevice(&now) == cudaSuccess);
      CHECK(now == inside);
      throw std::runtime_error("body failed");
    } catch (const std::runtime_error&) {
    }
    int now = -1;
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == before);
  }
}

// What one GPU can check: the scope makes device 0 current, and a body that throws leaves it so.
TEST_CASE("scoped_device on one GPU makes it current and survives a throwing body") {
  COHORT_SKIP_UNLESS_GPUS(1);
  // The case's own device 0, given back at its end.
  cohort::scoped_device base(cohort::device_ref{0});
  bool caught = false;
  try {
    cohort::scoped_device on(cohort::device_ref{0});
    int now = -1;
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == 0);
    throw std::runtime_error("body failed");
  } catch (const std::runtime_error&) {
    caught = true;
  }
  CHECK(caught);
  int now = -1;
  REQUIRE(cudaGetDevice(&now) == cudaSuccess);
  CHECK(now == 0);
}

TEST_CASE("topology of one device is itself") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const auto t = cohort::topology::of({cohort::device_ref{0}});
  CHECK(t.size() == 1);
  CHECK(t.link(0, 0).kind == cohort::link_kind::same_device);
  CHECK(t.fully_connected());
  CHECK_NOTHROW(cohort::enable_peer_access(cohort::device_ref{0}, cohort::device_ref{0}));
  // An index past the end, as from std::vector::at (was std::invalid_argument).
  CHECK_THROWS_WITH_AS(t.link(0, 1), "cohort::topology::link: index 1 is out of range (1 devices).",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(t.link(2, 0), doctest::Contains("cohort::topology::link: index 2"),
                       std::out_of_range);
}

TEST_CASE("peer access between two GPUs is explicit and idempotent") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const cohort::device_ref a{0}, b{1};
  const auto t = cohort::topology::of({a, b});
  int can = 0;
  REQUIRE(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess);
  CHECK((t.link(0, 1).kind == cohort::link_kind::peer) == (can != 0));
  if (can != 0) {
    CHECK_NOTHROW(cohort::enable_peer_access(a, b));
    CHECK_NOTHROW(cohort::enable_peer_access(a, b)); // twice is fine
    CHECK_NOTHROW(cohort::enable_peer_access(b, a));
    CHECK(cudaGetLastError() == cudaSuccess);        // and leaves no error behind
  } else {
    CHECK_THROWS_WITH_AS(cohort::enable_peer_access(a, b),
                         doctest::Contains("device 0 cannot access device 1"),
                         std::invalid_argument);
  }
}
