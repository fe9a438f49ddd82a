// Must not compile: a reduction of a value past 4 KiB (each block keeps one per warp in static
// shared memory; 8 KiB made 64 KiB, past the 48 KiB limit, with no message naming it).
#include <cohort/cohort.cuh>

struct wide {
  float v[2048];
};
struct add_wide {
  __host__ __device__ wide operator()(const wide& a, const wide& b) const {
    wide out;
    for (int i = 0; i < 2048; ++i)
      out.v[i] = a.v[i] + b.v[i];
    return out;
  }
};

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::distributed_buffer<wide> x(group, 16);
  cohort::device_result<wide> r(group);
  cohort::multi_device_reduce(group, x, wide{}, add_wide{}, r);
}
