// cohort/p2p/detail/lines.cuh — how a small one-shot call moves its data: in lines, as NCCL's LL
// protocol does. A line is 16 bytes written by one store: two 64-bit words, each 4 bytes of data
// under the call's 32-bit flag. A 64-bit word is read and written whole (single-copy atomic), so a
// reader that finds the flag in both words holds the line's data: the data is its own signal, with
// no barrier and no fence between the write and the read.
#pragma once

#include "../../detail/narrow_floats.cuh"
#include "engine.cuh"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cohort::detail::p2p {

// Line `i` that rank `from` sends to rank `to` in half `half` (in rank `to`'s state).
__device__ inline std::uint32_t* line_at(const engine& e, int to, unsigned half, int from,
                                         std::size_t i) {
  auto* lines = reinterpret_cast<std::uint32_t*>(e.signals[to] + state_layout::lines);
  return lines +
         ((std::size_t{half} * max_ranks + static_cast<std::size_t>(from)) * max_lines + i) * 4;
}

// A block's flag for its call number: never 0, the value of lines never written or cleared. It
// repeats after 2^32 - 1 calls; a line cannot hold a flag that old, as every call clears one line
// past its data (line_to_clear), so each line of a half is written at least once every
// 2 * max_lines calls.
__device__ inline std::uint32_t line_flag(std::uint64_t call_number) {
  return static_cast<std::uint32_t>(call_number % 0xffffffffu) + 1u;
}

// What a block's call number gives its lines: the half of the lines they go to, and their flag.
struct line_call {
  std::uint64_t number;
  unsigned half;
  std::uint32_t flag;
};

__device__ inline line_call line_call_of(std::uint64_t call_number) {
  return {call_number, static_cast<unsigned>(call_number & 1u), line_flag(call_number)};
}

__device__ inline void store_line(std::uint32_t* line, uint2 data, std::uint32_t flag) {
  const std::uint64_t low = std::uint64_t{flag} << 32 | data.x;
  const std::uint64_t high = std::uint64_t{flag} << 32 | data.y;
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"(low), "l"(high)
               : "memory");
}

// The line of a call's half that the call clears: one a call in turn, where it lies past the
// call's `lines` (a line the call neither writes nor reads, and which no peer reads until a later
// call of this half, after this one, writes it).
__device__ inline std::size_t line_to_clear(std::uint64_t call_number) {
  return (call_number / 2) % max_lines;
}

// Reads `line`: true, with its data, where both its words hold `flag`; else `seen` is a flag found.
__device__ inline bool load_line(const std::uint32_t* line, std::uint32_t flag, uint2& data,
                                 std::uint64_t& seen) {
  std::uint64_t low, high;
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(low), "=l"(high)
               : "l"(line)
               : "memory");
  data = make_uint2(static_cast<std::uint32_t>(low), static_cast<std::uint32_t>(high));
  const auto f0 = static_cast<std::uint32_t>(low >> 32),
             f1 = static_cast<std::uint32_t>(high >> 32);
  seen = f0 != flag ? f0 : f1;
  return f0 == flag && f1 == flag;
}

// Elements [i * per_line, (i + 1) * per_line) of `in` (fewer at the end), as a line's 8 bytes.
template <class T>
__device__ uint2 input_line(const T* in, std::size_t count, std::size_t i) {
  constexpr std::size_t per_line = 8 / sizeof(T);
  unsigned char bytes[8] = {};
  for (std::size_t k = 0; k < per_line && i * per_line + k < count; ++k)
    std::memcpy(bytes + k * sizeof(T), in + i * per_line + k, sizeof(T));
  uint2 data;
  std::memcpy(&data, bytes, 8);
  return data;
}

// Line `i` from every rank into data[rank], in block `block`'s call `call`: one read of every line
// at once, then a wait (wait_until) for any that had not arrived. A sender whose kernel never
// launched is released as a barrier is (release_waiting raises its slot past every value): the line
// is then taken as it is. False where the clique stopped. A fault record names the wait in barrier
// values, as a barrier's does: the first value this call would take, and that of the call whose
// line was found (0: none yet).
__device__ inline bool read_lines(const engine& e, unsigned block, const line_call& call,
                                  std::size_t i, uint2 (&data)[max_ranks]) {
  const unsigned half = call.half;
  const std::uint32_t flag = call.flag;
  bool have[max_ranks];
#pragma unroll
  for (int q = 0; q < max_ranks; ++q) {
    std::uint64_t found = 0;
    have[q] = q >= e.ranks || load_line(line_at(e, e.rank, half, q, i), flag, data[q], found);
  }
  for (int q = 0; q < e.ranks; ++q) {
    if (have[q]) continue;
    std::uint64_t& released = signal_slot(e, e.rank, block, q);
    unsigned polls = 0; // the release slot, one for the whole block, is read every 16th poll
    const auto arrived = [&](std::uint64_t& reached) {
      std::uint64_t found = 0;
      if (load_line(line_at(e, e.rank, half, q, i), flag, data[q], found)) return true;
      const std::uint64_t behind = (flag + 0xffffffffull - found) % 0xffffffffull; // calls
      reached = found == 0 || behind > call.number ? 0 : (call.number - behind) * epoch_step + 1;
      return ++polls % 16 == 0 && load_acquire(e, released) == ~std::uint64_t{0};
    };
    if (!wait_until(e, arrived, call.number * epoch_step + 1, block, q,
                    call_kind::one_shot_all_reduce))
      return false;
  }
  return true;
}

// Element k of every rank's line, folded in rank order into out[i * per_line + k], for every
// element of the line below `count`.
template <class T, class Acc, class R>
__device__ void reduce_line(const uint2 (&data)[max_ranks], const R& r, T* out, std::size_t count,
                            std::size_t i) {
  constexpr std::size_t per_line = 8 / sizeof(T);
  const auto element = [&](int q, std::size_t k) {
    T v;
    std::memcpy(&v, reinterpret_cast<const unsigned char*>(&data[q]) + k * sizeof(T), sizeof(T));
    return convert<Acc>(v);
  };
  for (std::size_t k = 0; k < per_line && i * per_line + k < count; ++k) {
    Acc acc = element(0, k);
    for (int q = 1; q < r.ranks; ++q)
      acc = r.apply(acc, element(q, k));
    out[i * per_line + k] = r.out(acc);
  }
}

} // namespace cohort::detail::p2p
