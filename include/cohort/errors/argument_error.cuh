// cohort/errors/argument_error.cuh — bad arguments, caught before any GPU work is enqueued.
//
// Every public function validates its arguments first and reports a bad one as
// `std::invalid_argument` whose message names the function and the argument:
//
//   cohort::device_group group{{cohort::device_ref{0}, cohort::device_ref{0}}};
//   // throws std::invalid_argument: "cohort::device_group: argument 'devices': device 0 is listed
//   //   twice (positions 0 and 1). Use cohort::device_group::emulated(...) to run several
//   //   logical devices on one GPU."
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace cohort::detail {

[[noreturn]] inline void throw_invalid_argument(std::string_view function, std::string_view argument,
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

} // namespace cohort::detail
