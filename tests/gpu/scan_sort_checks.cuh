// What the scan and sort tests share: reading a distributed buffer back, and comparing arrays bit
// for bit (so that a signed zero or a NaN in the wrong place shows).
#pragma once

#include "testing.cuh"

#include <cstddef>
#include <cstring>
#include <vector>

namespace cohort::testing {

template <class T>
std::vector<T> read_back(const device_group& group, const distributed_buffer<T>& x) {
  std::vector<T> out(x.size());
  x.copy_to_host(out);
  group.synchronize();
  return out;
}

// The first index where two arrays differ bit for bit, or their common size when none does.
template <class T>
std::size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && std::memcmp(&a[i], &b[i], sizeof(T)) == 0)
    ++i;
  return i;
}

} // namespace cohort::testing
