// cohort::launch's refusal of a launch with no threads or no stream, the other refusals of a
// stream with no handle, and every_gpu_or_emulated's answers that need no GPU: all are decided
// before any work is enqueued (before any CUDA call), so they are checked here.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <utility>

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

// A null handle is CUDA's legacy default stream, which synchronizes with everything on its device:
// what a moved-from or released cohort::stream holds. Each call refuses it before any CUDA call
// (so this runs without a GPU); before, each of them enqueued on the legacy stream.
TEST_CASE("a stream with no handle is refused by every call that takes one, before any CUDA call") {
  cudaStream_t none = nullptr; // a variable: stream_ref(device, nullptr) does not compile
  const cohort::stream_ref empty(cohort::device_ref{0}, none);
  const char* remedy = "pass the stream it was moved into";
  CHECK_THROWS_WITH_AS(cohort::launch(empty, {.grid = 1, .block = 32}, never_runs, nullptr, 1),
                       doctest::Contains("cohort::launch: argument 'stream': has no CUDA stream"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::for_each_n(empty, 10, [] __device__(std::size_t) {}),
                       doctest::Contains("cohort::for_each_n: argument 'stream'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)cohort::stream_ref(none),
                       doctest::Contains("cohort::stream_ref: argument 'handle'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::device_buffer<float>(4, empty),
                       doctest::Contains("cohort::device_buffer: argument 'stream'"),
                       std::invalid_argument);
  // A made-up event handle: the refusal comes before the event is touched.
  const cohort::event_ref mark(cohort::device_ref{0}, reinterpret_cast<cudaEvent_t>(0x10));
  CHECK_THROWS_WITH_AS(mark.record(empty),
                       doctest::Contains("cohort::event_ref::record: argument 'stream'"),
                       std::invalid_argument);
  for (const auto& [name, call] :
       {std::pair<const char*, std::function<void()>>{"synchronize", [&] { empty.synchronize(); }},
        {"ready", [&] { (void)empty.ready(); }},
        {"is_capturing", [&] { (void)empty.is_capturing(); }},
        {"wait", [&] { empty.wait(mark); }}}) {
    const std::string which = std::string("cohort::stream_ref::") + name;
    CAPTURE(which);
    try {
      call();
      FAIL("no refusal");
    } catch (const std::logic_error& e) {
      CHECK(contains(e.what(), which.c_str()));
      CHECK(contains(e.what(), "legacy default stream"));
      CHECK(contains(e.what(), remedy));
    }
  }
}

// The default streams, named with their device, pass the check that refuses an empty handle: the
// launch goes on to CUDA (which, without a GPU, fails as a cuda_error, not as a bad argument).
TEST_CASE("the default streams are taken where they are named with their device") {
  const cohort::device_ref d{0};
  cudaStream_t none = nullptr;
  CHECK(cohort::stream_ref::legacy_default(d).native_handle() == cudaStreamLegacy);
  CHECK(cohort::stream_ref::per_thread_default(d).native_handle() == cudaStreamPerThread);
  CHECK(cohort::stream_ref::borrow(d, none).native_handle() == cudaStreamLegacy);
  CHECK(cohort::stream_ref::borrow(d, none).is_default());
  CHECK(cohort::stream_ref::legacy_default(d).device() == d);
  for (const cohort::stream_ref s :
       {cohort::stream_ref::legacy_default(d), cohort::stream_ref::per_thread_default(d),
        cohort::stream_ref(d, cudaStreamLegacy)}) {
    CHECK_NOTHROW(cohort::detail::require_stream(s, "test"));
    if (cohort::device_count() == 0)
      CHECK_THROWS_AS(cohort::launch(s, {.grid = 1, .block = 32}, never_runs, nullptr, 1),
                      cohort::cuda_error);
  }
  // Without its device a default stream is refused: it belongs to whichever device is current.
  CHECK_THROWS_WITH_AS((void)cohort::stream_ref(cudaStreamLegacy),
                       doctest::Contains("stream_ref::legacy_default(device)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((void)cohort::stream_ref(cudaStreamPerThread),
                       doctest::Contains("is a default stream"), std::invalid_argument);
  // A group over borrowed streams refuses an empty handle by its position, before any CUDA call.
  CHECK_THROWS_WITH_AS(
      cohort::device_group(std::vector<cohort::stream_ref>{cohort::stream_ref::legacy_default(d),
                                                           cohort::stream_ref(d, none)}),
      doctest::Contains("cohort::device_group: argument 'streams': stream 1 has no "
                        "CUDA stream"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::device_group(std::vector<cohort::stream_ref>{}),
                       doctest::Contains("argument 'streams': the list is empty"),
                       std::invalid_argument);
}
