// Must not compile: capturing over a temporary group. The graph keeps the group's streams, which
// would be destroyed with it before any replay (a const& parameter would otherwise take it).
#include <cohort/cohort.cuh>

int main() {
  auto graph =
      cohort::group_graph::capture(cohort::device_group::emulated(cohort::device_ref{0}, 2), [] {});
  (void)graph;
}
