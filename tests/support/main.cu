// The doctest main of every cohort test program.
//
// ctest runs one test case per process (see cohort_discover_tests.cmake). A case that cannot run
// here (too few GPUs) calls COHORT_SKIP_UNLESS... and returns; when every case this process ran
// skipped, the process exits with 77, which ctest reports as *skipped* with the printed reason.
// A run in which no case ran at all fails: a filter that matches nothing (a case renamed, or a
// name ctest could not carry) must not pass as a test.
#define DOCTEST_CONFIG_IMPLEMENT
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cstdio>

namespace {

int cases_finished = 0;

struct count_cases : doctest::IReporter {
  explicit count_cases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override { ++cases_finished; }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

} // namespace

DOCTEST_REGISTER_LISTENER("cohort_count_cases", 1, count_cases);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || result != 0) return result;
  if (cases_finished == 0) {
    std::fprintf(stderr, "no test case ran: the filter matched none\n");
    return 3;
  }
  const int skipped = cohort::testing::skipped_cases();
  if (cases_finished > 0 && skipped == cases_finished) return cohort::testing::skip_exit_code;
  return 0;
}
