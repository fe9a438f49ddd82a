// Built with plain char unsigned (-funsigned-char, and nvcc's front end told the same), as it is
// on aarch64 (Grace): NCCL must reduce plain char as unsigned bytes there. cohort mapped it to
// ncclChar, NCCL's signed ncclInt8, whose min, max and avg are wrong for bytes past 127.
#include <cohort/nccl/traits.cuh>

#include <type_traits>

static_assert(!std::is_signed_v<char>, "this unit must be built with plain char unsigned");
static_assert(cohort::detail::nccl_type_of<char>::type == ncclUint8,
              "plain char, unsigned here, must reach NCCL as ncclUint8");
static_assert(cohort::detail::nccl_type_of<signed char>::type == ncclInt8);
static_assert(cohort::detail::nccl_type_of<unsigned char>::type == ncclUint8);
