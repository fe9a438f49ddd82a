// cohort/execution/sm_partition.cuh — disjoint shares of one GPU's SMs, each with its own stream,
// through CUDA green contexts. This is what lets an emulated device group stand in for several
// GPUs: each logical device runs only on its own SMs, so an uneven split behaves like unequal
// GPUs, and a kernel that waits for another logical device's kernel cannot starve it of SMs.
//
//   if (cohort::sm_partitioning_available(dev)) {
//     auto shares = cohort::detail::split_sms(dev, {1.0, 3.0}); // about 1/4 and 3/4 of the SMs
//     cohort::stream first = cohort::stream::adopt(dev, shares[0].make_stream());
//     cohort::launch(first, {.grid = g, .block = b}, my_kernel, x); // on the first share only
//   }
//
// The driver functions are fetched at run time through the CUDA runtime
// (cudaGetDriverEntryPointByVersion), so nothing links against libcuda. Needs a driver that
// has green contexts; elsewhere `sm_partitioning_available` says false.
#pragma once

#include "../devices/detail/driver_api.cuh"
#include "../devices/device_ref.cuh"
#include "../devices/scoped_device.cuh"
#include "../partitioning/partition.cuh"
#include "../streams/detail/owner.cuh"

#include <cuda.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {
namespace detail {

struct green_context_api {
  decltype(&::cuDeviceGetDevResource) get_device_resource = nullptr;
  decltype(&::cuDevSmResourceSplitByCount) split_by_count = nullptr;
  decltype(&::cuDevResourceGenerateDesc) generate_descriptor = nullptr;
  decltype(&::cuGreenCtxCreate) create = nullptr;
  decltype(&::cuGreenCtxDestroy) destroy = nullptr;
  decltype(&::cuGreenCtxStreamCreate) create_stream = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
  bool complete = false;

  static const green_context_api& get() {
    static const green_context_api api = load();
    return api;
  }

private:
  template <class F>
  static bool fetch(const char* symbol, F& target) {
    target = reinterpret_cast<F>(driver_entry_point(symbol));
    return target != nullptr;
  }

  static green_context_api load() {
    green_context_api api;
    api.complete = fetch("cuDeviceGetDevResource", api.get_device_resource) &&
                   fetch("cuDevSmResourceSplitByCount", api.split_by_count) &&
                   fetch("cuDevResourceGenerateDesc", api.generate_descriptor) &&
                   fetch("cuGreenCtxCreate", api.create) &&
                   fetch("cuGreenCtxDestroy", api.destroy) &&
                   fetch("cuGreenCtxStreamCreate", api.create_stream) &&
                   fetch("cuGetErrorName", api.error_name);
    return api;
  }
};

// Driver results share their numbers with the runtime's for the errors met here (invalid value,
// out of memory, not supported, ...); the message names the driver's own code as well.
inline void check_driver(CUresult result, std::string_view call, int device) {
  if (result == CUDA_SUCCESS) return;
  const char* name = "CUDA_ERROR_?";
  if (green_context_api::get().error_name != nullptr)
    (void)green_context_api::get().error_name(result, &name);
  throw cuda_error(static_cast<cudaError_t>(result), call, device,
                   std::source_location::current(),
                   std::string("(driver result ") + name + ")");
}

// What an `sm_share` holds, as a view: a green context (a CUgreenCtx), its device and its SMs.
class sm_share_view {
 public:
  sm_share_view() = default;
  sm_share_view(void* context, device_ref device, unsigned sm_count) noexcept
      : handle_(context)
      , device_(device)
      , sm_count_(sm_count) {}

  unsigned sm_count() const noexcept { return sm_count_; }
  device_ref device() const noexcept { return device_; }

  // A new non-blocking stream whose kernels run on this share's SMs only; the caller owns it.
  cudaStream_t make_stream() const {
    CUstream stream = nullptr;
    check_driver(green_context_api::get().create_stream(&stream, static_cast<CUgreenCtx>(handle_),
                                                        CU_STREAM_NON_BLOCKING, 0),
                 "cuGreenCtxStreamCreate", device_.get());
    return reinterpret_cast<cudaStream_t>(stream);
  }

 protected:
  void* handle_ = nullptr; // CUgreenCtx
  device_ref device_{0};
  unsigned sm_count_ = 0;
};

// One share of a GPU's SMs: owns its green context. Move-only; the caller destroys every stream
// made from a share before the share.
class sm_share : public owner<sm_share, sm_share_view> {
 public:
  sm_share() = default;
  // Adopts `context` (a CUgreenCtx) holding `sm_count` SMs of `device`.
  sm_share(void* context, device_ref device, unsigned sm_count) noexcept
      : owner(context, device, sm_count) {}

 private:
  friend class owner<sm_share, sm_share_view>;

  static void destroy_handle(void* context) noexcept {
    (void)green_context_api::get().destroy(static_cast<CUgreenCtx>(context));
  }
};

// Splits `device`'s SMs into one contiguous share per weight, in proportion to the weights (in
// whole groups of the hardware's smallest partition). Throws where the GPU cannot be split that
// finely or green contexts are unavailable. `argument` names the caller's argument that asked for
// the shares ('n' for a count, 'sm_weights' for weights) in its errors.
inline std::vector<sm_share> split_sms(device_ref device, const std::vector<double>& weights,
                                       std::string_view argument = "n") {
  const std::string where = "device_group::emulated";
  require_valid_device(device, where, "device");
  const green_context_api& api = green_context_api::get();
  if (!api.complete)
    throw cuda_error(cudaErrorNotSupported, "cudaGetDriverEntryPointByVersion(cuGreenCtxCreate)",
                     device.get(), std::source_location::current(),
                     "The driver has no green contexts; SMs cannot be split between logical "
                     "devices.");
  {
    scoped_device on(device); // green contexts want the primary context alive
    check_cuda(cudaFree(nullptr), "cudaFree(nullptr) (primary context)", device.get());
  }
  CUdevResource all{};
  check_driver(api.get_device_resource(device.get(), &all, CU_DEV_RESOURCE_TYPE_SM),
               "cuDeviceGetDevResource", device.get());
  // Groups of the smallest size the hardware allows once co-scheduling (clusters) is ignored.
  const unsigned flags = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING;
  unsigned group_count = 0;
  check_driver(api.split_by_count(nullptr, &group_count, &all, nullptr, flags, 1),
               "cuDevSmResourceSplitByCount", device.get());
  std::vector<CUdevResource> groups(group_count);
  CUdevResource remaining{};
  check_driver(api.split_by_count(groups.data(), &group_count, &all, &remaining, flags, 1),
               "cuDevSmResourceSplitByCount", device.get());
  groups.resize(group_count);
  if (group_count < weights.size())
    throw_invalid_argument(where, argument,
                           std::to_string(weights.size()) + " logical devices, but device " +
                               std::to_string(device.get()) + "'s SMs split into only " +
                               std::to_string(group_count) + " groups.");
  // Every share gets at least one group; the rest follow the weights.
  const partition extra = partition::weighted(group_count - weights.size(), weights);
  std::vector<sm_share> shares;
  shares.reserve(weights.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const std::size_t take = 1 + extra.count(i);
    unsigned sms = 0;
    for (std::size_t g = next; g < next + take; ++g)
      sms += groups[g].sm.smCount;
    CUdevResourceDesc descriptor = nullptr;
    check_driver(api.generate_descriptor(&descriptor, groups.data() + next,
                                         static_cast<unsigned>(take)),
                 "cuDevResourceGenerateDesc", device.get());
    CUgreenCtx context = nullptr;
    check_driver(api.create(&context, descriptor, device.get(), CU_GREEN_CTX_DEFAULT_STREAM),
                 "cuGreenCtxCreate", device.get());
    shares.emplace_back(context, device, sms);
    next += take;
  }
  return shares;
}

// Whether COHORT_NO_SM_PARTITIONING=1 is in the environment (see sm_partitioning_available).
inline bool sm_partitioning_switched_off() {
  const char* off = std::getenv("COHORT_NO_SM_PARTITIONING");
  return off != nullptr && std::string_view(off) == "1";
}

} // namespace detail

// Whether `device`'s SMs can be split between logical devices (a driver that has green
// contexts). COHORT_NO_SM_PARTITIONING=1 in the environment says false: emulated groups then
// share the whole GPU on plain streams (weighted ones too), for tools that cannot follow green
// contexts (compute-sanitizer's initcheck in CUDA 13.0 crashes the program on their first launch).
inline bool sm_partitioning_available(device_ref device) {
  if (device.get() < 0 || device.get() >= device_count()) return false;
  if (detail::sm_partitioning_switched_off()) return false;
  return detail::green_context_api::get().complete;
}

} // namespace cohort
