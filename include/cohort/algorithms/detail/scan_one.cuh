// cohort/algorithms/detail/scan_one.cuh — a scan over a group of one: the member's CUB scan of its
// shard, and nothing else (no total, no carry), in the scratch the member keeps between calls; so
// it costs what cub::DeviceScan costs, less the device queries CUB repeats per call (cub_scan.cuh).
// CUB's size query is asked once per kind of call and size.
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../execution/detail/group_access.cuh"
#include "../../execution/device_group.cuh"
#include "cub_scan.cuh"
#include "scratch.cuh"

#include <cstddef>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

// A CUB call's status; the message is built only when it failed.
inline void check_cub_scan(cudaError_t status, std::string_view function, bool size_query,
                           int device,
                           std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) [[unlikely]]
    check_cuda(status,
               std::string(size_query ? "cub::DeviceScan (size query, " : "cub::DeviceScan (") +
                   std::string(function) + ")",
               device, where);
}

// One address per instantiation: the key under which a member remembers what CUB asked for.
template <class... Kinds>
const void* scan_size_key() {
  static const char key = 0;
  return &key;
}

// Scans `input` (an iterator over n values) into `out` on member 0's stream: cub::DeviceScan's
// inclusive scan, or its exclusive one seeded with `*init`. Captured, the scratch is the graph's,
// allocated at each launch from the device's pool (memory kept by the group could be freed while
// the graph still runs); otherwise it is the member's kept scratch.
template <bool Exclusive, class T, class Input, class ScanOp>
void scan_one_member(const device_group& group, Input input, T* out, std::size_t n, const T* init,
                     ScanOp op, bool capturing, std::string_view function) {
  if (n == 0) return;
  const stream_ref stream = group.stream(0);
  const int device = stream.device().get();
  scoped_device on(stream.device()); // CUB sizes and launches for the current device
  auto cub = [&](void* temp, std::size_t& bytes) {
    if constexpr (Exclusive)
      return cub_scan(temp, bytes, input, out, op, *init, n, stream.native_handle(), device);
    else
      return cub_scan(temp, bytes, input, out, op, cub::NullType{}, n, stream.native_handle(),
                      device);
  };
  member_cache& cache = group_memory_access::cache(group, 0);
  std::size_t bytes = cache.remembered_bytes(
      scan_size_key<Input, T, ScanOp, std::bool_constant<Exclusive>>(), n, [&] {
        std::size_t asked = 0;
        check_cub_scan(cub(nullptr, asked), function, true, device);
        return asked;
      });
  if (capturing) {
    scratch graphs(bytes, stream, default_memory_resource()); // freed in the graph, after the scan
    check_cub_scan(cub(graphs.rest(), bytes), function, false, device);
    return;
  }
  void* temp = kept_scratch(group, {bytes}, scratch_source::group_resource, function)[0];
  check_cub_scan(cub(temp, bytes), function, false, device);
}

} // namespace cohort::detail
