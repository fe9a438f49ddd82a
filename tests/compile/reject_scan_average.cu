// Must not compile: cohort::avg as a scan's operator. avg is the collectives' mean over ranks
// (avg_t derives from sum_t); a scan has no ranks to divide by, and would return running sums.
#include <cohort/cohort.cuh>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::distributed_buffer<float> x(group, 16);
  cohort::multi_device_inclusive_scan(group, x, cohort::avg);
}
