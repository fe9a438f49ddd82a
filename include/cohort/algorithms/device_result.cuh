// cohort/algorithms/device_result.cuh — a reduction's result that stays in device memory.
//
// One T on member 0's device, with the scratch and events the reductions into it use, all made
// when it is made: a reduction given a `device_result<T>&` as its last argument allocates and
// creates nothing, so it can be captured into a CUDA graph and replayed any number of times.
// Made once per group, outside any capture; it must outlive every graph that holds a reduction
// into it. The reductions into it are ordered on the group's streams (each call's member 0 work
// follows the previous call's). A reduction into it that throws leaves its value unspecified, and
// nothing queued that would disturb the next one.
//
//   cohort::device_result<float> total(group);
//   cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{}, total);
//   float* on_gpu0 = total.data();      // for work on group.stream(0)
//   float t = total.get();              // or copy it yourself
#pragma once

#include "../detail/nvtx.cuh"
#include "../detail/one_capture.cuh"
#include "../detail/peer_copy.cuh"
#include "../errors/argument_error.cuh"
#include "../execution/device_group.cuh"
#include "../memory/device_buffer.cuh"
#include "detail/reduce_one.cuh"
#include "detail/reduce_plan.cuh"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cohort {

namespace detail {
struct device_result_access;
} // namespace detail

template <class T>
class device_result {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "cohort::device_result<T> needs a trivially copyable, default-constructible T.");

 public:
  explicit device_result(const device_group& group)
      : value_(1, (detail::members_of(group, "device_result"), group.stream(0)))
      , scratch_(group, max_blocks(group), "device_result")
      , cub_storage_(detail::allocate_scratch(cub_storage_bytes(group), group.stream(0),
                                              default_memory_resource(), "device_result"))
      , events_(group)
      , memory_(detail::memory_of(scratch_, events_)) {
    for (std::size_t k = 0; k < group.size(); ++k)
      streams_.push_back(group.stream(k));
  }

  // The value on member 0's device (group.device(0)), written in group.stream(0)'s order.
  T* data() noexcept { return value_.data(); }
  const T* data() const noexcept { return value_.data(); }
  device_ref device() const noexcept { return value_.stream().device(); }

  // Copies the value to the host after the work on member 0's stream, and waits for it.
  T get() const {
    T host{};
    value_.copy_to_host(std::span<T>(&host, 1));
    value_.stream().synchronize();
    return host;
  }

 private:
  friend struct detail::device_result_access;

  static std::vector<unsigned> max_blocks(const device_group& group) {
    std::vector<unsigned> blocks(group.size());
    for (std::size_t k = 0; k < group.size(); ++k)
      blocks[k] = detail::reduce_max_blocks(group, k);
    return blocks;
  }

  // A group of one hands sums (and an integer minimum or maximum) of an arithmetic T to CUB,
  // whose temporary storage is one T per block of its first pass: at most as many blocks as the
  // device can hold at once, times CUB's subscription factor. Made here, so that a reduction
  // into the result, captured or not, allocates nothing.
  static std::size_t cub_storage_bytes(const device_group& group) {
    if (group.size() != 1 || !std::is_arithmetic_v<T> || sizeof(T) > 8) return 0;
    const device_ref device = group.device(0);
    int per_sm = 0;
    check_cuda(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxBlocksPerMultiprocessor, device.get()),
               "cudaDeviceGetAttribute(cudaDevAttrMaxBlocksPerMultiprocessor)", device.get());
    return std::size_t(detail::multiprocessors(device)) * std::size_t(per_sm) *
               std::size_t(cub::detail::subscription_factor) * sizeof(T) +
           4096;
  }

  // The reduction of `input` into this result: refuses a result made for another group, and a
  // capture that does not hold every member or cannot hold the copies to member 0, then enqueues.
  template <class Input, class Op, class Transform>
  void enqueue(const device_group& group, const Input& input, T init, Op op, Transform transform,
               std::string_view function) {
    const detail::nvtx_range range(function, "%zu items, %zu members", input.size(), group.size());
    detail::require_value_type<T>();
    detail::refuse_average<Op>();
    detail::require_reduce_input(group, input, function);
    bool same = group.size() == streams_.size();
    for (std::size_t k = 0; same && k < group.size(); ++k)
      same = group.stream(k) == streams_[k];
    if (!same) [[unlikely]]
      detail::throw_invalid_argument(function, "result",
                                     "was made for another group (its streams are not this "
                                     "group's); make a device_result over this group.");
    const bool capturing = detail::require_one_capture(streams_, function);
    if (capturing)
      for (std::size_t k = 1; k < group.size(); ++k)
        detail::require_capturable_copy(group.device(k), group.device(0), function, [&] {
          return "member " + std::to_string(k) + "'s copy of its partial result to member 0";
        });
    // Last: a balancer's split orders moved ranges on the streams (and refuses capture itself).
    const auto source = detail::source_of(group, input, function);
    if (group.size() == 1) {
      // Straight into the value: CUB's storage where it fits (it always does with CUB's own
      // sizing), else the in-order kernel in the member's partial slots.
      detail::enqueue_reduce_one(
          group, source, init, op, transform, value_.data(),
          [&](std::size_t bytes) {
            return bytes <= cub_storage_.size() ? cub_storage_.data() : nullptr;
          },
          [&](std::size_t) {
            const detail::partial_slots<T> mine = scratch_.member(0);
            return detail::partial_slots<T>{mine.slots + 1, mine.arrivals};
          },
          function);
      return;
    }
    try {
      detail::enqueue_reduce(group, source, init, op, transform, memory_, value_.data(), capturing);
    } catch (...) {
      // The members before the failing one may still copy their part into member 0's gathered
      // slots: member 0's stream, where the next reduction clears them and where they are freed,
      // waits for every member's stream as it stands. No host wait.
      for (std::size_t k = 0; k < group.size(); ++k) {
        const cudaEvent_t done = events_.member_done(k).native_handle();
        bool recorded = false; // not where device k's context is gone (an older record: no wait)
        detail::on_device_quietly(group.device(k), [&] {
          recorded = cudaEventRecord(done, group.stream(k).native_handle()) == cudaSuccess;
        });
        if (recorded)
          detail::on_device_quietly(group.device(0), [&] {
            ignore_cuda_error(cudaStreamWaitEvent(group.stream(0).native_handle(), done, 0));
          });
      }
      throw;
    }
  }

  device_buffer<T> value_;
  detail::reduce_scratch<T> scratch_;
  device_buffer<unsigned char> cub_storage_; // a group of one's, for CUB's reductions
  detail::reduce_events events_;
  detail::reduce_memory<T> memory_; // where scratch_ and events_ are, as the reductions take them
  std::vector<stream_ref> streams_;
};

namespace detail {

template <class R>
inline constexpr bool is_device_result = false;
template <class T>
inline constexpr bool is_device_result<device_result<T>> = true;

// An operator or a transform: anything but a device_result, whose place as the last argument is
// what selects the device-result forms (a result given for a missing transform matches nothing).
template <class F>
concept not_a_result = !is_device_result<std::remove_cvref_t<F>>;

// How the reductions reach a result's enqueue (no part of device_result's public surface).
struct device_result_access {
  template <class T, class Input, class Op, class Transform>
  static void enqueue(device_result<T>& result, const device_group& group, const Input& input,
                      T init, Op op, Transform transform, std::string_view function) {
    result.enqueue(group, input, init, op, transform, function);
  }
};

} // namespace detail

} // namespace cohort
