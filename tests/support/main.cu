// The doctest main of every cohort test program.
//
// ctest runs one test case per process (see cohort_discover_tests.cmake). A case that cannot run
// here (too few GPUs) calls COHORT_SKIP_UNLESS... and returns; when every case this process ran
// skipped, the process exits with 77, which ctest reports as *skipped* with the printed reason.
// A run in which no case ran at all fails: a filter that matches nothing (a case renamed, or a
// name ctest could not carry) must not pass as a test. A case that leaves the calling thread's
// current device or current context other than it found them fails (cohort promises to leave
// both as they were): the process reports it and exits with 4, after putting them back.
#define DOCTEST_CONFIG_IMPLEMENT
#include "testing.cuh"

#include <doctest/doctest.h>

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace {

int cases_finished = 0;
int cases_that_moved_the_context = 0;

// The thread's current device and context. Asks without creating anything: cudaGetDevice does
// not initialise a context, and cuCtxGetCurrent only reads.
struct current_state {
  int device = -1;
  CUcontext context = nullptr;

  static current_state now() {
    current_state s;
    if (cudaGetDevice(&s.device) != cudaSuccess) {
      (void)cudaGetLastError();
      s.device = -1;
    }
    s.context = cohort::detail::current_context();
    return s;
  }
  bool operator==(const current_state&) const = default;
};

current_state before_case;

// Whether `after` is, for the runtime, the state `before` was: the same, or, where no context was
// current, the runtime's own primary context of the same current device (which the runtime makes
// current at the first call that needs a context, a test's own raw call such as
// cudaDeviceSynchronize). Whether cohort created a context on a GPU it should not have is
// context_test's to check, not this.
bool same_for_the_runtime(const current_state& before, const current_state& after) {
  if (after == before) return true;
  if (before.context != nullptr || after.context == nullptr || after.device != before.device)
    return false;
  const cohort::detail::context_api& api = cohort::detail::context_api::get();
  if (!api.complete || api.primary_state == nullptr) return false;
  CUdevice device = 0;
  unsigned flags = 0;
  int active = 0;
  if (api.device_get(&device, before.device) != CUDA_SUCCESS ||
      api.primary_state(device, &flags, &active) != CUDA_SUCCESS || active == 0)
    return false;
  return cohort::detail::primary_context(before.device) == after.context; // active: nothing made
}

struct count_cases : doctest::IReporter {
  explicit count_cases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {
    before_case = current_state::now();
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    ++cases_finished;
    const current_state after = current_state::now();
    if (after == before_case) return;
    const cohort::detail::context_api& api = cohort::detail::context_api::get();
    if (same_for_the_runtime(before_case, after)) {
      if (api.set_current != nullptr) (void)api.set_current(before_case.context);
      return;
    }
    ++cases_that_moved_the_context;
    std::fprintf(stderr,
                 "FAILED: the test case left the current device %d and context %p where it found "
                 "device %d and context %p\n",
                 after.device, static_cast<void*>(after.context), before_case.device,
                 static_cast<void*>(before_case.context));
    // Put them back, so that the next case starts as this one did.
    if (api.set_current != nullptr) (void)api.set_current(before_case.context);
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

// doctest's own handler reports the crash and puts this one back; the signal comes again and this
// one prints the stack down to the fault (seen here: the faulting function, then doctest's run).
void print_backtrace(int signal) {
  void* frames[64];
  const int count = backtrace(frames, 64);
  const char header[] = "\n== COHORT_TEST_BACKTRACE: the stack of the crash\n";
  (void)!write(STDERR_FILENO, header, sizeof(header) - 1);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void print_backtraces_if_asked() {
  if (std::getenv("COHORT_TEST_BACKTRACE") == nullptr) return;
  void* frame = nullptr;
  (void)backtrace(&frame, 1); // loads the unwinder now: loading it in a handler may allocate
  for (const int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    std::signal(signal, print_backtrace);
}

} // namespace

DOCTEST_REGISTER_LISTENER("cohort_count_cases", 1, count_cases);

int main(int argc, char** argv) {
  print_backtraces_if_asked();
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || result != 0) return result;
  if (cases_that_moved_the_context > 0) return 4;
  if (cases_finished == 0) {
    std::fprintf(stderr, "no test case ran: the filter matched none\n");
    return 3;
  }
  const int skipped = cohort::testing::skipped_cases();
  if (cases_finished > 0 && skipped == cases_finished) return cohort::testing::skip_exit_code;
  return 0;
}
