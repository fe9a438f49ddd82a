// cohort/nccl/traits.cuh — which element types and operators NCCL can reduce, known
// at compile time.
//
// NCCL reduces its built-in types (integers, half, bfloat16, float, double, and from NCCL 2.24
// the fp8 types) with sum, prod, min, max and avg. Anything else is rejected when the call is
// compiled, with a message that says why and where to go instead:
//
//   cohort::all_reduce(comm, stream, data, cohort::sum);          // ncclSum
//   cohort::all_reduce(comm, stream, data, cuda::std::plus<>{});  // the same
//   cohort::all_reduce(comm, stream, data, my_op{});              // does not compile
#pragma once

#include <cuda/functional>
#include <cuda/std/functional>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>

#include "../communication/operators.cuh" // and, through it, cuda_fp8.h where CUDA has it

#include <cstdint>
#include <type_traits>

namespace cohort {

namespace detail {

template <class T>
struct nccl_type_of {
  static constexpr bool known = false;
};
#define COHORT_NCCL_TYPE(T, value)                                                                 \
  template <>                                                                                      \
  struct nccl_type_of<T> {                                                                         \
    static constexpr bool known = true;                                                            \
    static constexpr ncclDataType_t type = value;                                                  \
  }
COHORT_NCCL_TYPE(std::int8_t, ncclInt8);
// Plain char is signed on x86-64 and unsigned on aarch64 (and under -funsigned-char): NCCL's
// ncclChar is its signed ncclInt8, whose min, max and avg are wrong for unsigned bytes.
COHORT_NCCL_TYPE(char, std::is_signed_v<char> ? ncclInt8 : ncclUint8);
COHORT_NCCL_TYPE(std::uint8_t, ncclUint8);
COHORT_NCCL_TYPE(std::int32_t, ncclInt32);
COHORT_NCCL_TYPE(std::uint32_t, ncclUint32);
COHORT_NCCL_TYPE(long, ncclInt64);
COHORT_NCCL_TYPE(long long, ncclInt64);
COHORT_NCCL_TYPE(unsigned long, ncclUint64);
COHORT_NCCL_TYPE(unsigned long long, ncclUint64);
COHORT_NCCL_TYPE(__half, ncclFloat16);
COHORT_NCCL_TYPE(__nv_bfloat16, ncclBfloat16);
COHORT_NCCL_TYPE(float, ncclFloat32);
COHORT_NCCL_TYPE(double, ncclFloat64);
#if defined(COHORT_HAS_FP8) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
COHORT_NCCL_TYPE(__nv_fp8_e4m3, ncclFloat8e4m3);
COHORT_NCCL_TYPE(__nv_fp8_e5m2, ncclFloat8e5m2);
#endif
#undef COHORT_NCCL_TYPE

template <class Op>
struct nccl_op_of {
  static constexpr bool known = false;
};
#define COHORT_NCCL_OP(Op, value)                                                                  \
  template <>                                                                                      \
  struct nccl_op_of<Op> {                                                                          \
    static constexpr bool known = true;                                                            \
    static constexpr ncclRedOp_t op = value;                                                       \
  }
COHORT_NCCL_OP(sum_t, ncclSum);
COHORT_NCCL_OP(prod_t, ncclProd);
COHORT_NCCL_OP(min_t, ncclMin);
COHORT_NCCL_OP(max_t, ncclMax);
COHORT_NCCL_OP(avg_t, ncclAvg);
COHORT_NCCL_OP(cuda::std::plus<>, ncclSum);
COHORT_NCCL_OP(cuda::std::multiplies<>, ncclProd);
COHORT_NCCL_OP(cuda::minimum<>, ncclMin);
COHORT_NCCL_OP(cuda::maximum<>, ncclMax);
#undef COHORT_NCCL_OP

} // namespace detail

// T can travel through NCCL (any collective).
template <class T>
concept nccl_element = detail::nccl_type_of<std::remove_cv_t<T>>::known;

template <class T>
inline constexpr ncclDataType_t nccl_type_v = detail::nccl_type_of<std::remove_cv_t<T>>::type;

namespace detail {

template <class T>
constexpr void require_nccl_element() {
  static_assert(nccl_element<T>,
                "NCCL cannot carry this element type: it moves only its built-in types (int8, "
                "uint8, int32, uint32, int64, uint64, half, bfloat16, float, double, fp8). "
                "broadcast, all_gather, send and recv move any bitwise copyable type as bytes; "
                "reductions of user-defined types go through cohort's peer-to-peer engine "
                "(cohort::p2p_clique, p2p/collectives.cuh), or multi_device_reduce for a single "
                "value.");
}

template <class T, class Op>
constexpr ncclRedOp_t nccl_op() {
  require_nccl_element<T>();
  static_assert(nccl_op_of<std::remove_cvref_t<Op>>::known,
                "NCCL cannot reduce with this operator: it has only sum, prod, min, max and avg "
                "(cohort::sum, ..., or cuda::std::plus<>, multiplies<>, cuda::minimum<>, "
                "cuda::maximum<>). Other operators go through cohort's peer-to-peer engine "
                "(cohort::p2p_clique, "
                "p2p/collectives.cuh), or multi_device_reduce for a single value.");
  return nccl_op_of<std::remove_cvref_t<Op>>::op;
}

} // namespace detail
} // namespace cohort
