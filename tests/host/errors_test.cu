// Error text: every exception names the call, the device (and rank) and what to do.
#include "testing.cuh"

#include <cohort/detail/arguments.cuh>

#include <doctest/doctest.h>

#include <stdexcept>
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

namespace {

// Leaves a real error pending in the runtime's last-error slot (with or without a GPU: no device
// has the id -1), and returns it.
cudaError_t pending_error() {
  const cudaError_t status = cudaSetDevice(-1);
  REQUIRE(status != cudaSuccess);
  REQUIRE(cudaPeekAtLastError() == status);
  return status;
}

// Whether errors can be cleared here: without a driver and a GPU, every runtime call reports the
// missing driver again, so no error ever clears.
bool errors_clear() {
  if (cohort::device_count() > 0) return true;
  cohort::testing::skip("clearing an error needs a working CUDA runtime (a driver and a GPU); "
                        "without one every call reports the missing driver again");
  return false;
}

} // namespace

TEST_CASE("check_launch is silent without a pending error") {
  if (!errors_clear()) return;
  (void)cudaGetLastError();
  CHECK_NOTHROW(cohort::check_launch("scale", 0));
}

TEST_CASE("check_launch turns the pending error into one that names the kernel, and clears it") {
  const cudaError_t status = pending_error();
  try {
    cohort::check_launch("scale", 0);
    FAIL("check_launch did not throw with an error pending");
  } catch (const cohort::cuda_error& e) {
    CHECK(contains(e.what(), "launch of scale failed on device 0"));
    CHECK(e.status() == status);
    CHECK(e.call() == "launch of scale");
    CHECK(std::string(e.where().file_name()).ends_with("errors_test.cu"));
  }
  if (!errors_clear()) return;
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  CHECK_NOTHROW(cohort::check_launch("scale", 0)); // reported once
}

TEST_CASE("destructor-path errors are swallowed and a non-sticky one is cleared") {
  static_assert(noexcept(cohort::ignore_cuda_error(cudaErrorInvalidValue)));
  if (!errors_clear()) return;
  const cudaError_t status = pending_error();
  cohort::ignore_cuda_error(status);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  // Success clears nothing that is pending for someone else.
  const cudaError_t again = pending_error();
  cohort::ignore_cuda_error(cudaSuccess);
  CHECK(cudaPeekAtLastError() == again);
  (void)cudaGetLastError();
}

TEST_CASE("a null buffer is refused as null before CUDA is asked about it") {
  // Without a GPU (or a driver) CUDA cannot be asked at all: the answer must still be the
  // argument error, not a CUDA error from cudaPointerGetAttributes.
  try {
    const cohort::device_ref d{0};
    cohort::detail::require_memory_of(d, nullptr, 16, "all_reduce", "send",
                                      cohort::stream_ref::legacy_default(d));
    FAIL("a null buffer of 16 bytes passed");
  } catch (const std::invalid_argument& e) {
    CHECK(contains(e.what(), "cohort::all_reduce: argument 'send': is null"));
  }
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
