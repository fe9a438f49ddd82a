// Must not compile: an in-place scan of a const buffer. The scan writes its data; a const buffer
// (or a view of const elements) is read only, and the refusal must say so by name rather than fail
// deep inside CUB.
#include <cohort/cohort.cuh>

#include <cuda/std/functional>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  const cohort::distributed_buffer<float> x(group, 16);
  cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<>{});
}
