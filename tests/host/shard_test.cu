// A shard converts to a shard of const elements, every field kept (no GPU: the span is host
// memory, the stream a handle that is never used).
#include <cohort/distributed/distributed_buffer.cuh>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <type_traits>

TEST_CASE("a shard converts to a shard of const elements, and not back") {
  static_assert(std::is_convertible_v<cohort::shard<float>, cohort::shard<const float>>);
  static_assert(!std::is_convertible_v<cohort::shard<const float>, cohort::shard<float>>);
  static_assert(!std::is_convertible_v<cohort::shard<float>, cohort::shard<const int>>);
  std::array<float, 7> elements{};
  const auto handle = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1234});
  const cohort::shard<float> s{cuda::std::span<float>(elements.data() + 2, 5), 11,
                               cohort::device_ref{3},
                               cohort::stream_ref(cohort::device_ref{3}, handle), 4};
  const cohort::shard<const float> c = s;
  CHECK(c.data.data() == elements.data() + 2);
  CHECK(c.data.size() == 5);
  CHECK(c.offset == 11);
  CHECK(c.device.get() == 3);
  CHECK(c.stream.native_handle() == handle);
  CHECK(c.stream.device().get() == 3);
  CHECK(c.rank == 4);
}
