// The other translation unit; see two_units_a.cu.
#include <cohort/cohort.cuh>

#include <cstddef>

std::size_t unit_b_parts() {
  const cohort::partition p = cohort::partition::weighted(10, {1.0, 1.0, 2.0});
  if (cohort::device_count() > 0) {
    cohort::stream s(cohort::device_ref{0});
    cohort::device_buffer<float> b(p.count(2), s);
    s.synchronize();
  }
  return p.count(2);
}
