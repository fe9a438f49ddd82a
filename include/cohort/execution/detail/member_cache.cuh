// cohort/execution/detail/member_cache.cuh — what a group keeps for its algorithms between calls,
// per member, so that a call in a loop allocates, creates and asks the driver nothing: scratch that
// only grows, events each call records again, a pool of events for results that outlive their
// call (pending values), the sizes CUB asked for, a count the in-order reduction's blocks share,
// and the member's SM count.
//
// Scratch and events are used in the member's stream order: a call takes its scratch after the
// work an earlier call enqueued there (and that call's readers on other members' streams made the
// member's stream wait for them), so reusing it needs no more. A group is used from one host thread
// at a time; only the event pool is taken from and given back to from any thread (a pending value
// may be waited for and destroyed on another).
#pragma once

#include "../../devices/scoped_device.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../memory/detail/tracking_resource.cuh"
#include "../../memory/device_buffer.cuh"
#include "../../memory/memory_resource.cuh"
#include "../../streams/event.cuh"
#include "../../streams/stream_ref.cuh"

#include <algorithm>
#include <array>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort::detail {

// Where a member's scratch comes from: the group's resource (what the member alone reads), or
// the device's pool, which the group lets its members reach (what other members read).
enum class scratch_source { group_resource, device_pool };

// `bytes` of scratch on `stream` from `resource`; running out of memory is reported as the
// scratch of the user's call, `function`, with the bytes asked and free.
inline device_buffer<unsigned char> allocate_scratch(std::size_t bytes, stream_ref stream,
                                                     memory_resource_ref resource,
                                                     std::string_view function) {
  try {
    return device_buffer<unsigned char>(bytes, stream, resource);
  } catch (const cuda_error& e) {
    if (e.status() != cudaErrorMemoryAllocation) throw;
    std::size_t free = 0, total = 0;
    {
      scoped_device on(stream.device());
      ignore_cuda_error(cudaMemGetInfo(&free, &total));
    }
    throw cuda_error(e.status(),
                     "cudaMallocAsync (scratch of cohort::" + std::string(function) + ")",
                     e.device(), e.where(),
                     "Asked for " + std::to_string(bytes) + " bytes; " + std::to_string(free) +
                         " of " + std::to_string(total) + " bytes are free on the device.");
  }
}

class member_cache;

// An event of a member's pool, recorded once by the call that took it: it goes back to the pool
// when this goes. Move-only.
class pooled_event {
 public:
  pooled_event(pooled_event&& other) noexcept
      : pool_(std::exchange(other.pool_, nullptr))
      , event_(std::move(other.event_)) {}
  pooled_event& operator=(pooled_event&&) = delete;
  pooled_event(const pooled_event&) = delete;
  pooled_event& operator=(const pooled_event&) = delete;
  inline ~pooled_event();

  event_ref get() const noexcept { return event_; }

 private:
  friend class member_cache;
  pooled_event(member_cache* pool, event e) noexcept
      : pool_(pool)
      , event_(std::move(e)) {}

  member_cache* pool_;
  event event_;
};

class member_cache {
 public:
  member_cache() = default;
  member_cache(const member_cache&) = delete;
  member_cache& operator=(const member_cache&) = delete;
  ~member_cache() { release(); }

  // Read when the group is made. `totals` (the member's counting resource) also counts what a
  // scoped scratch resource gives.
  void bind(device_ref device, unsigned sm_count, tracking_resource& totals) noexcept {
    device_ = device;
    sm_count_ = sm_count;
    scoped_resource_.bind(device);
    scoped_resource_.count_in(totals);
  }
  unsigned sm_count() const noexcept { return sm_count_; }

  // Whether `bytes` of scratch from `which` are held already (taking them allocates nothing).
  bool holds(scratch_source which, std::size_t bytes) const noexcept {
    const std::optional<device_buffer<unsigned char>>& held = slot(which);
    return held && held->size() >= bytes;
  }

  // At least `bytes` of scratch from `which` on `stream` (the member's), 256-byte aligned, held
  // until a larger ask, release() or the group's end; what it held before is not kept. A larger
  // ask frees the old memory on `stream` (after the work enqueued there) and allocates anew from
  // `resource`; running out of memory is a cuda_error naming `function`'s scratch and the bytes.
  // One call of an algorithm takes a member's scratch once and carves it.
  unsigned char* scratch(scratch_source which, std::size_t bytes, stream_ref stream,
                         memory_resource_ref resource, std::string_view function) {
    std::optional<device_buffer<unsigned char>>& held = slot(which);
    if (held && held->size() >= bytes) return held->data();
    held.reset(); // given back first, so that its memory can serve the new one
    held.emplace(allocate_scratch(std::max<std::size_t>(bytes, 1), stream, resource, function));
    return held->data();
  }

  // Where scratch from the group's resource comes from: `group` (the member's counting resource),
  // or the resource of the scoped_scratch_resource that lives, counted in `group`'s totals.
  memory_resource_ref scratch_resource(memory_resource_ref group) noexcept {
    if (scoped_) return scoped_resource_;
    return group;
  }
  // Whether that resource is the device's pool.
  bool scratch_from_device_pool(memory_resource_ref group) const noexcept {
    return scoped_.value_or(group) == default_memory_resource();
  }
  // From now on the group's scratch comes from `resource` (nothing: from the group's resource
  // again); the scratch held goes back first. Returns the resource before.
  std::optional<memory_resource_ref>
  scope_scratch(std::optional<memory_resource_ref> resource) noexcept {
    release(scratch_source::group_resource);
    const std::optional<memory_resource_ref> before = scoped_;
    scoped_ = resource;
    if (resource) scoped_resource_.set_upstream(*resource);
    return before;
  }

  // Gives the scratch back (on the member's stream, after the work enqueued there).
  void release() noexcept {
    for (std::optional<device_buffer<unsigned char>>& held : scratch_)
      held.reset();
  }
  void release(scratch_source which) noexcept { slot(which).reset(); }

  // The member's event number `slot`, made at its first use: a call records it anew, and waits
  // enqueued earlier keep the record they were given.
  event_ref event(std::size_t slot) {
    while (events_.size() <= slot)
      events_.emplace_back(device_);
    return events_[slot];
  }

  // A word of device memory that is zero between calls: the in-order reduction's count of its
  // blocks done, which its last block sets back to zero. Allocated from the device's pool and
  // zeroed on `stream` (the member's) at the first use; kept until the group's end.
  unsigned* arrivals(stream_ref stream, std::string_view function) {
    if (!arrivals_) {
      device_buffer<unsigned char> word =
          allocate_scratch(sizeof(unsigned), stream, default_memory_resource(), function);
      word.fill_bytes(0); // kept only once zeroed
      arrivals_.emplace(std::move(word));
    }
    return reinterpret_cast<unsigned*>(arrivals_->data());
  }

  // Member 0's only: whether a call enabled peer access among the group's members (a sort on the
  // devices), which stays enabled.
  bool peer_access_enabled() const noexcept { return peer_access_enabled_; }
  void set_peer_access_enabled() noexcept { peer_access_enabled_ = true; }

  // An event for a result that outlives its call (a pending value). Thread-safe.
  pooled_event take_event() {
    {
      const std::lock_guard<std::mutex> hold(pool_lock_);
      if (!pool_.empty()) {
        cohort::event e = std::move(pool_.back());
        pool_.pop_back();
        return pooled_event(this, std::move(e));
      }
    }
    return pooled_event(this, cohort::event(device_));
  }

  // The bytes a CUB call asked for, remembered by `key` (one per kind of call: the address of a
  // static of its instantiation) and `items`: asked (query() is CUB's size query) the first time
  // only, since the answer depends on nothing else for one member's device.
  template <class Query>
  std::size_t remembered_bytes(const void* key, std::size_t items, Query query) {
    for (const known_size& k : sizes_)
      if (k.key == key && k.items == items) return k.bytes;
    const std::size_t bytes = query();
    sizes_[next_size_] = {key, items, bytes};
    next_size_ = (next_size_ + 1) % sizes_.size();
    return bytes;
  }

 private:
  friend class pooled_event;

  struct known_size {
    const void* key = nullptr;
    std::size_t items = 0;
    std::size_t bytes = 0;
  };

  std::optional<device_buffer<unsigned char>>& slot(scratch_source which) noexcept {
    return scratch_[which == scratch_source::group_resource ? 0 : 1];
  }
  const std::optional<device_buffer<unsigned char>>& slot(scratch_source which) const noexcept {
    return scratch_[which == scratch_source::group_resource ? 0 : 1];
  }

  void give_back(cohort::event e) noexcept {
    const std::lock_guard<std::mutex> hold(pool_lock_);
    try {
      pool_.push_back(std::move(e));
    } catch (...) { // out of host memory: the event is destroyed instead
    }
  }

  device_ref device_{0};
  unsigned sm_count_ = 0;
  // Before the scratch, which refers to it. Its upstream changes only while it holds nothing.
  std::optional<memory_resource_ref> scoped_;
  tracking_resource scoped_resource_;
  // [0] from the group's resource (or the scoped one), [1] from the device's pool
  std::array<std::optional<device_buffer<unsigned char>>, 2> scratch_;
  std::vector<cohort::event> events_;
  std::optional<device_buffer<unsigned char>> arrivals_;
  std::array<known_size, 8> sizes_{};
  std::size_t next_size_ = 0;
  bool peer_access_enabled_ = false;
  std::mutex pool_lock_;
  std::vector<cohort::event> pool_;
};

inline pooled_event::~pooled_event() {
  if (pool_ != nullptr && event_.native_handle() != nullptr) pool_->give_back(std::move(event_));
}

} // namespace cohort::detail
