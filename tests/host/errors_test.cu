// Error text: every exception names the call, the device (and rank) and what to do.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <string>

#if COHORT_WITH_NCCL
#include <cohort/errors/nccl_error.cuh>
#endif

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("check_cuda passes success through") {
  CHECK_NOTHROW(cohort::check_cuda(cudaSuccess, "cudaFree", 0));
}

TEST_CASE("cuda_error names the call the device the status and the advice") {
  try {
    cohort::check_cuda(cudaErrorMemoryAllocation, "cudaMallocAsync", 3);
    FAIL("check_cuda did not throw");
  } catch (const cohort::cuda_error& e) {
    const std::string text = e.what();
    CHECK(contains(text, "cudaMallocAsync failed on device 3"));
    CHECK(contains(text, "cudaErrorMemoryAllocation"));
    CHECK(contains(text, "errors_test.cu:"));
    CHECK(contains(text, "Free memory on that device"));
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(e.call() == "cudaMallocAsync");
    CHECK(e.device() == 3);
    CHECK(std::string(e.where().file_name()).ends_with("errors_test.cu"));
    CHECK_FALSE(e.context_lost());
  }
}

TEST_CASE("a sticky error says the context is lost") {
  cohort::cuda_error e(cudaErrorIllegalAddress, "cudaStreamSynchronize", 1);
  CHECK(e.context_lost());
  CHECK(contains(e.what(), "context is lost"));
  CHECK(contains(e.what(), "restart the process"));
}

TEST_CASE("an error tied to no device does not name one") {
  cohort::cuda_error e(cudaErrorInvalidValue, "cudaGetDeviceCount", cohort::no_device);
  CHECK_FALSE(contains(e.what(), "on device"));
}

TEST_CASE("check_launch names the kernel") {
  // With no pending error, check_launch is silent.
  if (cohort::device_count() > 0) CHECK_NOTHROW(cohort::check_launch("scale", 0));
  cohort::cuda_error e(cudaErrorInvalidConfiguration, "launch of scale", 0);
  CHECK(contains(e.what(), "launch of scale failed on device 0"));
}

TEST_CASE("destructor-path errors are swallowed") {
  CHECK_NOTHROW(cohort::ignore_cuda_error(cudaErrorInvalidValue));
}

#if COHORT_WITH_NCCL
TEST_CASE("nccl_error names the call the device and the rank") {
  try {
    cohort::check_nccl(ncclInvalidArgument, "ncclAllReduce", 1, 5);
    FAIL("check_nccl did not throw");
  } catch (const cohort::nccl_error& e) {
    const std::string text = e.what();
    CHECK(contains(text, "ncclAllReduce failed on device 1 (rank 5)"));
    CHECK(contains(text, "errors_test.cu:"));
    CHECK(e.rank() == 5);
    CHECK(e.device() == 1);
    CHECK(e.status() == ncclInvalidArgument);
  }
  CHECK_NOTHROW(cohort::check_nccl(ncclSuccess, "ncclGroupEnd"));
  CHECK_NOTHROW(cohort::check_nccl(ncclInProgress, "ncclCommInitRankConfig"));
}
#endif
