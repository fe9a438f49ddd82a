// cohort/detail/arguments.cuh — argument checks shared by the NCCL and peer-to-peer
// collectives (no NCCL needed). Their texts (`why`, an argument's name with its index) are given
// as text or as a callable that returns it, built only when a check fails: a call that passes
// its checks does no string work.
#pragma once

#include "../devices/device_ref.cuh"
#include "../distributed/on_each_shard.cuh"
#include "../errors/argument_error.cuh"
#include "../errors/cuda_error.cuh"
#include "../streams/stream_ref.cuh"

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

// Text given as it is, or as a callable that builds it (called only when it is needed).
template <class Text>
concept lazy_text = std::convertible_to<const Text&, std::string_view> ||
    std::is_invocable_r_v<std::string, const Text&>;

template <lazy_text Text>
std::string text_of(const Text& text) {
  if constexpr (std::convertible_to<const Text&, std::string_view>)
    return std::string(std::string_view(text));
  else
    return text();
}

template <lazy_text Argument, lazy_text Why>
void require_count(std::size_t got, std::size_t expected, std::string_view function,
                   const Argument& argument, const Why& why) {
  if (got != expected) [[unlikely]]
    throw_invalid_argument(function, text_of(argument),
                           "has " + std::to_string(got) + " elements; expected " +
                               std::to_string(expected) + " (" + text_of(why) + ").");
}

// `argument[index]`, built when a check of it fails.
inline auto indexed(std::string_view argument, std::size_t index) {
  return [argument, index] { return std::string(argument) + "[" + std::to_string(index) + "]"; };
}

// A collective's buffer must be memory of the device that runs it (device memory there, or managed
// memory): a null pointer, host memory or another GPU's memory is refused, naming the argument,
// and so is one whose last byte is not memory of that kind there: a span that claims more than
// its allocation holds and runs off the device's mapped memory. (One that runs only into free
// pool space or a neighbouring allocation of the device cannot be told apart: CUDA answers for an
// address, not for an allocation.)
// Memory a graph allocates (cudaMallocAsync while `stream` is captured) has its address but no
// memory behind it until the graph runs: CUDA reports it as no memory at all, so on a capturing
// `stream` such an address is taken unchecked. (`stream` is asked only then.)
// cudaPointerGetAttributes costs about a microsecond, so each thread remembers the last 32 ranges
// found good: a collective called in a loop on the same buffers asks once.
template <lazy_text Argument>
void require_memory_of(device_ref device, const void* p, std::size_t bytes,
                       std::string_view function, const Argument& argument, stream_ref stream) {
  if (bytes == 0) return;
  struct range {
    const void* begin = nullptr;
    std::size_t bytes = 0;
    int device = -1;
  };
  thread_local std::array<range, 32> known{};
  thread_local std::size_t next = 0;
  for (const range& r : known)
    if (r.begin == p && r.device == device.get() && bytes == r.bytes) return;
  const auto where = [&] { return "device " + std::to_string(device.get()); };
  // Null is refused before CUDA is asked about it (what CUDA answers for null is no promise).
  if (p == nullptr)
    throw_invalid_argument(function, text_of(argument),
                           "is null but holds " + std::to_string(bytes) +
                               " bytes; it must be memory of " + where() + ".");
  cudaPointerAttributes attributes{};
  check_cuda(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes", device.get());
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != device.get())
    throw_invalid_argument(function, text_of(argument),
                           "is memory of device " + std::to_string(attributes.device) +
                               "; this call runs on " + where() + " and needs its memory there.");
  if (attributes.type == cudaMemoryTypeUnregistered && stream.is_capturing()) return;
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw_invalid_argument(function, text_of(argument),
                           "is host memory; it must be memory of " + where() +
                               " (a device_buffer or a shard of a distributed_buffer).");
  if (bytes > 1) {
    cudaPointerAttributes last{};
    const void* end = static_cast<const unsigned char*>(p) + (bytes - 1);
    // An address no allocation holds is "unregistered", or an error on some drivers: either way
    // not the device's memory.
    if (const cudaError_t status = cudaPointerGetAttributes(&last, end); status != cudaSuccess) {
      if (is_sticky(status)) check_cuda(status, "cudaPointerGetAttributes", device.get());
      (void)cudaGetLastError();
      last.type = cudaMemoryTypeUnregistered;
    }
    if (last.type != attributes.type || last.device != attributes.device)
      throw_invalid_argument(function, text_of(argument),
                             "claims " + std::to_string(bytes) +
                                 " bytes, but its last byte is not memory of " + where() +
                                 ": it runs past the end of its allocation. Pass a span no "
                                 "larger than the buffer it views.");
  }
  known[next++ % known.size()] = {p, bytes, device.get()};
}

// A call that writes a span's elements (an in-place collective, a broadcast, a recv) is refused
// spans of const elements here, by name, rather than deep in the call.
template <class T>
constexpr void require_writable() {
  static_assert(!std::is_const_v<T>,
                "cohort: this call writes the elements (in place, a broadcast or a recv): pass "
                "spans of non-const elements.");
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

// Every rank's buffer of a collective has the same size: the shards of `range` (a buffer or a
// view over `group`) must all be as large as shard 0, whose size is returned.
template <class Range, class Members>
std::size_t equal_shard_count(const Range& range, const Members& group, std::string_view function,
                              std::string_view argument) {
  require_buffer_of_group(range, group, function, argument);
  const std::size_t count = range.shard(0).data.size();
  for (std::size_t i = 1; i < range.shards(); ++i)
    require_argument(range.shard(i).data.size() == count, function, argument, [&] {
      return "shard " + std::to_string(i) + " has " + std::to_string(range.shard(i).data.size()) +
             " elements but shard 0 has " + std::to_string(count) +
             "; every rank's buffer must be the same size (make it with "
             "partition::replicated).";
    });
  return count;
}

} // namespace cohort::detail
