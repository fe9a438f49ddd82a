// Must not compile: cohort::avg in a reduction over a group. avg is the collectives' mean over
// ranks (avg_t derives from sum_t); a reduction has no ranks to divide by, and would return the
// sum.
#include <cohort/cohort.cuh>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::distributed_buffer<float> x(group, 16);
  (void)cohort::multi_device_reduce(group, x, 0.0f, cohort::avg).wait();
}
