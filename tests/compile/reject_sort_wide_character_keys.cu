// Must not compile: a radix sort of wchar_t keys, which CUB's radix sort does not take. cohort's
// own message must say so (before, the check let every arithmetic type through and the build
// failed deep inside CUB).
#include <cohort/cohort.cuh>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::distributed_buffer<wchar_t> keys(group, 16);
  cohort::multi_device_sort(group, keys);
}
