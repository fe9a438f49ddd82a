// PyTorch extensions compile with half's and bfloat16's implicit conversions switched off: the
// peer-to-peer engine's half and bfloat16 reductions (in their own type, in float, averaged) build
// there too.
#define __CUDA_NO_HALF_CONVERSIONS__
#define __CUDA_NO_BFLOAT16_CONVERSIONS__
#include <cohort/cohort.cuh>

template <class T>
void reduce_every_way(cohort::p2p_clique& peers, cohort::distributed_buffer<T>& x,
                      cohort::distributed_buffer<T>& all) {
  cohort::all_reduce(peers, x, cohort::sum);
  cohort::all_reduce(peers, x, cohort::avg, {.accumulate_in_float = true});
  cohort::all_reduce(peers, std::as_const(x), all, cohort::max,
                     {.algorithm = cohort::p2p_algorithm::two_shot});
  cohort::reduce(peers, std::as_const(x), x, cohort::sum, 0);
  cohort::reduce_scatter(peers, std::as_const(all), x, cohort::sum);
}

template void reduce_every_way<__half>(cohort::p2p_clique&, cohort::distributed_buffer<__half>&,
                                       cohort::distributed_buffer<__half>&);
template void reduce_every_way<__nv_bfloat16>(cohort::p2p_clique&,
                                              cohort::distributed_buffer<__nv_bfloat16>&,
                                              cohort::distributed_buffer<__nv_bfloat16>&);
