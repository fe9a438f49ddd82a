// One of two translation units that include cohort: inline functions and template instances
// must merge at link time without duplicate symbols.
#include <cohort/cohort.cuh>

#include <cstddef>

std::size_t unit_a_parts() {
  const cohort::partition p = cohort::partition::even(10, 3);
  if (cohort::device_count() > 0) {
    cohort::stream s(cohort::device_ref{0});
    cohort::device_buffer<float> b(p.count(0), s);
    s.synchronize();
  }
  return p.count(0);
}
