// cohort/execution/on_each.cuh — the primitive under every multi-device algorithm: call a host
// function once per member of a group (or per shard of a distributed buffer) with that member's
// device current, its stream, and its rank. Users launch their own kernels the same way.
//
//   cohort::on_each_member(group, [&](const cohort::member& m) {
//     my_kernel<<<blocks, 256, 0, m.stream.native_handle()>>>(my_data[m.rank], m.rank);
//     cohort::check_launch("my_kernel", m.device.get());
//   });
//   cohort::on_each_shard(buffer, [&](cohort::shard<float> s) {
//     scale<<<blocks, 256, 0, s.stream.native_handle()>>>(s.data, s.offset);
//   });
#pragma once

#include "../devices/scoped_device.cuh"
#include "../memory/distributed_buffer.cuh"
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

namespace detail {

// A distributed buffer belongs to a group when shard i lives on member i's stream.
template <class T>
void require_buffer_of_group(const distributed_buffer<T>& buffer, const device_group& group,
                             std::string_view function, std::string_view argument) {
  if (buffer.shards() != group.size())
    throw_invalid_argument(function, argument,
                           "has " + std::to_string(buffer.shards()) +
                               " shards but the group has " + std::to_string(group.size()) +
                               " members; make the buffer over this group.");
  for (std::size_t i = 0; i < group.size(); ++i)
    if (!(buffer.shard(i).stream == group.stream(i)))
      throw_invalid_argument(function, argument,
                             "shard " + std::to_string(i) +
                                 " is not on member " + std::to_string(i) +
                                 "'s stream: the buffer was made over another group.");
}

} // namespace detail

// Calls `f(shard)` for every shard of `buffer` in rank order, each with its device current.
template <class T, class F>
void on_each_shard(distributed_buffer<T>& buffer, F&& f) {
  for (std::size_t i = 0; i < buffer.shards(); ++i) {
    shard<T> s = buffer.shard(i);
    scoped_device on(s.device);
    f(s);
  }
}

} // namespace cohort
