// cohort/errors/argument_error.cuh — bad arguments, caught before any GPU work is enqueued.
//
// Every public function validates its arguments first and reports a bad one as
// `std::invalid_argument` whose message names the function and the argument (an index past the
// end given to an accessor, as to std::vector::at, is `std::out_of_range`, named the same way;
// sharded_parameters' layer index is an argument like any other, `std::invalid_argument`):
//
//   cohort::device_group group{{cohort::device_ref{0}, cohort::device_ref{0}}};
//   // throws std::invalid_argument: "cohort::device_group: argument 'devices': device 0 is listed
//   //   twice (positions 0 and 1). Use cohort::device_group::emulated(...) to run several
//   //   logical devices on one GPU."
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::detail {

[[noreturn]] inline void throw_invalid_argument(std::string_view function,
                                                std::string_view argument,
                                                std::string_view problem) {
  std::string text = "cohort::";
  text += function;
  text += ": argument '";
  text += argument;
  text += "': ";
  text += problem;
  throw std::invalid_argument(text);
}

inline void require_argument(bool condition, std::string_view function, std::string_view argument,
                             std::string_view problem) {
  if (!condition) [[unlikely]]
    throw_invalid_argument(function, argument, problem);
}

// The same with a problem that needs formatting: `problem()` returns the text, and runs only when
// the check fails, so a passing check costs no string work.
//   require_argument(a.size() == b.size(), "f", "b",
//                    [&] { return "has " + std::to_string(b.size()) + " elements."; });
template <class Problem>
requires std::is_invocable_r_v<std::string, Problem&>
void require_argument(bool condition, std::string_view function, std::string_view argument,
                      Problem&& problem) {
  if (!condition) [[unlikely]]
    throw_invalid_argument(function, argument, problem());
}

// items[i], or std::out_of_range naming `function` and what `items` holds: an accessor's index.
template <class Items>
decltype(auto) element_at(Items& items, std::size_t i, std::string_view function,
                          std::string_view what) {
  if (i >= items.size()) [[unlikely]]
    throw std::out_of_range("cohort::" + std::string(function) + ": index " + std::to_string(i) +
                            " is out of range (" + std::to_string(items.size()) + " " +
                            std::string(what) + ").");
  return items[i];
}

} // namespace cohort::detail
