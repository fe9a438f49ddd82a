// cohort/execution/on_each.cuh — call a host function once per member of a group with that
// member's device current, its stream and its rank: the loop under every multi-device algorithm.
// Users launch their own kernels the same way (distributed/on_each_shard.cuh does it per shard).
//
//   cohort::on_each_member(group, [&](const cohort::member& m) {
//     cohort::launch(m.stream, {blocks, 256}, my_kernel, my_data[m.rank], m.rank);
//   });
#pragma once

#include "../devices/scoped_device.cuh"
#include "device_group.cuh"

#include <cstddef>
#include <string>

namespace cohort {

// What a per-member function is given.
struct member {
  std::size_t rank; // position in the group
  device_ref device;
  stream_ref stream;
};

// Calls `f(member)` for every member of `group` in rank order, each with its device current (the
// caller's current device is restored afterwards).
template <class F>
void on_each_member(const device_group& group, F&& f) {
  for (std::size_t i = 0; i < group.size(); ++i) {
    scoped_device on(group.device(i));
    f(member{i, group.device(i), group.stream(i)});
  }
}

} // namespace cohort
