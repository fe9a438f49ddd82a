// Must not compile: a sort of a const buffer, which the sort cannot write. cohort's own message
// must say so, by name, rather than an error deep inside the sort.
#include <cohort/cohort.cuh>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  const cohort::distributed_buffer<unsigned> keys(group, 16);
  cohort::multi_device_sort(group, keys);
}
