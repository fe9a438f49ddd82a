// cohort/execution/detail/launch_order.cuh — one process-wide order for the launches whose kernels
// wait for each other across streams: a p2p call's kernels on every member, and a graph replay.
//
// Each stream feeds one of its device's few hardware work queues (about
// CUDA_DEVICE_MAX_CONNECTIONS; by default shared by every context on the device, green ones
// included), and a queue runs its work in turn. Were two threads to interleave two calls'
// launches (call A on member 0, call B on members 0 and 1, then call A on member 1) over streams
// that share queues, one queue would run A before B and the other B before A, and each call's
// kernels would wait for the other's forever. Launching each such call's kernels, on every
// member, while holding this lock gives every queue the same order of calls: the oldest call then
// has all its kernels at the heads of their queues, and ends. Loading a kernel into the members'
// contexts takes the same lock (p2p/detail/launch.cuh): with lazy loading, loading can wait for
// the kernels running on its device, and those then have all their peers launched.
#pragma once

#include <mutex>

namespace cohort::detail {

inline std::mutex& multi_stream_launch_lock() {
  static std::mutex lock;
  return lock;
}

} // namespace cohort::detail
