// Helpers shared by cohort's tests: skipping where too few GPUs are visible, device groups that
// fall back to emulation on one GPU, random data and poison values.
#pragma once

#include <cohort/cohort.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace cohort::testing {

inline constexpr int skip_exit_code = 77; // ctest's SKIP_RETURN_CODE for every test

inline int& skipped_counter() {
  static int count = 0;
  return count;
}
inline int skipped_cases() {
  return skipped_counter();
}

inline void skip(const std::string& reason) {
  ++skipped_counter();
  std::printf("SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
}

// True (after reporting the skip) when fewer than `n` real GPUs are visible.
inline bool too_few_gpus(int n) {
  const int visible = device_count();
  if (visible >= n) return false;
  skip("needs " + std::to_string(n) + " GPU(s), " + std::to_string(visible) + " visible");
  return true;
}

// A group of `n` members: real GPUs where `n` are visible, else emulated on GPU 0 (the caller
// has already skipped where no GPU is visible).
inline device_group group_of(std::size_t n) {
  if (device_count() >= static_cast<int>(n)) {
    std::vector<device_ref> members;
    for (std::size_t i = 0; i < n; ++i)
      members.emplace_back(static_cast<int>(i));
    return device_group(members);
  }
  return device_group::emulated(device_ref{0}, n);
}

// Random values of T (integers in a small range so sums stay exact; floats in [-1, 1)).
template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::vector<T> values(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<long long> pick(-1000, 1000);
    for (T& v : values)
      v = static_cast<T>(pick(engine));
  } else {
    std::uniform_real_distribution<double> pick(-1.0, 1.0);
    for (T& v : values)
      v = static_cast<T>(pick(engine));
  }
  return values;
}

// The byte every output is filled with before a run, so unwritten elements show.
inline constexpr unsigned char poison_byte = 0xA5;

// Sets an environment variable for a scope and puts back what it was (or its absence) at the end,
// however the scope ends, so that a failing check cannot leave it set for later cases.
class environment_guard {
 public:
  environment_guard(const char* name, const char* value)
      : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (setenv(name, value, 1) != 0)
      throw std::runtime_error(std::string("setenv ") + name + " failed");
  }
  ~environment_guard() {
    if (old_)
      (void)setenv(name_.c_str(), old_->c_str(), 1);
    else
      (void)unsetenv(name_.c_str());
  }
  environment_guard(const environment_guard&) = delete;
  environment_guard& operator=(const environment_guard&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// How long a test's p2p clique waits for a peer before it stops its kernel: 20 s, or the
// COHORT_P2P_PATIENCE_MS of the run (read as the library reads it) where that is longer or 0
// (wait for ever); scripts/gpu_check.sh raises it under the sanitizers, whose instrumented
// barriers spin many times slower, so that a slow run is not taken for a hang.
inline std::chrono::milliseconds patience() {
  constexpr std::chrono::milliseconds floor{20'000};
  const auto from_environment = p2p_clique_options::patience_from_environment();
  if (!from_environment) return floor;
  if (*from_environment == p2p_clique_options::wait_forever) return *from_environment;
  return std::max(floor, *from_environment);
}

// How many rounds a long case makes: `full`, or, where COHORT_TEST_ROUNDS_DIVISOR (digits) is set,
// that share of it, at least 4, so that graph replays and direct calls still alternate.
// scripts/gpu_check.sh sets it under the sanitizers, where the 1000-replay graph case alone took
// racecheck 441 s; native runs keep every round.
inline int rounds(int full) {
  const char* text = std::getenv("COHORT_TEST_ROUNDS_DIVISOR");
  if (text == nullptr || *text == '\0') return full;
  char* end = nullptr;
  const unsigned long divisor = std::strtoul(text, &end, 10);
  if (*end != '\0' || text[0] < '0' || text[0] > '9' || divisor == 0)
    throw std::invalid_argument("COHORT_TEST_ROUNDS_DIVISOR must be a positive number, in digits");
  return std::max(4, static_cast<int>(full / static_cast<long long>(divisor)));
}

template <class T>
T poison_value() {
  T value;
  std::memset(&value, poison_byte, sizeof value);
  return value;
}

// Member `rank`'s stream alone captured (relaxed mode) for a scope, to test that a call refuses
// a group whose members are not all in one capture: `end()` ends the capture and says how many
// nodes the refused call left in it (none, if it refused before enqueuing).
class lone_capture {
 public:
  lone_capture(const device_group& group, std::size_t rank)
      : device_(group.device(rank))
      , stream_(group.stream(rank).native_handle()) {
    scoped_device on(device_);
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed) != cudaSuccess)
      throw std::runtime_error("lone_capture: cudaStreamBeginCapture failed");
  }
  std::size_t end() {
    scoped_device on(device_);
    ended_ = true;
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess)
      throw std::runtime_error("lone_capture: cudaStreamEndCapture failed");
    std::size_t nodes = 0;
    const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
    (void)cudaGraphDestroy(graph);
    if (counted != cudaSuccess) throw std::runtime_error("lone_capture: cudaGraphGetNodes failed");
    return nodes;
  }
  ~lone_capture() {
    if (!ended_) try {
        (void)end();
      } catch (...) {
      }
  }
  lone_capture(const lone_capture&) = delete;
  lone_capture& operator=(const lone_capture&) = delete;

 private:
  device_ref device_;
  cudaStream_t stream_;
  bool ended_ = false;
};

// The message of the std::logic_error `call` throws, empty where it throws none: for refusals made
// inside a capture, checked after the capture has ended.
template <class Call>
std::string logic_error_message(Call&& call) {
  try {
    call();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return {};
}

// Member r's shard of `x`, read back: copied on the shard's stream, which is then synchronized.
template <class T>
std::vector<T> shard_to_host(const distributed_buffer<T>& x, std::size_t r) {
  std::vector<T> out(x.local(r).size());
  x.local(r).copy_to_host(out);
  x.local(r).stream().synchronize();
  return out;
}

} // namespace cohort::testing

// Ends the current test case as skipped unless `n` real GPUs are visible.
#define COHORT_SKIP_UNLESS_GPUS(n)                                                                 \
  do {                                                                                             \
    if (::cohort::testing::too_few_gpus(n)) return;                                                \
  } while (0)
