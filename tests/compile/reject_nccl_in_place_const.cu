// Must not compile: an in-place NCCL all_reduce of a span of const elements. It writes them; the
// error would be "no instance of overloaded function" inside collectives.cuh.
#include <cohort/cohort.cuh>

int main() {
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 1);
  cohort::nccl_clique clique(group);
  cohort::distributed_buffer<float> x(group, 16);
  const cuda::std::span<const float> data = x.shard(0).data;
  cohort::all_reduce(clique.rank(0), clique.stream(0), data, cohort::sum);
}
