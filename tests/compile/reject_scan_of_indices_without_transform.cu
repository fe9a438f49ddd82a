// Must not compile: a scan over an index range without a transform. An index range has no
// elements; the scan is of transform(i), and without one the refusal must say so by name.
#include <cohort/cohort.cuh>

#include <cuda/std/functional>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::distributed_buffer<unsigned long long> out(group, 16);
  cohort::multi_device_inclusive_scan(group, cohort::indices(16), out, cuda::std::plus<>{});
}
