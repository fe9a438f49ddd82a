// The device API's debug checks (COHORT_DEVICE_CHECKS): a peer rank outside the clique stops the
// kernel (a trap, after a printf naming p2p_handle::peer), reported as a lost context. Its own
// program: a trapped kernel ends the CUDA context for the rest of the process.
#define COHORT_DEVICE_CHECKS 1
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace {

__global__ void read_past_the_last_rank(cohort::p2p_handle<int> h, int* out) {
  auto s = h.session();
  s.sync();
  *out = __ldcg(h.peer(h.ranks())); // one past the last rank: the check traps here
  s.end();
}

// What the process writes to its standard output (file descriptor 1, where CUDA prints a
// kernel's printf) while it lives: a lost context alone does not say which fault lost it.
class stdout_capture {
 public:
  stdout_capture() {
    file_ = std::tmpfile();
    if (file_ == nullptr) throw std::runtime_error("stdout_capture: tmpfile failed");
    std::fflush(stdout);
    saved_ = dup(1);
    if (saved_ < 0 || dup2(fileno(file_), 1) < 0)
      throw std::runtime_error("stdout_capture: dup2 failed");
  }
  // Puts the standard output back and returns what was written meanwhile.
  std::string end() {
    if (saved_ < 0) return text_;
    std::fflush(stdout);
    dup2(saved_, 1);
    close(saved_);
    saved_ = -1;
    std::rewind(file_);
    char chunk[4096];
    for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, file_)) > 0;)
      text_.append(chunk, got);
    std::fclose(file_);
    file_ = nullptr;
    return text_;
  }
  ~stdout_capture() { (void)end(); }
  stdout_capture(const stdout_capture&) = delete;
  stdout_capture& operator=(const stdout_capture&) = delete;

 private:
  std::FILE* file_ = nullptr;
  int saved_ = -1;
  std::string text_;
};

} // namespace

// The check's own fault, not any: the bounds check prints the call, the rank and the limit before
// it traps (a trap is cudaErrorLaunchFailure). With the check compiled out, or one that let rank
// 2 through, the kernel reads the null pointer past the last rank's (cudaErrorIllegalAddress, no
// such line) and this case fails.
TEST_CASE("p2p_handle::peer with a rank outside the clique traps in a checked build") {
  COHORT_SKIP_UNLESS_GPUS(1);
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::p2p_clique peers(group, {.patience = cohort::testing::patience()});
  cohort::distributed_buffer<int> x(group, cohort::partition::replicated(16, 2));
  cohort::distributed_buffer<int> out(group, cohort::partition::replicated(1, 2));
  group.synchronize();
  cudaError_t status = cudaSuccess;
  bool lost = false;
  stdout_capture printed;
  try {
    cohort::p2p_launch(
        peers, {.grid = 1, .block = 32}, read_past_the_last_rank, [&](std::size_t r) {
          return std::make_tuple(cohort::p2p_handle_for(peers, x, r), out.shard(r).data.data());
        });
    group.synchronize();
  } catch (const cohort::cuda_error& e) {
    status = e.status();
    lost = e.context_lost();
  }
  // CUDA writes a trapped kernel's printf when a synchronizing call sees the fault: whichever
  // call threw above, this one has seen it too.
  {
    cohort::scoped_device on(cohort::device_ref{0});
    (void)cudaDeviceSynchronize();
  }
  const std::string text = printed.end();
  std::fputs(text.c_str(), stdout); // still in the case's log
  CAPTURE(text);
  CHECK_MESSAGE(status != cudaSuccess, "the out-of-range rank was not caught");
  CHECK(lost);
  CHECK_MESSAGE(status == cudaErrorLaunchFailure, cudaGetErrorName(status));
  CHECK(text.find("cohort p2p: p2p_handle::peer: rank is 2, not below 2 (block 0, thread ") !=
        std::string::npos);
}
