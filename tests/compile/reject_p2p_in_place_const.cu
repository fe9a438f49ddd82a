// Must not compile: an in-place p2p all_reduce of spans of const elements. It writes them; the
// error would name a reinterpret_cast deep in the engine's kernels.
#include <cohort/cohort.cuh>

#include <vector>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  cohort::p2p_clique peers(group);
  cohort::distributed_buffer<float> x(group, cohort::partition::replicated(16, 2));
  std::vector<cuda::std::span<const float>> spans{x.shard(0).data, x.shard(1).data};
  cohort::all_reduce(peers, spans, cohort::sum);
}
