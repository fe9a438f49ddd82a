// cohort/distributed/shard.cuh — what one member of a group holds of a distributed array.
//
// A shard is a device span with where it sits in the global index space and the member's device,
// stream and rank: what a kernel of yours needs to work on one member's part.
//
//   cohort::shard<float> s = x.shard(1);
//   cohort::launch(s.stream, {.grid = 132, .block = 256}, scale, s.data, s.offset);
//   cohort::shard<const float> readonly = s;                 // as span<T> to span<const T>
#pragma once

#include "../devices/device_ref.cuh"
#include "../streams/stream_ref.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <type_traits>

namespace cohort {

// What one member holds: its elements as a device span, where they sit in the global index space,
// and the member's device, stream and position (rank) in the group.
template <class T>
struct shard {
  cuda::std::span<T> data;
  std::size_t offset = 0;
  device_ref device;
  stream_ref stream;
  std::size_t rank = 0;

  // The same shard with const elements, as span<T> converts to span<const T>: a function that
  // only reads takes shard<const T> whichever buffer it is given.
  // (A template: a plain operator shard<const T> would be declared in shard<const T> too.)
  template <class U>
  requires(std::is_same_v<U, const T> && !std::is_const_v<T>) operator shard<U>() const {
    return {data, offset, device, stream, rank};
  }
};

} // namespace cohort
