// cohort/streams/detail/owner.cuh — the moves and the destruction of a move-only owner of one
// CUDA handle, written once for `stream`, `event` and the SM shares of an emulated group.
//
// `Ref` is the view the owner is (`stream_ref`, `event_ref`, ...): copyable, with a protected
// `handle_` (null when nothing is owned) and `device_`. `Derived` frees a handle with
//   static void destroy_handle(handle) noexcept;   // called with the handle's device current
// and befriends `owner` if that function is private. A moved-from owner holds nothing; `adopt`
// and `release` move a handle in and out.
#pragma once

#include "../../devices/scoped_device.cuh"

#include <utility>

namespace cohort::detail {

template <class Derived, class Ref>
class owner : public Ref {
 public:
  owner(owner&& other) noexcept
      : Ref(static_cast<const Ref&>(other)) {
    other.handle_ = nullptr;
  }
  owner& operator=(owner&& other) noexcept {
    if (this != &other) {
      destroy();
      Ref::operator=(static_cast<const Ref&>(other));
      other.handle_ = nullptr;
    }
    return *this;
  }
  owner(const owner&) = delete;
  owner& operator=(const owner&) = delete;
  ~owner() { destroy(); }

  // Takes ownership of `handle`, which must belong to `device` (through Derived's constructor
  // from the two, which may be private).
  template <class Handle>
  static Derived adopt(device_ref device, Handle handle) noexcept {
    return Derived(device, handle);
  }
  // Gives up ownership: the caller destroys the returned handle.
  auto release() noexcept { return std::exchange(this->handle_, nullptr); }

 protected:
  using Ref::Ref;
  owner() = default;

 private:
  // Frees under the handle's own device, whatever device is current.
  void destroy() noexcept {
    if (this->handle_ == nullptr) return;
    try {
      scoped_device on(this->device_);
      Derived::destroy_handle(this->handle_);
    } catch (...) { // scoped_device can throw only when the device is gone; nothing to free then
    }
    this->handle_ = nullptr;
  }
};

} // namespace cohort::detail
