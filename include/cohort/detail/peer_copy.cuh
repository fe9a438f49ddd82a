// cohort/detail/peer_copy.cuh — copies between two GPUs' stream-ordered (pool) memory.
//
// Memory from cudaMallocAsync is mapped only into the devices its pool's access list names (its
// own, and those `enable_peer_access` added): cudaMemcpyAsync between two devices' pool memory
// fails where the stream's device is not on the other pool's list (NVIDIA bug 3446335), while
// cudaMemcpyPeerAsync copies whatever the lists say (staged through the host where there is no
// peer path). CUDA 13 refuses cudaMemcpyPeerAsync on a stream being captured into a graph, so a
// captured copy is a cudaMemcpyAsync and needs the access, granted before the capture (a graph's
// own allocations take their pool's access list as it stands when they are captured).
#pragma once

#include "../devices/device_ref.cuh"
#include "../devices/scoped_device.cuh"
#include "../errors/cuda_error.cuh"
#include "../streams/stream_ref.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

// Whether `from`'s copies and kernels reach memory of `to`'s current pool (true for one device).
inline bool pool_reaches(device_ref from, device_ref to) {
  if (from == to) return true;
  scoped_device on(from); // with none current, the runtime would make (and create) GPU 0's context
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetMemPool(&pool, to.get()), "cudaDeviceGetMemPool", to.get());
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id = from.get();
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  const cudaError_t read = cudaMemPoolGetAccess(&flags, pool, &location);
  if (read != cudaSuccess) [[unlikely]] // the text is built only for the error
    check_cuda(read, "cudaMemPoolGetAccess(device " + std::to_string(from.get()) + ")", to.get());
  return flags == cudaMemAccessFlagsProtReadWrite;
}

[[noreturn]] inline void throw_uncapturable_copy(device_ref on, device_ref other,
                                                 std::string_view function, std::string_view what) {
  throw std::logic_error(
      "cohort::" + std::string(function) + ": " + std::string(what) + " between device " +
      std::to_string(on.get()) + " and device " + std::to_string(other.get()) +
      " is being captured into a CUDA graph, and device " + std::to_string(on.get()) +
      " has no access to device " + std::to_string(other.get()) +
      "'s memory pool: CUDA captures only direct copies. Nothing was enqueued. Call "
      "cohort::enable_peer_access(device_ref{" +
      std::to_string(on.get()) + "}, device_ref{" + std::to_string(other.get()) +
      "}) or device_group::enable_peer_access() before the capture begins; where the two have "
      "no peer path, run the copy outside the capture (there it needs no access).");
}

// Refuses, before anything is enqueued, a copy on a stream of `on` to or from memory of `other`
// that a graph would capture while `on` cannot reach `other`'s pool (std::logic_error, as for
// other work that cannot be captured). `what` names the copy.
inline void require_capturable_copy(device_ref on, device_ref other, std::string_view function,
                                    std::string_view what) {
  if (!pool_reaches(on, other)) [[unlikely]]
    throw_uncapturable_copy(on, other, function, what);
}

// The same where the copy's name needs formatting: `what()` returns it, and runs only when the
// copy is refused.
//   require_capturable_copy(a, b, "f", [&] { return "member " + std::to_string(k) + "'s copy"; });
template <class F>
concept builds_text = std::is_invocable_r_v<std::string, F&>;

template <builds_text What>
void require_capturable_copy(device_ref on, device_ref other, std::string_view function,
                             What&& what) {
  if (!pool_reaches(on, other)) [[unlikely]]
    throw_uncapturable_copy(on, other, function, what());
}

// Enqueues a copy of `bytes` from `from` (memory of `from_device`) to `to` (memory of
// `to_device`) on `stream`, whose device is one of the two. `capturing`: whether the stream is
// being captured (the caller checked require_capturable_copy then). `what` names the copy in an
// error, beside the two devices (the message is built only then: copy_to is a hot path).
inline void copy_between_devices(void* to, device_ref to_device, const void* from,
                                 device_ref from_device, std::size_t bytes, stream_ref stream,
                                 bool capturing, std::string_view what) {
  scoped_device on(stream.device());
  const bool direct = to_device == from_device || capturing;
  const cudaError_t status =
      direct ? cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream.native_handle())
             : cudaMemcpyPeerAsync(to, to_device.get(), from, from_device.get(), bytes,
                                   stream.native_handle());
  if (status != cudaSuccess) [[unlikely]]
    check_cuda(status,
               std::string(direct ? "cudaMemcpyAsync (" : "cudaMemcpyPeerAsync (") +
                   std::string(what) + ", device " + std::to_string(from_device.get()) +
                   " to device " + std::to_string(to_device.get()) + ")",
               stream.device().get());
}

} // namespace cohort::detail
