// cohort::launch on a GPU: the kernel runs on the stream's device with the arguments converted to
// its parameter types, the caller's current device is left as it was, and a launch CUDA refuses
// is a cuda_error naming the kernel and the device. (The refusal of a zero grid or block is in
// tests/host/launch_test.cu: it needs no GPU.)
#include "testing.cuh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

__global__ void scale_into(const float* in, float* out, std::size_t n, float a) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = a * in[i];
}

int current_device() {
  int id = -1;
  REQUIRE(cudaGetDevice(&id) == cudaSuccess);
  return id;
}

// Launches scale_into on a stream of `on` while `caller` is the current device, then checks that
// `caller` is still current and that the kernel ran with its arguments converted.
void launch_from(cohort::device_ref on, cohort::device_ref caller) {
  CAPTURE(on.get());
  CAPTURE(caller.get());
  cohort::stream s(on);
  const std::size_t n = 100'003; // not a multiple of the grid: the stride loop's tail is covered
  const std::vector<float> in = cohort::testing::random_values<float>(n, 16);
  cohort::device_buffer<float> x(n, s), y(n, s);
  x.copy_from_host(in);
  y.fill_bytes(cohort::testing::poison_byte);
  s.synchronize();
  cohort::scoped_device base(caller); // the case's own current device, given back at its end
  REQUIRE(current_device() == caller.get());
  // An unsigned count and a double factor, converted to std::size_t and float as <<<>>> would.
  cohort::launch(s, {.grid = 37, .block = 128}, scale_into, x.data(), y.data(),
                 static_cast<unsigned>(n), 2.5);
  CHECK(current_device() == caller.get());
  std::vector<float> out(n);
  y.copy_to_host(out);
  s.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += out[i] != 2.5f * in[i];
  CHECK(wrong == 0);
}

} // namespace

// Needs two GPUs: on one, the stream's device and the caller's are both 0, and a launch that left
// its stream's device current would pass. Both directions, so that a launch that "restores" a
// fixed device 0 instead of the caller's fails too.
TEST_CASE("launch runs the kernel on the stream's device and leaves the current device alone") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const cohort::device_ref first{0}, last{cohort::device_count() - 1};
  launch_from(last, first);
  launch_from(first, last);
}

// What one GPU can check: the kernel runs with its arguments converted, and device 0 stays current.
TEST_CASE("launch on one GPU runs the kernel with its arguments converted") {
  COHORT_SKIP_UNLESS_GPUS(1);
  launch_from(cohort::device_ref{0}, cohort::device_ref{0});
}

TEST_CASE("a launch CUDA refuses is a cuda_error naming the kernel and the device") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{cohort::device_count() - 1};
  cohort::stream s(d);
  cohort::device_buffer<float> x(1, s);
  x.fill_bytes(0); // the last launch reads it (initcheck flagged the read of an unset x)
  // No GPU runs blocks of 4096 threads: CUDA refuses the configuration at launch.
  for (const char* name : {"my scaling", static_cast<const char*>(nullptr)}) {
    CAPTURE((name ? name : "(CUDA's name)"));
    try {
      cohort::launch(s, {.grid = 1, .block = 4096, .name = name}, scale_into, x.data(), x.data(), 1,
                     1.0f);
      FAIL("a block of 4096 threads was launched");
    } catch (const cohort::cuda_error& e) {
      const std::string text = e.what();
      CAPTURE(text);
      // CUDA 13 reports an oversized block as an invalid value or an invalid configuration.
      CHECK((e.status() == cudaErrorInvalidConfiguration || e.status() == cudaErrorInvalidValue));
      CHECK(e.device() == d.get());
      CHECK(text.find(name ? "launch of my scaling" : "scale_into") != std::string::npos);
    }
  }
  // The refused launch left no error behind: the next one runs.
  cohort::launch(s, {}, scale_into, x.data(), x.data(), 1, 1.0f);
  s.synchronize();
}

TEST_CASE("an error an earlier CUDA call left behind is not taken for the launch's") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(cohort::device_ref{0});
  const std::vector<float> in = cohort::testing::random_values<float>(1000, 17);
  cohort::device_buffer<float> x(in.size(), s), y(in.size(), s);
  x.copy_from_host(in);
  y.fill_bytes(cohort::testing::poison_byte);
  // cudaSetDevice returns the error and also records it as the thread's last error.
  REQUIRE(cudaSetDevice(1 << 20) == cudaErrorInvalidDevice);
  CHECK_NOTHROW(cohort::launch(s, {.grid = 4, .block = 128}, scale_into, x.data(), y.data(),
                               in.size(), 3.0f));
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice); // left for the caller, not swallowed
  std::vector<float> out(in.size());
  y.copy_to_host(out);
  s.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    wrong += out[i] != 3.0f * in[i];
  CHECK(wrong == 0);
}
