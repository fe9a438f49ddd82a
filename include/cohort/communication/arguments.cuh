// cohort/communication/arguments.cuh — argument checks shared by the NCCL and peer-to-peer
// collectives (no NCCL needed).
#pragma once

#include "../errors/argument_error.cuh"
#include "../execution/on_each.cuh"
#include "../memory/distributed_buffer.cuh"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cohort::detail {

inline void require_count(std::size_t got, std::size_t expected, std::string_view function,
                          std::string_view argument, std::string_view why) {
  if (got != expected)
    throw_invalid_argument(function, argument,
                           "has " + std::to_string(got) + " elements; expected " +
                               std::to_string(expected) + " (" + std::string(why) + ").");
}

// Out-of-place calls may not have buffers that partly overlap (the same start is in place).
template <class A, class B>
void require_apart_or_same(const A* a, std::size_t a_bytes, const B* b, std::size_t b_bytes,
                           std::string_view function) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  if (x == y || a_bytes == 0 || b_bytes == 0) return;
  if (x < y + b_bytes && y < x + a_bytes)
    throw_invalid_argument(function, "recv",
                           "overlaps 'send' without starting at the same address; use the "
                           "in-place form or separate buffers.");
}

// Every rank's buffer of a collective has the same size: the shards of `buffer` (over `group`)
// must all be as large as shard 0, whose size is returned.
template <class T>
std::size_t equal_shard_count(const distributed_buffer<T>& buffer, const device_group& group,
                              std::string_view function, std::string_view argument) {
  require_buffer_of_group(buffer, group, function, argument);
  const std::size_t count = buffer.shard(0).data.size();
  for (std::size_t i = 1; i < buffer.shards(); ++i)
    if (buffer.shard(i).data.size() != count)
      throw_invalid_argument(function, argument,
                             "shard " + std::to_string(i) + " has " +
                                 std::to_string(buffer.shard(i).data.size()) +
                                 " elements but shard 0 has " + std::to_string(count) +
                                 "; every rank's buffer must be the same size (make it with "
                                 "partition::replicated).");
  return count;
}

} // namespace cohort::detail
