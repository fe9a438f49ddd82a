// PyTorch extensions compile with half's and bfloat16's implicit conversions and half's operators
// switched off (torch.utils.cpp_extension's flags; bfloat16's operators too, for good measure):
// the peer-to-peer engine's half and bfloat16 reductions (in their own type, in float, averaged)
// build there too: cohort's operators use no + or < on __half.
#define __CUDA_NO_HALF_CONVERSIONS__
#define __CUDA_NO_BFLOAT16_CONVERSIONS__
#define __CUDA_NO_HALF_OPERATORS__
#define __CUDA_NO_HALF2_OPERATORS__
#define __CUDA_NO_BFLOAT16_OPERATORS__
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

// A user operator on these types, and on their pairs, takes the type itself and float (both forms
// are compiled; accumulate_in_float picks at run time): a functor with both overloads, or a
// generic lambda. Before, the pair types also compiled a lane-by-lane form that called a user
// operator with a lone __half, so neither built.
struct half_max {
  __device__ __half operator()(__half a, __half b) const { return __hmax(a, b); }
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct half2_max {
  __device__ __half2 operator()(__half2 a, __half2 b) const { return __hmax2(a, b); }
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

void reduce_with_user_operators(cohort::p2p_clique& peers, cohort::distributed_buffer<__half>& h,
                                cohort::distributed_buffer<__half2>& h2,
                                cohort::distributed_buffer<__nv_bfloat162>& b2) {
  cohort::all_reduce(peers, h, half_max{});
  cohort::all_reduce(peers, h2, half2_max{});
  cohort::all_reduce(peers, h2, half2_max{}, {.accumulate_in_float = true});
  cohort::all_reduce(peers, b2, [] __device__(auto a, auto b) { return a + b; });
}

// cohort's operators on the pair types run lane by lane; the pair-type form was compiled as well
// (never run), and there sum, prod, min and max on __nv_bfloat162 used the pair's +, * and <,
// which __CUDA_NO_BFLOAT16_OPERATORS__ compiles out.
template <class Pair>
void pairs_with_cohort_operators(cohort::p2p_clique& peers, cohort::distributed_buffer<Pair>& x) {
  cohort::all_reduce(peers, x, cohort::sum);
  cohort::all_reduce(peers, x, cohort::prod);
  cohort::all_reduce(peers, x, cohort::min);
  cohort::all_reduce(peers, x, cohort::max);
  cohort::all_reduce(peers, x, cohort::avg);
  cohort::all_reduce(peers, x, cohort::prod, {.accumulate_in_float = true});
}
template void pairs_with_cohort_operators<__half2>(cohort::p2p_clique&,
                                                   cohort::distributed_buffer<__half2>&);
template void
pairs_with_cohort_operators<__nv_bfloat162>(cohort::p2p_clique&,
                                            cohort::distributed_buffer<__nv_bfloat162>&);

// multi_device_reduce and the scans convert elements through CUDA's intrinsics as the p2p engine
// does: a float reduction of half (init 0.0f) used static_cast<float>(__half), which these flags
// compile out.
void reduce_half_in_float(const cohort::device_group& group, cohort::distributed_buffer<__half>& h,
                          cohort::distributed_buffer<__nv_bfloat16>& b,
                          cohort::device_result<float>& result) {
  (void)cohort::multi_device_reduce(group, h, 0.0f, cohort::sum);
  (void)cohort::multi_device_reduce(group, b, 0.0, cohort::max);
  cohort::multi_device_reduce(group, h, 0.0f, cohort::sum, result);
}

// The scans of half into float: the elements (or the transform's results) become float through
// the intrinsics before CUB sees them, so the float operator never takes a half.
struct float_plus {
  __host__ __device__ float operator()(float a, float b) const { return a + b; }
};
struct twice_as_float {
  __device__ float operator()(__half v) const { return 2.0f * __half2float(v); }
};
void scan_half_into_float(const cohort::device_group& group,
                          const cohort::distributed_buffer<__half>& h,
                          cohort::distributed_buffer<float>& f) {
  cohort::multi_device_inclusive_scan(group, h, f, float_plus{});
  cohort::multi_device_exclusive_scan(group, h, f, 0.0f, float_plus{}, twice_as_float{});
}

#if defined(COHORT_HAS_FP8)
// fp8 with cohort's operators, on the p2p engine and in multi_device_reduce: through float, as
// NCCL's fp8 reductions are (fp8 has no + or <).
template <class F8>
void fp8_every_way(cohort::p2p_clique& peers, const cohort::device_group& group,
                   cohort::distributed_buffer<F8>& x) {
  cohort::all_reduce(peers, x, cohort::sum);
  cohort::all_reduce(peers, x, cohort::prod);
  cohort::all_reduce(peers, x, cohort::min);
  cohort::all_reduce(peers, x, cohort::max);
  cohort::all_reduce(peers, x, cohort::avg);
  cohort::all_reduce(peers, x, cohort::sum, {.accumulate_in_float = true});
  (void)cohort::multi_device_reduce(group, x, F8{}, cohort::max);
  (void)cohort::multi_device_reduce(group, x, 0.0f, cohort::sum);
}
template void fp8_every_way<__nv_fp8_e4m3>(cohort::p2p_clique&, const cohort::device_group&,
                                           cohort::distributed_buffer<__nv_fp8_e4m3>&);
template void fp8_every_way<__nv_fp8_e5m2>(cohort::p2p_clique&, const cohort::device_group&,
                                           cohort::distributed_buffer<__nv_fp8_e5m2>&);
#endif
