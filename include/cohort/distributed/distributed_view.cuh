// cohort/distributed/distributed_view.cuh — the user's own memory, seen as one distributed array.
//
// A non-owning view over one device span per member of a group: a torch tensor on each GPU, rmm or
// CuPy memory, or plain cudaMalloc. Every algorithm and collective that takes a
// `distributed_buffer` takes a view too, and a buffer converts to one (`buffer.view()`, or
// implicitly). The spans are checked when the view is made: one per member, none null unless
// empty, each in device memory of its member's device (managed memory is accepted on any device).
// The view neither frees nor outlives anything: the memory must live as long as the work on it.
//
//   std::vector<cuda::std::span<float>> mine = {{ptr0, n0}, {ptr1, n1}};  // one per member
//   cohort::distributed_view<float> x(group, mine);
//   cohort::multi_device_for_each(group, x, [] __device__(float& v) { v *= 2; });
#pragma once

#include "../errors/argument_error.cuh"
#include "../errors/cuda_error.cuh"
#include "../execution/device_group.cuh"
#include "../partitioning/partition.cuh"
#include "shard.cuh"

#include <cuda/std/span>

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort {

template <class T>
class distributed_buffer;
template <class T>
class managed_buffer;

template <class T>
class distributed_view {
 public:
  using value_type = T;

  // One span per member of `group`, span i on member i's device, in rank order: the global index
  // space is the spans one after another.
  distributed_view(const device_group& group, std::span<const cuda::std::span<T>> spans)
      : split_(counts_of(group, spans)) {
    shards_.reserve(spans.size());
    for (std::size_t i = 0; i < spans.size(); ++i) {
      require_device_span(group, spans[i], i);
      shards_.push_back({spans[i], split_.offset(i), group.device(i), group.stream(i), i});
    }
  }
  distributed_view(const device_group& group, std::initializer_list<cuda::std::span<T>> spans)
      : distributed_view(group, std::span<const cuda::std::span<T>>(spans.begin(), spans.size())) {}
  distributed_view(const device_group& group, const std::vector<cuda::std::span<T>>& spans)
      : distributed_view(group, std::span<const cuda::std::span<T>>(spans)) {}

  std::size_t size() const noexcept { return split_.size(); }
  std::size_t shards() const noexcept { return shards_.size(); }
  const partition& split() const noexcept { return split_; }

  // A view is shallow, like a span: a const view still hands out its elements as T.
  cohort::shard<T> shard(std::size_t i) const {
    return detail::element_at(shards_, i, "distributed_view::shard", "shards");
  }

  // The same memory with const elements, as span<T> converts to span<const T>.
  template <class U>
  requires(std::is_same_v<U, const T> && !std::is_const_v<T>) operator distributed_view<U>() const {
    std::vector<cohort::shard<U>> shards(shards_.begin(), shards_.end());
    return distributed_view<U>(split_, std::move(shards));
  }

 private:
  template <class>
  friend class distributed_view;
  template <class>
  friend class distributed_buffer;
  template <class>
  friend class managed_buffer;

  // For buffers and const conversions: shards already checked.
  distributed_view(partition split, std::vector<cohort::shard<T>> shards)
      : split_(std::move(split))
      , shards_(std::move(shards)) {}

  static partition counts_of(const device_group& group, std::span<const cuda::std::span<T>> spans) {
    const std::size_t members = detail::members_of(group, "distributed_view");
    detail::require_argument(spans.size() == members, "distributed_view", "spans", [&] {
      return "has " + std::to_string(spans.size()) + " spans but the group has " +
             std::to_string(members) + " members; give one span per member.";
    });
    std::vector<std::size_t> counts(spans.size());
    for (std::size_t i = 0; i < spans.size(); ++i)
      counts[i] = spans[i].size();
    return partition::from_counts(std::move(counts));
  }

  static void require_device_span(const device_group& group, cuda::std::span<T> span,
                                  std::size_t i) {
    if (span.empty()) return;
    detail::require_argument(span.data() != nullptr, "distributed_view", "spans", [&] {
      return "span " + std::to_string(i) + " is null but has " + std::to_string(span.size()) +
             " elements.";
    });
    cudaPointerAttributes attributes{};
    const cudaError_t status = cudaPointerGetAttributes(&attributes, span.data());
    if (status != cudaSuccess) [[unlikely]]
      throw cuda_error(status, "cudaPointerGetAttributes (distributed_view)",
                       group.device(i).get());
    const bool managed = attributes.type == cudaMemoryTypeManaged;
    const bool on_member =
        attributes.type == cudaMemoryTypeDevice && attributes.device == group.device(i).get();
    detail::require_argument(managed || on_member, "distributed_view", "spans", [&] {
      const std::string where = attributes.type == cudaMemoryTypeDevice
                                    ? "device " + std::to_string(attributes.device) + "'s memory"
                                    : std::string("host memory");
      return "span " + std::to_string(i) + " is in " + where + " but member " + std::to_string(i) +
             " is device " + std::to_string(group.device(i).get()) +
             "; give each member a span of its own device's memory (or managed memory).";
    });
  }

  partition split_;
  std::vector<cohort::shard<T>> shards_;
};

// What the algorithms take as a distributed input or output: a distributed_buffer (const or not)
// or a distributed_view, anything that answers size(), shards(), split() and shard(i).
template <class R>
concept distributed_range = requires(const std::remove_cvref_t<R>& r, std::size_t i) {
  { r.size() } -> std::convertible_to<std::size_t>;
  { r.shards() } -> std::convertible_to<std::size_t>;
  { r.split() } -> std::convertible_to<const partition&>;
  r.shard(i).data;
  r.shard(i).stream;
};

// The element type a range hands out through `R` (const for a const buffer or a view of const).
template <class R>
using range_element_t = typename decltype(std::declval<R&>().shard(0).data)::element_type;

// A range whose elements can be written through `R`.
template <class R>
concept writable_distributed_range = distributed_range<R> && !std::is_const_v<range_element_t<R>>;

} // namespace cohort
