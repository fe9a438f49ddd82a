// cohort's NVTX ranges with no tool attached: NVTX3 gives the domain a null handle, and a range
// then formats nothing and calls nothing (what keeps them free on the host in for_each_bench's
// host-overhead table). With a tool attached (ncu --nvtx, nsys), the domain exists.
#include "testing.cuh"

#include <cohort/detail/nvtx.cuh>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

TEST_CASE("with no tool attached, cohort's NVTX ranges format nothing and call nothing") {
  if (std::getenv("NVTX_INJECTION64_PATH") != nullptr) {
    // Reported skipped, not passed: none of the checks below ran.
    cohort::testing::skip("an NVTX tool is attached (NVTX_INJECTION64_PATH is set): the ranges "
                          "without a tool cannot be checked");
    return;
  }
  CHECK(cohort::detail::nvtx_domain() == nullptr);
  // A message that formatting would crash on: a range that formats while no tool listens fails.
  const char* never_read = reinterpret_cast<const char*>(std::uintptr_t{1});
  const cohort::detail::nvtx_range outer("all_reduce", "%s %zu B/rank", never_read, std::size_t{8});
  { const cohort::detail::nvtx_range inner("fork"); }
  CHECK(cohort::detail::nvtx_domain() == nullptr);
}

TEST_CASE("a range's message is formatted as printf would, cut to its buffer") {
  char message[32];
  std::memset(message, '?', sizeof message);
  cohort::detail::format_into(message, sizeof message, "%zu items, %d members", std::size_t{12}, 3);
  CHECK(std::string_view(message) == "12 items, 3 members");
  std::memset(message, '?', sizeof message);
  cohort::detail::format_into(message, sizeof message, "after the members' work");
  CHECK(std::string_view(message) == "after the members' work");
  std::memset(message, '?', sizeof message);
  cohort::detail::format_into(message, 8, "%zu items", std::size_t{12});
  CHECK(std::string_view(message) == "12 item");
  CHECK(message[8] == '?');
}
