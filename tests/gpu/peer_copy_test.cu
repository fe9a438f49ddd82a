// Copies between two GPUs' stream-ordered memory: copy_to, a reduction's partials and a scan's
// carries work without peer access outside a capture (cudaMemcpyAsync between two devices' pool
// memory fails there: NVIDIA bug 3446335), and a capture without it is refused by name.
#include "scan_sort_checks.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/std/functional>

#include <string>
#include <vector>

namespace {

using cohort::device_ref;
using cohort::testing::first_difference;
using cohort::testing::read_back;

// (Every runtime call with a device current: the test main checks that each case leaves the
// thread's current context as it found it.)
cudaMemAccessFlags pool_access(device_ref from, device_ref to) {
  cohort::scoped_device on(to);
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, to.get()) == cudaSuccess);
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id = from.get();
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  REQUIRE(cudaMemPoolGetAccess(&flags, pool, &location) == cudaSuccess);
  return flags;
}

void set_pool_access(device_ref from, device_ref to, cudaMemAccessFlags flags) {
  cohort::scoped_device on(to);
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, to.get()) == cudaSuccess);
  cudaMemAccessDesc access{};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = from.get();
  access.flags = flags;
  REQUIRE(cudaMemPoolSetAccess(pool, &access, 1) == cudaSuccess);
}

// Waits for everything on GPUs 0 and 1.
bool both_idle() {
  bool idle = true;
  for (int d = 0; d < 2; ++d) {
    cohort::scoped_device on(device_ref{d});
    idle = cudaDeviceSynchronize() == cudaSuccess && idle;
  }
  return idle;
}

// GPUs 0 and 1 lose access to each other's memory pool for a scope (an earlier case, or a clique,
// may have granted it: the process keeps it), and get back what they had.
class pools_apart {
 public:
  pools_apart()
      : was_{pool_access(a_, b_), pool_access(b_, a_)} {
    REQUIRE(both_idle()); // nothing of an earlier case still reads across
    set_pool_access(a_, b_, cudaMemAccessFlagsProtNone);
    set_pool_access(b_, a_, cudaMemAccessFlagsProtNone);
  }
  ~pools_apart() {
    try {
      (void)both_idle();
      for (int i = 0; i < 2; ++i) {
        const device_ref from = i == 0 ? a_ : b_, to = i == 0 ? b_ : a_;
        cohort::scoped_device on(to);
        cudaMemPool_t pool = nullptr;
        cudaMemAccessDesc access{};
        access.location.type = cudaMemLocationTypeDevice;
        access.location.id = from.get();
        access.flags = was_[i];
        if (cudaDeviceGetMemPool(&pool, to.get()) == cudaSuccess)
          (void)cudaMemPoolSetAccess(pool, &access, 1);
      }
    } catch (...) {
    }
  }
  pools_apart(const pools_apart&) = delete;
  pools_apart& operator=(const pools_apart&) = delete;

 private:
  device_ref a_{0}, b_{1};
  cudaMemAccessFlags was_[2];
};

std::vector<long long> host_inclusive_sum(const std::vector<long long>& in) {
  std::vector<long long> out(in.size());
  long long sum = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    out[i] = sum += in[i];
  return out;
}

long long host_sum(const std::vector<long long>& in) {
  long long sum = 0;
  for (long long v : in)
    sum += v;
  return sum;
}

// `b` and `c`, read back, hold `input` bit for bit.
void check_copies(const cohort::device_group& group, const cohort::device_buffer<long long>& b,
                  const cohort::device_buffer<long long>& c, const std::vector<long long>& input) {
  std::vector<long long> from_b(input.size()), from_c(input.size());
  b.copy_to_host(from_b);
  c.copy_to_host(from_c);
  group.synchronize();
  CHECK(first_difference(from_b, input) == input.size());
  CHECK(first_difference(from_c, input) == input.size());
}

} // namespace

TEST_CASE("copies between two GPUs' buffers, partials and carries need no peer access") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const pools_apart apart;
  REQUIRE(pool_access(device_ref{0}, device_ref{1}) == cudaMemAccessFlagsProtNone);
  REQUIRE(pool_access(device_ref{1}, device_ref{0}) == cudaMemAccessFlagsProtNone);
  cohort::device_group group({device_ref{0}, device_ref{1}});
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{1009}, std::size_t{1} << 20}) {
    CAPTURE(n);
    const auto input = cohort::testing::random_values<long long>(n, 5 + unsigned(n % 1000));
    // copy_to, both forms, one each way.
    cohort::device_buffer<long long> a(n, group.stream(0)), b(n, group.stream(1)),
        c(n, group.stream(0));
    a.copy_from_host(input);
    b.fill_bytes(cohort::testing::poison_byte);
    c.fill_bytes(cohort::testing::poison_byte);
    a.copy_to(b);                  // device 0 to 1, on a's stream, ordered with b's
    group.synchronize();           // c's poison is written before the copy below
    b.copy_to(c, group.stream(1)); // device 1 to 0, on the source's stream
    group.synchronize();           // c is read back on its own stream
    check_copies(group, b, c, input);

    // A reduction (member 1's partial goes to member 0) and a scan (member 0's carry to 1).
    cohort::distributed_buffer<long long> x(group, n), y(group, n);
    x.copy_from_host(input);
    const cuda::std::plus<long long> plus;
    CHECK(cohort::multi_device_reduce(group, x, 7LL, plus).wait() == 7 + host_sum(input));
    cohort::device_result<long long> total(group);
    cohort::multi_device_reduce(group, x, -3LL, plus, total);
    CHECK(total.get() == -3 + host_sum(input));
    y.fill_bytes(cohort::testing::poison_byte);
    cohort::multi_device_inclusive_scan(group, x, y, plus);
    CHECK(first_difference(read_back(group, y), host_inclusive_sum(input)) == n);
  }
}

TEST_CASE("a copy between two GPUs captured without peer access is refused by name, and with "
          "it the graph replays right") {
  COHORT_SKIP_UNLESS_GPUS(2);
  const pools_apart apart;
  cohort::device_group group({device_ref{0}, device_ref{1}});
  const std::size_t n = 4099;
  const auto input = cohort::testing::random_values<long long>(n, 11);
  cohort::device_buffer<long long> a(n, group.stream(0)), b(n, group.stream(1));
  cohort::distributed_buffer<long long> x(group, n), y(group, n);
  a.copy_from_host(input);
  x.copy_from_host(input);
  cohort::device_result<long long> total(group);
  const cuda::std::plus<long long> plus;
  auto refused = [&](auto&& work) {
    return cohort::testing::logic_error_message(
        [&] { (void)cohort::group_graph::capture(group, work); });
  };
  const std::string copy = refused([&] { a.copy_to(b, group.stream(0)); });
  const std::string on_target = refused([&] { a.copy_to(b, group.stream(1)); });
  const std::string ordered = refused([&] { a.copy_to(b); });
  const std::string reduce =
      refused([&] { cohort::multi_device_reduce(group, x, 0LL, plus, total); });
  const std::string scan = refused([&] { cohort::multi_device_inclusive_scan(group, x, y, plus); });
  CAPTURE(copy);
  CAPTURE(on_target);
  CAPTURE(ordered);
  CAPTURE(reduce);
  CAPTURE(scan);
  CHECK(copy.find("device_buffer::copy_to") != std::string::npos);
  CHECK(copy.find("enable_peer_access") != std::string::npos);
  CHECK(on_target.find("between device 1 and device 0") != std::string::npos);
  CHECK(ordered.find("device_buffer::copy_to") != std::string::npos);
  CHECK(reduce.find("multi_device_reduce") != std::string::npos);
  CHECK(reduce.find("member 1") != std::string::npos);
  CHECK(scan.find("multi_device_inclusive_scan") != std::string::npos);
  CHECK(scan.find("member 0") != std::string::npos);

  // With access granted before the capture, the same work captures and replays.
  if (!group.enable_peer_access()) {
    MESSAGE("GPUs 0 and 1 have no peer path: only the refusals were checked");
    return;
  }
  cohort::device_buffer<long long> c(n, group.stream(1));
  b.fill_bytes(cohort::testing::poison_byte);
  c.fill_bytes(cohort::testing::poison_byte);
  y.fill_bytes(cohort::testing::poison_byte);
  group.synchronize();
  {
    auto graph = cohort::group_graph::capture(group, [&] {
      a.copy_to(b);
      a.copy_to(c, group.stream(1)); // on the target's device
      cohort::multi_device_reduce(group, x, 5LL, plus, total);
      cohort::multi_device_inclusive_scan(group, x, y, plus);
    });
    graph.launch();
    graph.launch();
    group.synchronize();
  }
  check_copies(group, b, c, input);
  CHECK(total.get() == 5 + host_sum(input));
  CHECK(first_difference(read_back(group, y), host_inclusive_sum(input)) == n);
}
