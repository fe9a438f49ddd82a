// What users write with const objects builds: inputs read through const buffers and groups
// Compiled only; the GPU tests run the same calls.
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

// Views (the user's own memory) go wherever buffers go, a view of const elements as an input.
void through_views(const cohort::distributed_buffer<float>& x, cohort::p2p_clique& peers,
                   cohort::distributed_view<float> v, cohort::distributed_view<const float> in,
                   cohort::distributed_view<float> all) {
  cohort::all_reduce(peers, v, cohort::sum);
  cohort::all_reduce(peers, in, v, cohort::sum);
  cohort::all_reduce(peers, x, v, cohort::sum, {.algorithm = cohort::p2p_algorithm::two_shot});
  cohort::all_gather(peers, in, all);
  cohort::reduce_scatter(peers, all, v, cohort::sum);
  cohort::reduce(peers, in, v, cohort::sum, 0);
  cohort::broadcast(peers, v, 0);
  const cohort::p2p_handle<const float> reads = cohort::p2p_handle_for(peers, in, 0);
  (void)reads;
  cohort::gradient_buckets<float> buckets(peers, {});
  buckets.gather(buckets.add(v), v);
}

#if COHORT_WITH_NCCL
float* first_rank_of(const cohort::nccl_clique& clique, const cohort::distributed_buffer<float>& x,
                     cohort::distributed_buffer<float>& y) {
  const cohort::communicator& rank0 = clique.rank(0);
  cohort::all_reduce(rank0, clique.stream(0), x.shard(0).data, y.shard(0).data, cohort::sum);
  return y.shard(0).data.data();
}

void nccl_through_views(cohort::nccl_clique& nccl, cohort::distributed_view<float> v,
                        cohort::distributed_view<const float> in,
                        cohort::distributed_view<float> all) {
  cohort::all_reduce(nccl, v, cohort::sum);
  cohort::all_reduce(nccl, in, v, cohort::sum);
  cohort::broadcast(nccl, v, 0);
  cohort::reduce(nccl, in, v, cohort::sum, 0);
  cohort::all_gather(nccl, in, all);
  cohort::reduce_scatter(nccl, all, v, cohort::sum);
}
#endif
