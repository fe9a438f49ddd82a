// Argument checks that need no GPU, and the zero-device answer on a machine without one.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <string>

TEST_CASE("an empty device group is rejected") {
  CHECK_THROWS_WITH_AS(cohort::device_group(std::vector<cohort::device_ref>{}),
                       doctest::Contains("argument 'devices': the list is empty"),
                       std::invalid_argument);
}

TEST_CASE("a device listed twice is rejected and emulation is suggested") {
  CHECK_THROWS_WITH_AS((cohort::device_group{cohort::device_ref{0}, cohort::device_ref{0}}),
                       doctest::Contains("device 0 is listed twice (positions 0 and 1)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((cohort::device_group{cohort::device_ref{0}, cohort::device_ref{0}}),
                       doctest::Contains("device_group::emulated"), std::invalid_argument);
}

TEST_CASE("an emulated group of zero devices is rejected") {
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(cohort::device_ref{0}, 0),
                       doctest::Contains("argument 'n'"), std::invalid_argument);
}

TEST_CASE("a device out of range is rejected with the count visible") {
  const int visible = cohort::device_count();
  // CUDA's own answer, or 0 where it says there is no driver or no GPU (device_count's promise).
  int counted = -1;
  const cudaError_t status = cudaGetDeviceCount(&counted);
  (void)cudaGetLastError(); // a no-GPU status is also left as the thread's last error
  const std::string status_name = cudaGetErrorName(status);
  CAPTURE(status_name);
  if (status == cudaSuccess) {
    CHECK(visible == counted);
  } else {
    CHECK((status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
           status == cudaErrorInitializationError));
    CHECK(visible == 0);
  }
  const cohort::device_ref beyond{visible};
  const std::string expected = "device " + std::to_string(visible) +
                               " is out of range: " + std::to_string(visible) + " GPU(s) visible";
  CHECK_THROWS_WITH_AS(cohort::properties(beyond), doctest::Contains(expected.c_str()),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::memory_info(beyond), doctest::Contains(expected.c_str()),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::stream{beyond}, doctest::Contains(expected.c_str()),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::event{beyond}, doctest::Contains(expected.c_str()),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::device_group{beyond}, doctest::Contains(expected.c_str()),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(beyond, 2),
                       doctest::Contains(expected.c_str()), std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::properties(cohort::device_ref{-1}),
                       doctest::Contains("device -1 is out of range"), std::invalid_argument);
}

TEST_CASE("devices() agrees with device_count()") {
  const auto all = cohort::devices();
  REQUIRE(static_cast<int>(all.size()) == cohort::device_count());
  for (std::size_t i = 0; i < all.size(); ++i)
    CHECK(all[i].get() == static_cast<int>(i));
}

TEST_CASE("an emulated group with no SM weights is rejected") {
  CHECK_THROWS_WITH_AS(cohort::device_group::emulated(cohort::device_ref{0}, std::vector<double>{}),
                       doctest::Contains("argument 'sm_weights'"), std::invalid_argument);
}

TEST_CASE(
    "COHORT_P2P_PATIENCE_MS is read as digits, 0 waiting for ever, in the library and the tests") {
  using std::chrono::milliseconds;
  using options = cohort::p2p_clique_options;
  {
    const cohort::testing::environment_guard unset("COHORT_P2P_PATIENCE_MS", "");
    CHECK_FALSE(options::patience_from_environment().has_value());
    CHECK(cohort::testing::patience() == milliseconds(20'000));
  }
  {
    const cohort::testing::environment_guard short_wait("COHORT_P2P_PATIENCE_MS", "1500");
    CHECK(options::patience_from_environment() == milliseconds(1500));
    CHECK(cohort::testing::patience() == milliseconds(20'000)); // the tests' floor
  }
  {
    const cohort::testing::environment_guard long_wait("COHORT_P2P_PATIENCE_MS", "90000");
    CHECK(cohort::testing::patience() == milliseconds(90'000));
  }
  {
    // The tests read 0 as the library does: wait for ever (they used to make it 20 s).
    const cohort::testing::environment_guard forever("COHORT_P2P_PATIENCE_MS", "0");
    CHECK(options::patience_from_environment() == options::wait_forever);
    CHECK(cohort::testing::patience() == options::wait_forever);
  }
  {
    // Past what strtoull holds: it saturates, and the signed count made that a negative patience.
    const cohort::testing::environment_guard huge("COHORT_P2P_PATIENCE_MS",
                                                  "99999999999999999999999");
    CHECK(options::patience_from_environment() == milliseconds::max());
  }
  for (const char* bad : {"12s", "-5", " 7", "1e3"}) {
    const cohort::testing::environment_guard wrong("COHORT_P2P_PATIENCE_MS", bad);
    CHECK_THROWS_WITH_AS(options::patience_from_environment(),
                         doctest::Contains("argument 'COHORT_P2P_PATIENCE_MS'"),
                         std::invalid_argument);
    CHECK_THROWS_AS(cohort::testing::patience(), std::invalid_argument);
  }
}

TEST_CASE(
    "COHORT_TEST_ROUNDS_DIVISOR shortens long cases under the sanitizers, to 4 rounds at least") {
  {
    const cohort::testing::environment_guard unset("COHORT_TEST_ROUNDS_DIVISOR", "");
    CHECK(cohort::testing::rounds(1000) == 1000);
  }
  {
    const cohort::testing::environment_guard tenth("COHORT_TEST_ROUNDS_DIVISOR", "10");
    CHECK(cohort::testing::rounds(1000) == 100);
    CHECK(cohort::testing::rounds(200) == 20);
    CHECK(cohort::testing::rounds(30) == 4);
  }
  for (const char* bad : {"0", "x", "-2", "10s"}) {
    const cohort::testing::environment_guard wrong("COHORT_TEST_ROUNDS_DIVISOR", bad);
    CHECK_THROWS_AS(cohort::testing::rounds(1000), std::invalid_argument);
  }
}

// The kernels count a patience in nanoseconds: one past about 584 years (milliseconds::max())
// overflowed the conversion into a patience of -1 ms's worth, a barrier that gave up at once.
TEST_CASE("a p2p patience past what nanoseconds hold means for ever, not at once") {
  using std::chrono::milliseconds;
  CHECK(cohort::detail::patience_nanoseconds(milliseconds(0)) == 0);
  CHECK(cohort::detail::patience_nanoseconds(milliseconds(1500)) == 1'500'000'000ull);
  CHECK(cohort::detail::patience_nanoseconds(std::chrono::minutes(5)) == 300'000'000'000ull);
  CHECK(cohort::detail::patience_nanoseconds(milliseconds::max()) == ~0ull);
  CHECK(cohort::detail::patience_nanoseconds(milliseconds(18'446'744'073'709)) == ~0ull);
  CHECK(cohort::detail::patience_nanoseconds(milliseconds(18'446'744'073'708)) ==
        18'446'744'073'708'000'000ull);
}
