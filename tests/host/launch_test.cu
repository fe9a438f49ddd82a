// cohort::launch's refusal of a launch with no threads, and every_gpu_or_emulated's answers that
// need no GPU: both are decided before any work is enqueued, so they are checked here.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <string>

namespace {

__global__ void never_runs(int*, int) {}

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// The message of the std::invalid_argument `launch` throws for `config`; empty where it throws
// none. cudaStreamPerThread is a valid handle on any GPU, so a launch that slipped through fails
// as a cuda_error (failing the case) instead of touching a made-up stream.
std::string refusal(const cohort::launch_config& config) {
  const cohort::stream_ref s(cohort::device_ref{0}, cudaStreamPerThread);
  try {
    cohort::launch(s, config, never_runs, nullptr, 1);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

} // namespace

TEST_CASE("launch refuses a grid or block with a zero dimension, naming the call and the kernel") {
  const cohort::launch_config zero_dimensions[] = {
      {.grid = 0, .block = 256, .name = "never_runs"},
      {.grid = 4, .block = 0, .name = "never_runs"},
      {.grid = dim3(4, 0, 1), .block = 256, .name = "never_runs"},
      {.grid = 4, .block = dim3(32, 1, 0), .name = "never_runs"},
  };
  for (const cohort::launch_config& config : zero_dimensions) {
    const std::string message = refusal(config);
    CAPTURE(message);
    CHECK(contains(message, "cohort::launch: argument 'config'"));
    CHECK(contains(message, "never_runs"));
    CHECK(contains(message, "on device 0"));
    CHECK(contains(message, "skip the launch"));
  }
}

TEST_CASE("every_gpu_or_emulated refuses an empty group, and says so where no GPU is visible") {
  CHECK_THROWS_WITH_AS(
      cohort::device_group::every_gpu_or_emulated(0),
      doctest::Contains("cohort::device_group::every_gpu_or_emulated: argument 'n'"),
      std::invalid_argument);
  if (cohort::device_count() > 0) return; // the GPU tests check the groups it makes
  try {
    (void)cohort::device_group::every_gpu_or_emulated(2);
    FAIL("every_gpu_or_emulated made a group with no GPU visible");
  } catch (const cohort::cuda_error& e) {
    CHECK(e.status() == cudaErrorNoDevice);
    CHECK(contains(e.what(), "device_group::every_gpu_or_emulated"));
    CHECK(contains(e.what(), "No GPU is visible"));
  }
}
