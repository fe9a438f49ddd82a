// cohort/detail/nvtx.cuh — NVTX ranges in the domain `cohort`, one per operation that
// enqueues work, so that Nsight Systems shows cohort's calls on the timeline and Nsight Compute
// (`ncu --nvtx --nvtx-include ...`) can profile the kernels of one call. NVTX3 ships with the
// CUDA toolkit and is header-only.
//
// Cost when no tool is attached: NVTX3 answers nvtxDomainCreateA with a null handle until a tool
// injects itself (which happens at the first NVTX call of the process, from the environment a tool
// sets), so a range reads one function-local static, finds it null and does nothing else: no
// formatting, no string, no call into NVTX. COHORT_NVTX=0 compiles the ranges out entirely. Every
// translation unit of one program must see the same COHORT_NVTX (these are inline functions).
#pragma once

#ifndef COHORT_NVTX
#define COHORT_NVTX 1
#endif

#if COHORT_NVTX
#include <nvtx3/nvToolsExt.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#endif

#include <string_view>

namespace cohort::detail {

#if COHORT_NVTX

// vsnprintf into `out`. The formats are cohort's own literals, passed through nvtx_range's
// constructor: a template's parameter, which snprintf would take as a non-literal format (gcc's
// -Wformat-security, on by default in Ubuntu's gcc, warned in every unit; -Wformat=2 too). A
// va_list function is exempt: that is what this is for.
inline void format_into(char* out, std::size_t size, const char* format, ...) noexcept {
  std::va_list args;
  va_start(args, format);
  std::vsnprintf(out, size, format, args);
  va_end(args);
}

// The domain `cohort`, created once; null while no tool is attached.
inline nvtxDomainHandle_t nvtx_domain() noexcept {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("cohort");
  return domain;
}

// One push/pop range in the domain `cohort` for the lifetime of the object. The message starts
// with the call's name (what `--nvtx-include` matches), then what a timeline reader needs, e.g.
// "all_reduce p2p one_shot 4096 B/rank". `format` is a printf format for the rest; it is formatted
// into a stack buffer only while a tool is attached. Use it from one thread: pops pair with pushes
// per thread.
class nvtx_range {
 public:
  explicit nvtx_range(std::string_view call) noexcept
      : nvtx_range(call, "") {}
  template <class... Args>
  nvtx_range(std::string_view call, const char* format, Args... args) noexcept
      : domain_(nvtx_domain()) {
    if (domain_ == nullptr) return;
    char message[192];
    const int head =
        std::snprintf(message, sizeof message, "%.*s", static_cast<int>(call.size()), call.data());
    if (format[0] != '\0' && head > 0 && static_cast<std::size_t>(head) + 1 < sizeof message) {
      message[head] = ' ';
      format_into(message + head + 1, sizeof message - head - 1, format, args...);
    }
    push(message);
  }
  nvtx_range(const nvtx_range&) = delete;
  nvtx_range& operator=(const nvtx_range&) = delete;
  ~nvtx_range() {
    if (domain_ != nullptr) nvtxDomainRangePop(domain_);
  }

 private:
  void push(const char* message) noexcept {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = message; // NVTX copies the message at the push
    nvtxDomainRangePushEx(domain_, &attributes);
  }
  nvtxDomainHandle_t domain_;
};

#else

class nvtx_range {
 public:
  explicit constexpr nvtx_range(std::string_view) noexcept {}
  template <class... Args>
  constexpr nvtx_range(std::string_view, const char*, Args...) noexcept {}
  ~nvtx_range() {} // user-provided: a range is never reported as an unused variable
};

#endif

} // namespace cohort::detail
