// cohort/algorithms/detail/scan_forms.cuh — what the forms of the scans take, check and read:
// the input (a distributed range or an index range) and the output, checked before anything is
// enqueued, and each member's input as CUB reads it.
#pragma once

#include "../../detail/narrow_floats.cuh"
#include "../../distributed/distributed_view.cuh"
#include "../../distributed/indices.cuh"
#include "../../distributed/on_each_shard.cuh"
#include "../../errors/argument_error.cuh"
#include "../../execution/device_group.cuh"
#include "scan.cuh"
#include "scan_kernels.cuh"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

// The value type a scan computes in: the output's element type.
template <class Output>
using scan_value_t = std::remove_const_t<range_element_t<Output>>;

template <class A>
inline constexpr bool is_number = std::is_arithmetic_v<A> || is_narrow_float<A>;

// The in-place forms write `data`.
template <class Data>
constexpr void require_writable_data() {
  static_assert(writable_distributed_range<Data>,
                "cohort: an in-place scan writes its data: pass a non-const buffer or a view of "
                "non-const elements, or scan the const data into another range (the form that "
                "takes an input and an output).");
}

// The out-of-place forms' types: a writable output, an index range only with a transform (which
// gets the global index), and elements of another type only through a transform or as numbers.
template <class Input, class Output, class Transform>
constexpr bool scan_types_fit() {
  static_assert(writable_distributed_range<Output>,
                "cohort: a scan writes its output: pass a non-const buffer or a view of non-const "
                "elements.");
  constexpr bool plain = std::is_same_v<Transform, as_is>;
  if constexpr (is_index_range<Input>) {
    static_assert(!plain, "cohort: a scan over an index_range needs a transform: it scans "
                          "transform(i) for every global index i (pass it after the operator).");
    return !plain && writable_distributed_range<Output>;
  } else {
    using U = std::remove_const_t<range_element_t<Input>>;
    using T = scan_value_t<Output>;
    constexpr bool fits = !plain || std::is_same_v<U, T> || (is_number<U> && is_number<T>);
    static_assert(fits, "cohort: without a transform, a scan's input elements must be of the "
                        "output's type, or numbers that convert to it: pass a transform that "
                        "makes an output value of each input element.");
    return fits && writable_distributed_range<Output>;
  }
}

// Input and output may be the same memory only as the same spans, shard for shard and of one
// element type (then the scan is in place); any other overlap is refused, naming the shards.
template <class Input, class Output>
void require_apart_or_same_spans(const Input& input, const Output& output,
                                 std::string_view function) {
  constexpr bool same_type = std::is_same_v<std::remove_const_t<range_element_t<const Input>>,
                                            std::remove_const_t<range_element_t<const Output>>>;
  for (std::size_t k = 0; k < input.shards(); ++k) {
    const auto in = input.shard(k).data;
    const auto x = reinterpret_cast<std::uintptr_t>(in.data());
    for (std::size_t j = 0; j < output.shards(); ++j) {
      const auto out = output.shard(j).data;
      const auto y = reinterpret_cast<std::uintptr_t>(out.data());
      if (in.empty() || out.empty() || x >= y + out.size_bytes() || y >= x + in.size_bytes())
        continue;
      const bool same = same_type && k == j && x == y && in.size_bytes() == out.size_bytes();
      require_argument(same, function, "output", [&] {
        return "shard " + std::to_string(j) + " overlaps shard " + std::to_string(k) +
               " of 'input' without being the same span: the output may be the input's memory "
               "only shard for shard, as the same spans of the same type (an in-place scan). "
               "Scan in place, or into memory apart from the input.";
      });
    }
  }
}

// Every check of an out-of-place scan, before anything is enqueued: both over `group`; a range
// input split as the output and apart from it (or the same spans); an index range as long as the
// output and split as it (the output's split is the one used).
template <class Input, class Output>
void require_scan_arguments(const device_group& group, const Input& input, const Output& output,
                            std::string_view function) {
  if constexpr (is_index_range<Input>) {
    require_buffer_of_group(output, group, function, "output");
    require_argument(output.size() == input.size(), function, "output", [&] {
      return "has " + std::to_string(output.size()) + " elements but the input covers " +
             std::to_string(input.size()) + " indices; it must hold one value for each.";
    });
    require_argument(input.balancer() == nullptr, function, "input",
                     "is split by an adaptive_balancer, but a scan writes each member's values "
                     "into its shard of 'output' and so takes output's split: pass "
                     "cohort::indices(n) or cohort::indices(n, output.split()).");
    if (const partition* given = input.given_split(); given != nullptr)
      require_argument(given->counts() == output.split().counts(), function, "input", [&] {
        return "is split in " + std::to_string(given->parts()) +
               " parts otherwise than 'output' is: a scan writes each member's values into its "
               "shard of 'output' and so takes output's split; pass cohort::indices(n) or "
               "cohort::indices(n, output.split()).";
      });
  } else {
    require_buffer_of_group(input, group, function, "input");
    require_buffer_of_group(output, group, function, "output");
    require_argument(input.split().counts() == output.split().counts(), function, "output",
                     "is split differently from the input; make it with input.split().");
    require_apart_or_same_spans(input, output, function);
  }
}

// Member k's input as CUB reads it, an iterator over split.count(k) values of T: the shard
// itself, its elements through the transform, or transform(global index) over `split` (the
// output's). The input and the transform outlive the scan's enqueuing.
template <class T, class Input, class Transform>
auto scan_input_of(const Input& input, const Transform& transform, const partition& split) {
  if constexpr (is_index_range<Input>) {
    return
        [&transform, &split](std::size_t k) { return index_input<T>(transform, split.offset(k)); };
  } else {
    using U = std::remove_const_t<range_element_t<const Input>>;
    if constexpr (std::is_same_v<Transform, as_is> && std::is_same_v<U, T>)
      return [&input](std::size_t k) -> const T* { return input.shard(k).data.data(); };
    else
      return [&input, &transform](std::size_t k) {
        return element_input<T>(static_cast<const U*>(input.shard(k).data.data()), transform);
      };
  }
}

// An out-of-place scan of any form: checked, then run over the output's members.
template <bool Exclusive, class Input, class Output, class Op, class Transform>
void scan_into(const device_group& group, const Input& input, Output& output,
               const scan_value_t<Output>* init, Op op, const Transform& transform,
               std::string_view function) {
  using T = scan_value_t<Output>;
  require_scan_arguments(group, input, output, function);
  scan_over_members<Exclusive>(group, scan_input_of<T>(input, transform, output.split()), output,
                               init, op, function);
}

// An in-place scan: `data` read and written, shard for shard.
template <bool Exclusive, class Data, class Op>
void scan_in_place(const device_group& group, Data& data, const scan_value_t<Data>* init, Op op,
                   std::string_view function) {
  using T = scan_value_t<Data>;
  require_buffer_of_group(data, group, function, "data");
  scan_over_members<Exclusive>(group, scan_input_of<T>(data, as_is{}, data.split()), data, init, op,
                               function);
}

} // namespace cohort::detail
