// cohort/devices/topology.cuh — which GPUs can reach each other's memory, and how well.
//
// Peer access is turned on only where asked: by enable_peer_access (or the group's), and by the
// calls that say they need it (a p2p_clique; a sort that runs on the devices, not staged through
// host memory). Enabling twice is fine; enabling where the hardware cannot throws with the pair
// named.
//
//   cohort::topology topo = cohort::topology::of(cohort::devices());
//   if (topo.link(0, 1).kind == cohort::link_kind::peer)
//     cohort::enable_peer_access(cohort::device_ref{0}, cohort::device_ref{1});
#pragma once

#include "../errors/argument_error.cuh"
#include "device_ref.cuh"
#include "scoped_device.cuh"

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cohort {

enum class link_kind {
  same_device, // the pair is one GPU
  peer,        // direct loads and stores over NVLink or PCIe (cudaDeviceCanAccessPeer)
  host,        // no peer path: copies are staged through host memory
};

inline const char* to_string(link_kind kind) noexcept {
  switch (kind) {
  case link_kind::same_device:
    return "same device";
  case link_kind::peer:
    return "peer";
  case link_kind::host:
    return "host";
  }
  return "?";
}

struct peer_link {
  link_kind kind = link_kind::host;
  // CUDA's relative rank of the link (lower is faster); 0 where there is no peer path.
  int performance_rank = 0;
  // Whether atomics on peer memory are native (as over NVLink), not emulated.
  bool native_atomics = false;
};

namespace detail {

inline peer_link query_link(device_ref from, device_ref to) {
  peer_link link;
  int can_access = 0;
  check_cuda(cudaDeviceCanAccessPeer(&can_access, from.get(), to.get()), "cudaDeviceCanAccessPeer",
             from.get());
  if (can_access == 0) return link;
  link.kind = link_kind::peer;
  int value = 0;
  check_cuda(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrPerformanceRank, from.get(), to.get()),
             "cudaDeviceGetP2PAttribute(cudaDevP2PAttrPerformanceRank)", from.get());
  link.performance_rank = value;
  check_cuda(
      cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrNativeAtomicSupported, from.get(), to.get()),
      "cudaDeviceGetP2PAttribute(cudaDevP2PAttrNativeAtomicSupported)", from.get());
  link.native_atomics = value != 0;
  return link;
}

} // namespace detail

// The link from `from` to `to`: can `from` access `to`'s memory directly? Read from the driver
// once per pair and process (links do not change while it runs): the sort asks on every call.
inline peer_link link_between(device_ref from, device_ref to) {
  detail::require_valid_device(from, "link_between", "from");
  detail::require_valid_device(to, "link_between", "to");
  if (from == to) {
    peer_link link;
    link.kind = link_kind::same_device;
    link.native_atomics = true;
    return link;
  }
  static std::mutex lock;
  static std::map<std::pair<int, int>, peer_link> known;
  const std::pair<int, int> pair(from.get(), to.get());
  {
    const std::lock_guard<std::mutex> hold(lock);
    if (const auto found = known.find(pair); found != known.end()) return found->second;
  }
  const peer_link link = detail::query_link(from, to); // outside the lock: it may throw
  const std::lock_guard<std::mutex> hold(lock);
  return known.emplace(pair, link).first->second;
}

// The link matrix of a list of devices, indexed by position in that list.
class topology {
 public:
  static topology of(const std::vector<device_ref>& devices) {
    topology t;
    t.devices_ = devices;
    t.links_.reserve(devices.size() * devices.size());
    for (device_ref from : devices)
      for (device_ref to : devices)
        t.links_.push_back(link_between(from, to));
    return t;
  }

  std::size_t size() const noexcept { return devices_.size(); }
  device_ref device(std::size_t i) const {
    return detail::element_at(devices_, i, "topology::device", "devices");
  }
  const peer_link& link(std::size_t from, std::size_t to) const {
    detail::element_at(devices_, from, "topology::link", "devices");
    detail::element_at(devices_, to, "topology::link", "devices");
    return links_[from * size() + to];
  }
  // True when every pair can reach each other directly.
  bool fully_connected() const noexcept {
    for (const peer_link& l : links_)
      if (l.kind == link_kind::host) return false;
    return true;
  }

 private:
  std::vector<device_ref> devices_;
  std::vector<peer_link> links_; // row-major: links_[from * size + to]
};

// Lets `from`'s kernels and copies read and write `to`'s memory: both cudaMalloc memory and the
// stream-ordered pool that device_buffer allocates from. Idempotent; throws
// `std::invalid_argument` naming the pair when the hardware has no peer path (checked before any
// state changes).
inline void enable_peer_access(device_ref from, device_ref to) {
  detail::require_valid_device(from, "enable_peer_access", "from");
  detail::require_valid_device(to, "enable_peer_access", "to");
  if (from == to) return; // a device always reaches its own memory
  int can_access = 0;
  check_cuda(cudaDeviceCanAccessPeer(&can_access, from.get(), to.get()), "cudaDeviceCanAccessPeer",
             from.get());
  if (can_access == 0)
    detail::throw_invalid_argument(
        "enable_peer_access", "to",
        "device " + std::to_string(from.get()) + " cannot access device " +
            std::to_string(to.get()) +
            "'s memory (no peer path between them); copy through the host instead.");
  // `from` current throughout: with none current, the pool calls would make (and create) GPU 0's
  // primary context.
  scoped_device on(from);
  cudaError_t status = cudaDeviceEnablePeerAccess(to.get(), 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled)
    ignore_cuda_error(status);
  else
    check_cuda(status, "cudaDeviceEnablePeerAccess(" + std::to_string(to.get()) + ")", from.get());
  // Peer access covers cudaMalloc memory only: memory from the stream-ordered allocator (every
  // device_buffer) lives in `to`'s memory pool, whose access list must name `from` as well.
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetMemPool(&pool, to.get()), "cudaDeviceGetMemPool", to.get());
  cudaMemAccessDesc access{};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = from.get();
  access.flags = cudaMemAccessFlagsProtReadWrite;
  check_cuda(cudaMemPoolSetAccess(pool, &access, 1),
             "cudaMemPoolSetAccess(device " + std::to_string(from.get()) + ")", to.get());
}

// Enables access both ways between every pair of `devices` that has a peer path; returns false
// when some pair has none (those pairs are left alone).
inline bool enable_peer_access_among(const std::vector<device_ref>& devices) {
  bool all = true;
  for (device_ref from : devices)
    for (device_ref to : devices) {
      if (from == to) continue;
      if (link_between(from, to).kind != link_kind::peer) {
        all = false;
        continue;
      }
      enable_peer_access(from, to);
    }
  return all;
}

} // namespace cohort
