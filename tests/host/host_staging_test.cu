// The sort's host-memory precheck (algorithms/detail/host_staging.cuh), without a GPU: what the
// host can still give against /proc/meminfo's own total, and the cgroup files' two forms.
#include "testing.cuh"

#include <cohort/algorithms/detail/host_staging.cuh>

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

TEST_CASE("the host memory a staged sort may take is positive and below the host's total") {
  std::ifstream info("/proc/meminfo");
  unsigned long long total_kib = 0;
  for (std::string line; std::getline(info, line);)
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &total_kib) == 1) break;
  REQUIRE(total_kib > 0);
  const std::size_t available = cohort::detail::available_host_bytes();
  CHECK(available > 0);
  CHECK(available <= total_kib * 1024);
}

TEST_CASE("a cgroup limit reads as a number, and 'max' or a missing file as none") {
  const std::string limited = "/tmp/cohort_host_staging_test_limit";
  const std::string unlimited = "/tmp/cohort_host_staging_test_max";
  std::ofstream(limited) << "12345678\n";
  std::ofstream(unlimited) << "max\n";
  CHECK(cohort::detail::number_in_file(limited.c_str()) == 12345678);
  CHECK(cohort::detail::number_in_file(unlimited.c_str()) == 0);
  CHECK(cohort::detail::number_in_file("/nonexistent/cohort/memory.max") == 0);
  std::remove(limited.c_str());
  std::remove(unlimited.c_str());
}
