// What users write with const objects builds: inputs read through const buffers and groups
// (session 23: a helper's compile matrix). Compiled only; the GPU tests run the same calls.
#include <cohort/cohort.cuh>

#include <type_traits>
#include <utility>

void read_only(const cohort::device_group& group, const cohort::distributed_buffer<float>& x,
               cohort::distributed_buffer<float>& y, cohort::p2p_clique& peers) {
  cohort::multi_device_for_each(group, x, [] __device__(const float&) {});
  cohort::on_each_shard(x, [](cohort::shard<const float>) {});
  cohort::on_each_shard(y, [](cohort::shard<const float>) {}); // a shard converts to const
  (void)cohort::p2p_handle_for(peers, x, 0);
  (void)cohort::group_graph::capture(group, [] {});
  cohort::all_reduce(peers, x, y, cohort::sum);
  // A handle converts to one of const elements (as a span does), never back; and stays a plain
  // kernel argument.
  const cohort::p2p_handle<const float> reads = cohort::p2p_handle_for(peers, y, 0);
  (void)reads;
  static_assert(!std::is_convertible_v<cohort::p2p_handle<const float>, cohort::p2p_handle<float>>);
  static_assert(!std::is_convertible_v<cohort::p2p_handle<float>, cohort::p2p_handle<const int>>);
  static_assert(std::is_trivially_copyable_v<cohort::p2p_handle<const float>>);
}

#if COHORT_WITH_NCCL
float* first_rank_of(const cohort::nccl_clique& clique, const cohort::distributed_buffer<float>& x,
                     cohort::distributed_buffer<float>& y) {
  const cohort::communicator& rank0 = clique.rank(0);
  cohort::all_reduce(rank0, x.shard(0).data, y.shard(0).data, cohort::sum, clique.stream(0));
  return y.shard(0).data.data();
}
#endif
