// cohort/algorithms/detail/cub_scan.cuh — cub::DeviceScan's scan, without the device queries its
// dispatch repeats on every call. A scan of a million elements is bound by the host's time to
// enqueue it, and a single larger one waits on the host between its two launches; CUB asks the
// current device, and the scan kernel's occupancy (which it only logs), each time. cohort calls
// CUB's own dispatch with a launcher that answers those from what is known: the same policy, the
// same kernels, the same launches. Under CCCL other than 3.0 (whose dispatch this launcher is
// written against) the call is cub::DeviceScan's as it is.
#pragma once

#include <cub/device/device_scan.cuh>

#include <cstddef>
#include <type_traits>

namespace cohort::detail {

#if CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION == 0
// CUB's launcher (its <<<>>> launches), answering the dispatch's questions without asking CUDA.
struct known_device_launcher : cub::detail::TripleChevronFactory {
  int ptx_version = 0; // CUB's own per-device answer, read once per call from its cache

  cudaError_t PtxVersion(int& version) const noexcept {
    version = ptx_version;
    return cudaSuccess;
  }
  // The scan's dispatch only logs the occupancy (under CUB_DEBUG_LOG).
  template <class Kernel>
  cudaError_t MaxSmOccupancy(int& occupancy, Kernel, int, int = 0) const noexcept {
    occupancy = 0;
    return cudaSuccess;
  }
  // 2^31 - 1 on every device CUDA 12.8 and later support (compute capability 7.5 and up).
  cudaError_t MaxGridDimX(int& max_x) const noexcept {
    max_x = 0x7fffffff;
    return cudaSuccess;
  }
};

// `Dispatch`, CUB's dispatch of a scan, with `Launcher` in place of its default launcher.
template <class Dispatch, class Launcher>
struct with_launcher;
template <class In, class Out, class Op, class Init, class Offset, class Accum,
          cub::ForceInclusive Inclusive, class Policies, class Kernels, class Default,
          class Launcher>
struct with_launcher<
    cub::DispatchScan<In, Out, Op, Init, Offset, Accum, Inclusive, Policies, Kernels, Default>,
    Launcher> {
  using type =
      cub::DispatchScan<In, Out, Op, Init, Offset, Accum, Inclusive, Policies, Kernels, Launcher>;
};

// The seed CUB's dispatch takes for an exclusive scan's init (a value or a cub::FutureValue), as
// cub::DeviceScan::ExclusiveScan makes it; none for an inclusive scan.
template <class Init>
struct scan_seed {
  using type = cub::detail::InputValue<Init>;
};
template <class T, class Iterator>
struct scan_seed<cub::FutureValue<T, Iterator>> {
  using type = cub::detail::InputValue<T, Iterator>;
};
template <>
struct scan_seed<cub::NullType> {
  using type = cub::NullType;
};
#endif

// cub::DeviceScan::InclusiveScan (init: cub::NullType) or ExclusiveScan (init: a value of T or a
// cub::FutureValue<T>) of n values on the current device, which is `device`: the same kernels,
// offsets (std::size_t's) and size query (temp == nullptr) as cub::DeviceScan's.
template <class Input, class Output, class Op, class Init>
cudaError_t cub_scan(void* temp, std::size_t& bytes, Input input, Output output, Op op, Init init,
                     std::size_t n, cudaStream_t stream, [[maybe_unused]] int device) {
#if CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION == 0
  using Seed = typename scan_seed<Init>::type;
  using Offset = cub::detail::choose_offset_t<std::size_t>;
  using Dispatch = typename with_launcher<cub::DispatchScan<Input, Output, Op, Seed, Offset>,
                                          known_device_launcher>::type;
  known_device_launcher launcher;
  if (const cudaError_t status = cub::PtxVersion(launcher.ptx_version, device);
      status != cudaSuccess)
    return status;
  return Dispatch::Dispatch(temp, bytes, input, output, op, Seed(init), n, stream, {}, launcher);
#else
  if constexpr (std::is_same_v<Init, cub::NullType>)
    return cub::DeviceScan::InclusiveScan(temp, bytes, input, output, op, n, stream);
  else
    return cub::DeviceScan::ExclusiveScan(temp, bytes, input, output, op, init, n, stream);
#endif
}

} // namespace cohort::detail
