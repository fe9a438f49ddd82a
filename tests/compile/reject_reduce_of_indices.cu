// Must not compile: multi_device_reduce over an index range, which has no elements to reduce; its
// message says to use multi_device_transform_reduce, whose transform gives each index's value.
#include <cohort/cohort.cuh>

#include <cuda/std/functional>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  (void)cohort::multi_device_reduce(group, cohort::indices(16), 0L, cuda::std::plus<long>{});
}
