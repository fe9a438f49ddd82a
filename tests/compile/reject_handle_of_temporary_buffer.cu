// Must not compile: a p2p_handle of a temporary buffer. The handle outlives the expression, and
// the buffer's memory is freed before the kernel that uses the handle runs (a const& overload
// would otherwise take it).
#include <cohort/cohort.cuh>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::p2p_clique peers(group);
  auto h = cohort::p2p_handle_for(
      peers, cohort::distributed_buffer<float>(group, cohort::partition::replicated(16, 2)), 0);
  (void)h;
}
