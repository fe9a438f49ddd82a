// cohort/execution/launch.cuh — one way to launch a kernel: on a stream, with its device current
// for the launch only, the launch checked, and the kernel named if it fails.
//
//   __global__ void scale(cuda::std::span<float> x, float a);
//
//   cohort::launch(stream, {.grid = 264, .block = 256}, scale, x, 2.0f);
//   cohort::launch(stream, {.grid = blocks, .block = 256, .shared_bytes = 4096, .name = "scale"},
//                  scale, x, 2.0f);
//   cohort::launch(stream, {.grid = fits, .block = 256, .cooperative = true}, persistent, x);
//
// Like CCCL's `cuda::launch(stream, config, kernel, args...)`, the stream comes first and the
// arguments are converted to the kernel's parameter types as a `<<<...>>>` launch converts them,
// but as values passed on (like std::thread's): a literal 0 or NULL for a pointer parameter is an
// int by then, which does not compile; pass nullptr.
// A grid or block with a zero dimension is refused before anything is enqueued; an error CUDA
// reports for the launch becomes a `cuda_error` that names the kernel (`name`, else CUDA's name
// for the function) and the device. Launches may be captured into a graph like any other.
//
// A cooperative launch (cudaLaunchAttributeCooperative) lets the kernel use cooperative groups'
// grid.sync(): CUDA refuses it, and cohort reports it naming the kernel, when the whole grid could
// not be resident at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor times the SMs).
#pragma once

#include "../devices/scoped_device.cuh"
#include "../errors/argument_error.cuh"
#include "../errors/cuda_error.cuh"
#include "../streams/stream_ref.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cohort {

struct launch_config {
  dim3 grid = 1;
  dim3 block = 1;
  std::size_t shared_bytes = 0; // dynamic shared memory per block
  const char* name = nullptr;   // for error messages; CUDA's name for the kernel where null
  bool cooperative = false;     // every block resident at once, for grid.sync()
};

namespace detail {

inline bool has_zero_dimension(dim3 d) noexcept {
  return d.x == 0 || d.y == 0 || d.z == 0;
}

inline std::string kernel_name(const launch_config& config, const void* kernel) {
  if (config.name != nullptr) return config.name;
  const char* name = nullptr;
  if (cudaFuncGetName(&name, kernel) == cudaSuccess && name != nullptr) return name;
  (void)cudaGetLastError();
  return "a kernel";
}

} // namespace detail

template <class... Params, class... Args>
void launch(stream_ref stream, const launch_config& config, void (*kernel)(Params...),
            Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "cohort::launch: give the kernel exactly as many arguments as it has parameters.");
  detail::require_stream(stream, "launch");
  if (detail::has_zero_dimension(config.grid) || detail::has_zero_dimension(config.block))
    detail::throw_invalid_argument(
        "launch", "config",
        "grid and block need at least 1 in every dimension (launching " +
            detail::kernel_name(config, reinterpret_cast<const void*>(kernel)) + " on device " +
            std::to_string(stream.device().get()) + "); skip the launch when there is no work.");
  scoped_device on(stream.device());
  // The arguments converted to the parameters' types, as <<<>>> converts them, and passed by
  // address as cudaLaunchKernelExC takes them. Its own status is checked, not cudaGetLastError,
  // which would also report an error an earlier call left behind (a p2p call would then stop
  // between two members' launches).
  std::tuple<std::remove_cvref_t<Params>...> converted(std::forward<Args>(args)...);
  void* addresses[sizeof...(Params) > 0 ? sizeof...(Params) : 1] = {};
  std::apply(
      [&](auto&... p) {
        std::size_t k = 0;
        ((addresses[k++] = static_cast<void*>(&p)), ...);
      },
      converted);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  cudaLaunchConfig_t native{};
  native.gridDim = config.grid;
  native.blockDim = config.block;
  native.dynamicSmemBytes = config.shared_bytes;
  native.stream = stream.native_handle();
  native.attrs = config.cooperative ? &attribute : nullptr;
  native.numAttrs = config.cooperative ? 1 : 0;
  const cudaError_t status =
      cudaLaunchKernelExC(&native, reinterpret_cast<const void*>(kernel), addresses);
  if (status != cudaSuccess) [[unlikely]] {
    (void)cudaGetLastError(); // this launch's error, now reported: not left for a later check
    const std::string name = detail::kernel_name(config, reinterpret_cast<const void*>(kernel));
    throw cuda_error(status,
                     config.cooperative
                         ? "cooperative launch of " + name +
                               (status == cudaErrorCooperativeLaunchTooLarge
                                    ? " (the grid cannot be resident at once: use at most "
                                      "cudaOccupancyMaxActiveBlocksPerMultiprocessor times the "
                                      "SMs of the stream's device or SM share)"
                                    : "")
                         : "launch of " + name,
                     stream.device().get());
  }
}

} // namespace cohort
