// cohort/distributed/on_each_shard.cuh — call a host function once per shard of a distributed
// buffer or view, with the shard's device current.
//
//   cohort::on_each_shard(buffer, [&](cohort::shard<float> s) {
//     cohort::launch(s.stream, {blocks, 256}, scale, s.data, s.offset);
//   });
#pragma once

#include "../devices/scoped_device.cuh"
#include "../execution/device_group.cuh"
#include "distributed_buffer.cuh"

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort {

namespace detail {

// A distributed buffer or view belongs to a group when shard i lives on member i's stream.
// `Members` is a device_group, or anything that answers size() and stream(i) as one does (a
// p2p_clique).
template <class Range, class Members>
void require_buffer_of_group(const Range& buffer, const Members& group, std::string_view function,
                             std::string_view argument) {
  if constexpr (std::is_same_v<Members, device_group>) members_of(group, function);
  require_argument(buffer.shards() == group.size(), function, argument, [&] {
    return "has " + std::to_string(buffer.shards()) + " shards but the group has " +
           std::to_string(group.size()) + " members; make it over this group.";
  });
  for (std::size_t i = 0; i < group.size(); ++i)
    require_argument(buffer.shard(i).stream == group.stream(i), function, argument, [&] {
      return "shard " + std::to_string(i) + " is not on member " + std::to_string(i) +
             "'s stream: it was made over another group.";
    });
}

// on_each_shard's loop, for a buffer or a const one (whose shard(i) is a shard<const T>).
template <class Buffer, class F>
void each_shard(Buffer& buffer, F& f) {
  for (std::size_t i = 0; i < buffer.shards(); ++i) {
    auto s = buffer.shard(i); // not const: f may take its shard by reference
    scoped_device on(s.device);
    f(s);
  }
}

} // namespace detail

// Calls `f(shard)` for every shard of `buffer` in rank order, each with its device current: a
// `shard<T>`, or a `shard<const T>` for a const buffer (f may take a `shard<const T>` of either).
// A view's shards are shard<T> (const or not, as its T).
template <class T, class F>
void on_each_shard(distributed_buffer<T>& buffer, F&& f) {
  detail::each_shard(buffer, f);
}
template <class T, class F>
void on_each_shard(const distributed_buffer<T>& buffer, F&& f) {
  detail::each_shard(buffer, f);
}
template <class T, class F>
void on_each_shard(const distributed_view<T>& view, F&& f) {
  detail::each_shard(view, f);
}

} // namespace cohort
