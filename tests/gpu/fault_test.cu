// A sticky device fault (a kernel that traps) is reported as a cuda_error that names the call and
// the device, says the context is lost and what to do, and every later call on that device says
// the same. Its own program: a trapped kernel ends the CUDA context for the rest of the process,
// so the other GPU tests must not share it.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <string>

namespace {

__global__ void trap_kernel() {
  __trap();
}

void check_lost(const cohort::cuda_error& e, int device) {
  CHECK(e.context_lost());
  CHECK(e.device() == device);
  const std::string text = e.what();
  CHECK_MESSAGE(text.find("on device " + std::to_string(device)) != std::string::npos, text);
  CHECK_MESSAGE(text.find("context is lost") != std::string::npos, text);
  CHECK_MESSAGE(text.find("restart the process") != std::string::npos, text);
  CHECK_MESSAGE(text.find("compute-sanitizer") != std::string::npos, text);
}

} // namespace

TEST_CASE("a trapped kernel is reported as a lost context, then every later call says so too") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{cohort::device_count() - 1};
  cohort::stream s(d);
  try {
    // The trap may already have happened: the check of the launch may be the first to see it.
    cohort::launch(s, {}, trap_kernel);
    s.synchronize();
    FAIL("a trapped kernel was not reported");
  } catch (const cohort::cuda_error& e) {
    check_lost(e, d.get());
  }
  try {
    cohort::device_buffer<int> after(16, s);
    after.fill_bytes(0);
    s.synchronize();
    FAIL("the device kept working after a trapped kernel");
  } catch (const cohort::cuda_error& e) {
    check_lost(e, d.get());
  }
}
