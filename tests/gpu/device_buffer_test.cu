// device_buffer: allocation on the right device, round trips of random data in every element
// type, peer copies, sizes 0/1/primes, moves, and the errors a user can cause.
#include "held_stream.cuh"
#include "kernels.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>
#include <type_traits>

namespace {

struct particle {
  float x, y, z;
  int id;
};

template <class T>
std::vector<T> random_of(std::size_t n, unsigned seed) {
  if constexpr (std::is_same_v<T, particle>) {
    auto f = cohort::testing::random_values<float>(3 * n, seed);
    auto ids = cohort::testing::random_values<int>(n, seed + 1);
    std::vector<particle> out(n);
    for (std::size_t i = 0; i < n; ++i)
      out[i] = {f[3 * i], f[3 * i + 1], f[3 * i + 2], ids[i]};
    return out;
  } else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    auto f = cohort::testing::random_values<float>(n, seed);
    std::vector<T> out(n);
    for (std::size_t i = 0; i < n; ++i)
      out[i] = T(f[i]);
    return out;
  } else {
    return cohort::testing::random_values<T>(n, seed);
  }
}

// Bitwise equality: what a copy must preserve, for every type (NaN payloads included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

const std::size_t sizes[] = {0, 1, 2, 3, 13, 1021, 65537, 1000003};

// Whether `e` completes within `limit`, polled: a copy ordered wrongly fails the case, not hangs it.
bool completes_within(const cohort::event& e, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!e.ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Pinned host memory for read_aside, allocated before a stream is held and freed after: freeing
// pinned memory may wait for the whole device, the held stream included.
class pinned_bytes {
 public:
  explicit pinned_bytes(std::size_t bytes) {
    REQUIRE(cudaMallocHost(&p_, bytes == 0 ? 1 : bytes) == cudaSuccess);
  }
  ~pinned_bytes() { (void)cudaFreeHost(p_); }
  pinned_bytes(const pinned_bytes&) = delete;
  pinned_bytes& operator=(const pinned_bytes&) = delete;
  void* get() const noexcept { return p_; }

 private:
  void* p_ = nullptr;
};

// The buffer's elements, read through `staging` on a stream of their own (the buffer's stream may
// be held), within `limit`.
template <class T>
std::vector<T> read_aside(const cohort::device_buffer<T>& x, const pinned_bytes& staging,
                          std::chrono::milliseconds limit) {
  std::vector<T> out(x.size());
  if (x.empty()) return out;
  cohort::stream side(x.device());
  cohort::scoped_device on(x.device());
  REQUIRE(cudaMemcpyAsync(staging.get(), x.data(), x.size_bytes(), cudaMemcpyDeviceToHost,
                          side.native_handle()) == cudaSuccess);
  cohort::event done(x.device());
  done.record(side);
  const bool read = completes_within(done, limit);
  if (read) std::memcpy(out.data(), staging.get(), x.size_bytes());
  side.synchronize(); // before the staging memory is reused (the read waits behind nothing held)
  REQUIRE_MESSAGE(read, "reading the target on a stream of its own took more than the limit");
  return out;
}

// Copies `from` into `to` on `on` while `held` is held busy: the copy must be done (its stream's
// event complete, its bytes in `to`) while `held` still is. A copy that also waited for `held`'s
// work would not finish until the hold ends; one enqueued on a buffer's own stream instead of `on`
// would leave `to` poisoned when `on`'s event completes.
void copy_while_held(const cohort::device_buffer<float>& from, cohort::device_buffer<float>& to,
                     cohort::stream_ref on, cohort::stream_ref held,
                     const std::vector<float>& expected) {
  using namespace std::chrono_literals;
  const pinned_bytes staging(to.size_bytes());
  cohort::event done(on.device());
  cohort::testing::held_stream hold(held);
  from.copy_to(to, on);
  done.record(on);
  CHECK_MESSAGE(completes_within(done, 5s), "the copy waited for the held stream");
  const std::vector<float> got = read_aside(to, staging, 5s);
  CHECK_MESSAGE(hold.busy(), "the held stream was released before the copy was checked");
  hold.release();
  CHECK(same_bits(expected, got));
}

} // namespace

TYPE_TO_STRING(particle);
TYPE_TO_STRING(__half);
TYPE_TO_STRING(__nv_bfloat16);

static_assert(!std::is_copy_constructible_v<cohort::device_buffer<float>>);
static_assert(std::is_nothrow_move_constructible_v<cohort::device_buffer<float>>);

TEST_CASE_TEMPLATE("device_buffer round-trips random data", T, float, double, int, __half,
                   __nv_bfloat16, particle) {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (cohort::device_ref d : cohort::devices()) {
    cohort::stream s(d);
    for (std::size_t n : sizes) {
      CAPTURE(n);
      const std::vector<T> input = random_of<T>(n, 17 + static_cast<unsigned>(n));
      cohort::device_buffer<T> buffer(n, s);
      CHECK(buffer.size() == n);
      CHECK(buffer.size_bytes() == n * sizeof(T));
      CHECK(buffer.device() == d);
      CHECK(buffer.stream() == cohort::stream_ref(s));
      CHECK(buffer.empty() == (n == 0));
      if (n > 0) {
        cudaPointerAttributes attributes{};
        REQUIRE(cudaPointerGetAttributes(&attributes, buffer.data()) == cudaSuccess);
        CHECK(attributes.device == d.get());
        CHECK(attributes.type == cudaMemoryTypeDevice);
      }
      std::vector<T> output(n, cohort::testing::poison_value<T>());
      buffer.copy_from_host(input);
      buffer.copy_to_host(output);
      s.synchronize();
      CHECK(same_bits(input, output));
    }
  }
}

TEST_CASE("device_buffer contents are what a kernel wrote") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const cohort::device_ref d{0};
  cohort::stream s(d);
  const std::size_t n = 999983; // prime
  const auto input = cohort::testing::random_values<int>(n, 5);
  cohort::device_buffer<int> in(n, s), out(n, s);
  in.copy_from_host(input);
  out.fill_bytes(cohort::testing::poison_byte);
  cohort::testing::launch_add_one(s, in.data(), out.data(), n);
  std::vector<int> result(n);
  out.copy_to_host(result);
  s.synchronize();
  for (std::size_t i = 0; i < n; ++i)
    if (result[i] != input[i] + 1) FAIL("element " << i << " is " << result[i]);
}

TEST_CASE("copy_to copies between buffers on the same and on different devices") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int last = cohort::device_count() - 1;
  cohort::stream s0(cohort::device_ref{0}), s1(cohort::device_ref{last});
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto input = cohort::testing::random_values<double>(n, 3);
    cohort::device_buffer<double> a(n, s0), b(n, s1), c(n, s0);
    a.copy_from_host(input);
    b.fill_bytes(cohort::testing::poison_byte);
    c.fill_bytes(cohort::testing::poison_byte);
    a.copy_to(b); // across devices where there are two, across streams always
    b.copy_to(c); // and back
    std::vector<double> from_b(n), from_c(n);
    b.copy_to_host(from_b);
    c.copy_to_host(from_c);
    s1.synchronize();
    s0.synchronize();
    CHECK(same_bits(input, from_b));
    CHECK(same_bits(input, from_c));
  }
}

TEST_CASE("copy_to orders the copy after work already on the target's stream") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int last = cohort::device_count() - 1;
  cohort::stream s0(cohort::device_ref{0}), s1(cohort::device_ref{last});
  constexpr std::size_t n = 1 << 16;
  const auto input = cohort::testing::random_values<int>(n, 9);
  cohort::device_buffer<int> source(n, s0), target(n, s1);
  source.copy_from_host(input);
  // A late write to the target on its own stream must not land after (over) the copy.
  cohort::testing::launch_write_after_delay(s1, target.data(), n, -1, 3'000'000);
  source.copy_to(target);
  std::vector<int> out(n);
  target.copy_to_host(out);
  s1.synchronize();
  CHECK(out == input);
}

TEST_CASE("copy_to keeps its order both ways over many back-to-back copies, after moves too") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int last = cohort::device_count() - 1;
  cohort::stream s0(cohort::device_ref{0}), s1(cohort::device_ref{last});
  constexpr std::size_t n = 4099;
  constexpr int rounds = 300;
  const auto input = cohort::testing::random_values<int>(n, 21);
  cohort::device_buffer<int> a(n, s0), b(n, s1);
  a.copy_from_host(input);
  b.fill_bytes(cohort::testing::poison_byte);
  // Each round adds one on each side; an ordering lost anywhere loses or repeats an addition.
  for (int r = 0; r < rounds; ++r) {
    if (r == rounds / 2) { // events the buffers made travel with them
      cohort::device_buffer<int> moved(std::move(a));
      a = std::move(moved);
    }
    a.copy_to(b);
    cohort::testing::launch_add_one(s1, b.data(), b.data(), n);
    b.copy_to(a);
    cohort::testing::launch_add_one(s0, a.data(), a.data(), n);
  }
  std::vector<int> out(n, -1);
  a.copy_to_host(out);
  s0.synchronize();
  for (std::size_t i = 0; i < n; ++i)
    if (out[i] != input[i] + 2 * rounds)
      FAIL("element " << i << " is " << out[i] << ", expected " << input[i] + 2 * rounds);
}

// Each copy runs while the other buffer's stream is held busy (see copy_while_held): checked after
// full synchronizations instead, a copy ordered after both streams passed too.
TEST_CASE("copy_to on a given stream copies on that stream alone") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int last = cohort::device_count() - 1;
  cohort::stream s0(cohort::device_ref{0}), s1(cohort::device_ref{last});
  for (std::size_t n : sizes) {
    CAPTURE(n);
    const auto input = cohort::testing::random_values<float>(n, 5);
    cohort::device_buffer<float> a(n, s0), b(n, s1), c(n, s1);
    a.copy_from_host(input);
    b.fill_bytes(cohort::testing::poison_byte);
    c.fill_bytes(cohort::testing::poison_byte);
    s0.synchronize();
    s1.synchronize();
    copy_while_held(a, b, s0, s1, input); // on the source's stream, the target's held
    copy_while_held(a, c, s1, s0, input); // on the target's stream, the source's held
  }
}

TEST_CASE("copy_to refuses a stream on neither buffer's device, before any copy") {
  COHORT_SKIP_UNLESS_GPUS(2);
  cohort::stream s0(cohort::device_ref{0}), s1(cohort::device_ref{1});
  cohort::device_buffer<int> a(64, s0), b(64, s0);
  b.fill_bytes(cohort::testing::poison_byte);
  try {
    a.copy_to(b, s1);
    FAIL("a stream of device 1 was taken for a copy within device 0");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("device_buffer::copy_to") != std::string::npos);
    CHECK(what.find("stream") != std::string::npos);
    CHECK(what.find("device 1") != std::string::npos);
  }
  std::vector<int> out(64);
  b.copy_to_host(out);
  s0.synchronize();
  CHECK(std::count(out.begin(), out.end(), cohort::testing::poison_value<int>()) == 64);
}

TEST_CASE("moves transfer ownership and the buffer frees under its own device") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const int last = cohort::device_count() - 1;
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, last) == cudaSuccess);
  // The bytes of `last`'s pool held by live allocations, once `s`'s frees have run.
  auto in_use = [&](cohort::stream_ref s) {
    s.synchronize();
    std::uint64_t used = 0;
    REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
    return used;
  };
  cohort::stream s(cohort::device_ref{last});
  const std::uint64_t at_start = in_use(s);
  cohort::device_buffer<float> a(1000, s);
  float* p = a.data();
  cohort::device_buffer<float> b(std::move(a));
  CHECK(a.data() == nullptr);
  CHECK(a.size() == 0);
  CHECK(b.data() == p);
  cohort::device_buffer<float> c(10, s);
  c = std::move(b); // frees c's 10 floats, takes a's 1000
  CHECK(c.data() == p);
  CHECK(c.size() == 1000);
  CHECK(b.data() == nullptr);
  const std::uint64_t holding = in_use(s);
  CHECK(holding >= at_start + 1000 * sizeof(float)); // one allocation lives, in `last`'s pool
  {
    cohort::scoped_device zero(cohort::device_ref{0});
    { cohort::device_buffer<float> gone(std::move(c)); } // freed while device 0 is current
    int now = -1;
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == 0);
  }
  // Freed exactly once, into its own device's pool: the moved-from buffers freed nothing.
  CHECK(in_use(s) == at_start);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an allocation larger than the device names the bytes asked and free [serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  cohort::stream s(cohort::device_ref{0});
  const std::size_t total = cohort::properties(cohort::device_ref{0}).total_memory;
  try {
    cohort::device_buffer<char> huge(2 * total, s);
    FAIL("allocating twice the device's memory did not throw");
  } catch (const cohort::cuda_error& e) {
    CHECK(e.status() == cudaErrorMemoryAllocation);
    CHECK(e.device() == 0);
    const std::string text = e.what();
    CHECK(text.find("Asked for " + std::to_string(2 * total) + " bytes") != std::string::npos);
    CHECK(text.find("bytes are free on the device") != std::string::npos);
  }
  // The failure leaves the device usable.
  cohort::device_buffer<int> fine(16, s);
  s.synchronize();
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_THROWS_WITH_AS(cohort::device_buffer<double>(~std::size_t{0} / 4, s),
                       doctest::Contains("overflow the address space"), std::invalid_argument);
}

TEST_CASE("after enable_peer_access a kernel reads and writes a buffer on the other GPU") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const cohort::device_ref a{0}, b{1};
  if (cohort::link_between(b, a).kind != cohort::link_kind::peer) {
    cohort::testing::skip("GPUs 0 and 1 have no peer path");
    return;
  }
  cohort::enable_peer_access(b, a);
  cohort::stream sa(a), sb(b);
  const std::size_t n = 100003;
  const auto input = cohort::testing::random_values<int>(n, 8);
  cohort::device_buffer<int> on_a(n, sa), out_a(n, sa); // stream-ordered pool memory on GPU 0
  on_a.copy_from_host(input);
  out_a.fill_bytes(cohort::testing::poison_byte);
  sa.synchronize();
  // A kernel on GPU 1 reads GPU 0's buffer and writes GPU 0's other buffer.
  cohort::testing::launch_add_one(sb, on_a.data(), out_a.data(), n);
  sb.synchronize();
  std::vector<int> out(n);
  out_a.copy_to_host(out);
  sa.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += out[i] != input[i] + 1;
  CHECK(wrong == 0);
}
