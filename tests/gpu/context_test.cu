// Current contexts: cohort's calls leave the thread's current context as they found it, create no
// context on a GPU they do not use, and keep a caller's own (non-primary) context.
//
// Its own program: whether GPU 0's primary context was ever created is a property of the whole
// process, so it is checked in a process that has done nothing else (ctest runs each case in a
// process of its own).
#include "testing.cuh"

#include <doctest/doctest.h>

#include <cuda/std/functional>

#include <algorithm>
#include <vector>

namespace {

struct driver {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) primary_state = nullptr;
  decltype(&::cuCtxCreate) create = nullptr;
  decltype(&::cuCtxDestroy) destroy = nullptr;

  driver() {
    using cohort::detail::driver_entry_point;
    device_get = reinterpret_cast<decltype(device_get)>(driver_entry_point("cuDeviceGet"));
    primary_state =
        reinterpret_cast<decltype(primary_state)>(driver_entry_point("cuDevicePrimaryCtxGetState"));
    create = reinterpret_cast<decltype(create)>(driver_entry_point("cuCtxCreate"));
    destroy = reinterpret_cast<decltype(destroy)>(driver_entry_point("cuCtxDestroy"));
  }
};

// Whether `ordinal`'s primary context is active (created and not released).
bool primary_active(const driver& api, int ordinal) {
  CUdevice device = 0;
  REQUIRE(api.device_get(&device, ordinal) == CUDA_SUCCESS);
  unsigned flags = 0;
  int active = -1;
  REQUIRE(api.primary_state(device, &flags, &active) == CUDA_SUCCESS);
  return active != 0;
}

struct add_index {
  int* x;
  __device__ void operator()(std::size_t i) const { x[i] += static_cast<int>(i); }
};

// Allocation, a kernel, a pending reduction, a device-result reduction, copies and sorts, all on
// `group`.
void work_on(const cohort::device_group& group) {
  const std::size_t n = 4099;
  cohort::distributed_buffer<int> x(group, n);
  x.fill_bytes(0);
  int* p = x.shard(0).data.data();
  cohort::multi_device_for_each(group, cohort::indices(x.shard(0).data.size()), add_index{p});
  const long long sum = cohort::multi_device_reduce(group, x, 0LL, cuda::std::plus<>{}).wait();
  cohort::device_result<long long> on_device(group);
  cohort::multi_device_reduce(group, x, 0LL, cuda::std::plus<>{}, on_device);
  CHECK(on_device.get() == sum);
  const long long m = static_cast<long long>(x.shard(0).data.size()); // indices 0..m-1 summed
  CHECK(sum == m * (m - 1) / 2);
  // Sorts on the devices and staged through host memory in runs: their last calls (the readers'
  // guard, the staging's release) ran with no device current, which makes GPU 0's context.
  std::vector<unsigned> keys = cohort::testing::random_values<unsigned>(n, 17);
  std::vector<unsigned> expected = keys;
  std::sort(expected.begin(), expected.end());
  for (const bool staged : {false, true}) {
    CAPTURE(staged);
    const cohort::detail::sort_tuning saved = cohort::detail::sort_tuning_for_tests;
    cohort::detail::sort_tuning_for_tests = {staged ? cohort::detail::sort_staging::through_host
                                                    : cohort::detail::sort_staging::on_devices,
                                             staged ? std::size_t{500} : 0};
    cohort::distributed_buffer<unsigned> k(group, n);
    k.copy_from_host(keys);
    try {
      cohort::multi_device_sort(group, k);
    } catch (...) {
      cohort::detail::sort_tuning_for_tests = saved;
      throw;
    }
    cohort::detail::sort_tuning_for_tests = saved;
    std::vector<unsigned> out(n);
    k.copy_to_host(out);
    group.synchronize();
    CHECK(out == expected);
  }
  group.synchronize();
}

} // namespace

TEST_CASE("work on GPU 1 alone creates no context on GPU 0") {
  // Needs GPU 0 to stay untouched while GPU 1 works.
  COHORT_SKIP_UNLESS_GPUS(2);
  const driver api;
  const bool found = api.device_get != nullptr && api.primary_state != nullptr;
  REQUIRE_MESSAGE(found, "the driver lacks cuDeviceGet or cuDevicePrimaryCtxGetState");
  REQUIRE_MESSAGE(!primary_active(api, 0),
                  "GPU 0's primary context was active before the case: run it in a fresh process");
  {
    cohort::device_group group{cohort::device_ref{1}};
    work_on(group);
#if COHORT_WITH_NCCL
    // An NCCL clique of one rank, and a collective: NCCL's group end sets back the device it
    // found current, which with none current made GPU 0's context.
    {
      cohort::nccl_clique nccl(group);
      const std::vector<int> ones(257, 1);
      cohort::distributed_buffer<int> x(group, ones.size());
      x.copy_from_host(ones);
      cohort::all_reduce(nccl, x, cohort::sum);
      std::vector<int> back(ones.size());
      x.copy_to_host(back);
      group.synchronize();
      CHECK(back == ones);
    }
#endif
    CHECK(primary_active(api, 1));
  }
  // A scope around GPU 1 restores "no context current", not GPU 0.
  { cohort::scoped_device on(cohort::device_ref{1}); }
  CHECK(cohort::detail::current_context() == nullptr);
  CHECK_MESSAGE(!primary_active(api, 0),
                "cohort created GPU 0's primary context while working on GPU 1 only");
}

TEST_CASE("cohort's calls keep a caller's own non-primary context current") {
  COHORT_SKIP_UNLESS_GPUS(1);
  const driver api;
  const bool found = api.device_get != nullptr && api.create != nullptr && api.destroy != nullptr;
  REQUIRE_MESSAGE(found, "the driver lacks cuDeviceGet, cuCtxCreate or cuCtxDestroy");
  CUdevice device = 0;
  REQUIRE(api.device_get(&device, 0) == CUDA_SUCCESS);
  CUcontext mine = nullptr;
  CUctxCreateParams params{}; // no affinity, no graphics interop
  REQUIRE(api.create(&mine, &params, 0, device) == CUDA_SUCCESS); // made current
  REQUIRE(cohort::detail::current_context() == mine);
  {
    cohort::device_group group{cohort::device_ref{0}};
    work_on(group);
    CHECK(cohort::detail::current_context() == mine);
    auto pair = cohort::device_group::emulated(cohort::device_ref{0}, 2);
    work_on(pair);
    CHECK(cohort::detail::current_context() == mine);
  }
  CHECK(cohort::detail::current_context() == mine);
  REQUIRE(api.destroy(mine) == CUDA_SUCCESS); // pops it: what was current before comes back
}
