// What the reduce, scan and sort tests share to show an algorithm's steady state: once a first
// call has run, more of the same calls allocate no device memory (neither through the group's
// resource nor from the devices' pools), make no CUDA event, and leave what the group holds as it
// was. (The events are counted by the test build's hook, cohort::detail::events_made_for_tests.)
#pragma once

#include "testing.cuh"

#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

namespace cohort::testing {

// Runs `call` (which enqueues work on the group's streams) once, then `repeats` more times, and
// checks the repeats against what the first left: the devices' current pools never held more
// (their high-water marks, reset after the first call, stay at what was in use then),
// memory_held(k) is unchanged for every member, and no event was made.
template <class Call>
void check_steady_state(const device_group& group, Call call, int repeats = 3) {
  call();
  group.synchronize();
  struct pool_use {
    int device;
    cudaMemPool_t pool;
    unsigned long long used;
  };
  std::vector<pool_use> pools;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const int device = group.device(k).get();
    bool seen = false;
    for (const pool_use& p : pools)
      seen = seen || p.device == device;
    if (seen) continue;
    pool_use p{device, nullptr, 0};
    REQUIRE(cudaDeviceGetMemPool(&p.pool, device) == cudaSuccess);
    REQUIRE(cudaMemPoolGetAttribute(p.pool, cudaMemPoolAttrUsedMemCurrent, &p.used) == cudaSuccess);
    unsigned long long zero = 0; // the high-water mark from now on
    REQUIRE(cudaMemPoolSetAttribute(p.pool, cudaMemPoolAttrUsedMemHigh, &zero) == cudaSuccess);
    pools.push_back(p);
  }
  std::vector<memory_usage> held;
  for (std::size_t k = 0; k < group.size(); ++k)
    held.push_back(group.memory_held(k));
  const std::size_t events = detail::events_made_for_tests.load();

  for (int r = 0; r < repeats; ++r)
    call();
  group.synchronize();

  CHECK(detail::events_made_for_tests.load() == events);
  for (std::size_t k = 0; k < group.size(); ++k) {
    CAPTURE(k);
    CHECK(group.memory_held(k).bytes == held[k].bytes);
    CHECK(group.memory_held(k).peak == held[k].peak);
  }
  for (const pool_use& p : pools) {
    CAPTURE(p.device);
    unsigned long long high = 0, used = 0;
    REQUIRE(cudaMemPoolGetAttribute(p.pool, cudaMemPoolAttrUsedMemHigh, &high) == cudaSuccess);
    REQUIRE(cudaMemPoolGetAttribute(p.pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
    CHECK(high <= p.used);
    CHECK(used == p.used);
  }
}

} // namespace cohort::testing
