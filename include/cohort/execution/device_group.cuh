// cohort/execution/device_group.cuh — an ordered set of devices, one stream each.
//
// The group is where multi-GPU work runs: member `i` is a device and a stream on it, and every
// algorithm enqueues member i's share on stream(i). `fork` makes every member's stream wait for
// work already on an origin stream; `join` makes the origin wait for every member.
//
//   cohort::device_group group(cohort::devices());        // every visible GPU
//   group.fork(main_stream);
//   for (std::size_t i = 0; i < group.size(); ++i) launch_on(group.device(i), group.stream(i));
//   group.join(main_stream);
//
// An *emulated* group runs N logical devices on one physical GPU, each with its own stream and,
// where green contexts exist, its own share of the SMs, so that multi-GPU code runs and is tested
// on one GPU. It is always asked for by name and says so:
//
//   auto group = cohort::device_group::emulated(cohort::device_ref{0}, 4);
//   assert(group.is_emulated() && group.size() == 4);
//   auto uneven = cohort::device_group::emulated(cohort::device_ref{0}, {1.0, 3.0}); // SMs 1:3
//
// Code that should run anywhere, on every GPU of a multi-GPU machine and on one GPU alike, asks
// for both at once: every visible GPU where two or more are visible, else n emulated on GPU 0.
//
//   auto anywhere = cohort::device_group::every_gpu_or_emulated(2);
//
// A group can also run on streams the caller owns, one per member on distinct devices (cohort
// never destroys them):
//
//   cohort::device_group theirs({cohort::stream_ref::borrow(cohort::device_ref{0}, handle)});
//
// A group is used from one host thread at a time.
#pragma once

#include "../detail/nvtx.cuh"
#include "../devices/device_ref.cuh"
#include "../devices/topology.cuh"
#include "../errors/argument_error.cuh"
#include "../memory/detail/tracking_resource.cuh"
#include "../memory/memory_resource.cuh"
#include "../streams/event.cuh"
#include "../streams/stream.cuh"
#include "detail/group_arguments.cuh"
#include "detail/group_watch.cuh"
#include "detail/member_cache.cuh"
#include "sm_partition.cuh"

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

namespace detail {
struct group_memory_access;
struct group_watch_access;
} // namespace detail

class device_group {
  friend struct detail::group_memory_access;
  friend struct detail::group_watch_access;

 public:
  // A group of distinct real devices, in the given order. Rejects an empty list, a device out of
  // range and a device listed twice.
  explicit device_group(const std::vector<device_ref>& devices)
      : devices_(devices) {
    detail::require_distinct(devices_, "devices");
    make_streams_and_events();
  }
  device_group(std::initializer_list<device_ref> devices)
      : device_group(std::vector<device_ref>(devices)) {}

  // A group over streams the caller owns (borrowed: cohort never destroys them), one per member,
  // each on a distinct device: torch's current stream on each GPU, say, or a default stream named
  // with its device (stream_ref::legacy_default). A stream that is not on the device it was named
  // with is refused, naming the member; so is an empty handle.
  explicit device_group(const std::vector<stream_ref>& streams)
      : devices_(detail::devices_of(streams))
      , stream_refs_(streams) {
    detail::require_distinct(devices_, "streams");
    for (std::size_t i = 0; i < streams.size(); ++i)
      detail::require_on_its_device(streams[i], i);
    for (device_ref d : devices_)
      member_events_.emplace_back(d);
    make_memory();
  }

  // `n` logical devices on the one physical `device`, each with its own stream and, where green
  // contexts exist (`sm_partitioning_available`), an equal share of its SMs of its own.
  static device_group emulated(device_ref device, std::size_t n) {
    detail::require_argument(n > 0, "device_group::emulated", "n",
                             "a group needs at least one logical device.");
    detail::require_valid_device(device, "device_group::emulated", "device");
    if (!sm_partitioning_available(device))
      return device_group(std::vector<device_ref>(n, device), {});
    return from_shares(device, detail::split_sms(device, std::vector<double>(n, 1.0)));
  }

  // One logical device per weight on `device`, each with SMs in proportion to its weight, so that
  // unequal GPUs can be emulated on one. Needs green contexts; throws where they are missing.
  // Under COHORT_NO_SM_PARTITIONING=1 the weights are checked, and the members share the whole
  // GPU on plain streams (`splits_sms()` is false), as the count form's do.
  static device_group emulated(device_ref device, const std::vector<double>& sm_weights) {
    detail::require_sm_weights(device, sm_weights);
    if (detail::sm_partitioning_switched_off())
      return device_group(std::vector<device_ref>(sm_weights.size(), device), {});
    return from_shares(device, detail::split_sms(device, sm_weights, "sm_weights"));
  }
  // The same from a braced list of floating-point weights, a single one too (`{2.0}`, which the
  // count form would otherwise take, and refuse as narrowing). A one-integer list stays a count.
  template <std::floating_point W>
  static device_group emulated(device_ref device, std::initializer_list<W> sm_weights) {
    return emulated(device, std::vector<double>(sm_weights.begin(), sm_weights.end()));
  }

  // Every visible GPU where two or more are visible, else `n` logical devices emulated on GPU 0
  // (as `emulated(device_ref{0}, n)`). `is_emulated()` tells which one was made. Throws
  // `cuda_error` (cudaErrorNoDevice) where no GPU is visible.
  static device_group every_gpu_or_emulated(std::size_t n) {
    constexpr std::string_view where = "device_group::every_gpu_or_emulated";
    detail::require_argument(n > 0, where, "n", "a group needs at least one logical device.");
    const int visible = device_count();
    if (visible == 0)
      throw cuda_error(cudaErrorNoDevice, where, no_device, std::source_location::current(),
                       "No GPU is visible: check CUDA_VISIBLE_DEVICES and the driver, or skip "
                       "the GPU work where device_count() is 0.");
    if (visible >= 2) return device_group(cohort::devices());
    return emulated(device_ref{0}, n);
  }

  device_group(device_group&&) noexcept = default;
  // The old members' streams (and events) go before the green contexts they were made from, then
  // `other`'s resources move in. (A defaulted assignment would assign the shares first, and so
  // destroy the old green contexts while their streams still existed.)
  device_group& operator=(device_group&& other) noexcept {
    if (this == &other) return *this;
    cache_.reset(); // its scratch goes back on the old streams, to the old resources
    origin_events_.clear();
    member_events_.clear();
    stream_refs_.clear();
    streams_.clear();
    sm_shares_.clear();
    memory_ = std::move(other.memory_);
    devices_ = std::move(other.devices_);
    emulated_ = other.emulated_;
    sm_shares_ = std::move(other.sm_shares_);
    streams_ = std::move(other.streams_);
    stream_refs_ = std::move(other.stream_refs_);
    member_events_ = std::move(other.member_events_);
    origin_events_ = std::move(other.origin_events_);
    cache_ = std::move(other.cache_);
    watch_ = std::move(other.watch_);
    // Left with no members (what members_of tests), whatever the vectors' moves leave behind.
    other.origin_events_.clear();
    other.member_events_.clear();
    other.stream_refs_.clear();
    other.streams_.clear();
    other.sm_shares_.clear();
    other.devices_.clear();
    return *this;
  }
  device_group(const device_group&) = delete;
  device_group& operator=(const device_group&) = delete;

  std::size_t size() const noexcept { return devices_.size(); }
  // True when the members are logical devices on one physical GPU (made by `emulated`).
  bool is_emulated() const noexcept { return emulated_; }
  // True when each member runs on its own share of the GPU's SMs (an emulated group on a GPU
  // with green contexts).
  bool splits_sms() const noexcept { return !sm_shares_.empty(); }
  // The SMs member `i`'s kernels may run on: its share where SMs are split, else the device's.
  unsigned sm_count(std::size_t i) const {
    detail::element_at(devices_, i, "device_group::sm_count", "members");
    return cache_[i].sm_count();
  }
  // The SMs member `i` can count on while every member's kernel runs at once (kernels that wait
  // for each other: a p2p session, grid_sync across members): `sm_count(i)`, divided among the
  // members where an emulated group shares one GPU's SMs (`splits_sms()` false). At least 1.
  unsigned concurrent_sm_count(std::size_t i) const {
    detail::element_at(devices_, i, "device_group::concurrent_sm_count", "members");
    const unsigned sms = sm_count(i);
    if (!emulated_ || splits_sms()) return sms;
    return std::max(1u, sms / static_cast<unsigned>(size()));
  }
  // The physical device of member `i`.
  device_ref device(std::size_t i) const {
    return detail::element_at(devices_, i, "device_group::device", "members");
  }
  stream_ref stream(std::size_t i) const {
    return detail::element_at(stream_refs_, i, "device_group::stream", "members");
  }
  // True when the members' streams are the caller's (made with the streams constructor).
  bool borrows_streams() const noexcept { return streams_.empty() && !stream_refs_.empty(); }
  const std::vector<device_ref>& devices() const noexcept { return devices_; }

  // Member `i`'s resource, counted: cohort's buffers and most scratch (memory_held: what not).
  memory_resource_ref memory_resource(std::size_t i) const {
    detail::element_at(devices_, i, "device_group::memory_resource", "members");
    return memory_[i];
  }
  // From now on every member allocates from `resource` (which must outlive what it gives).
  // Refused (std::logic_error) while the group holds memory, but for the scratch release_scratch
  // gives back first: it goes back where it came from.
  void set_memory_resource(memory_resource_ref resource) {
    release_scratch();
    for (std::size_t i = 0; i < size(); ++i)
      if (memory_[i].usage().bytes != 0)
        throw std::logic_error("cohort::device_group::set_memory_resource: member " +
                               std::to_string(i) + " still holds " +
                               std::to_string(memory_[i].usage().bytes) +
                               " bytes from the current resource; set the resource before "
                               "making buffers over the group, or after they are gone.");
    for (std::size_t i = 0; i < size(); ++i)
      memory_[i].set_upstream(resource);
  }
  // The device memory cohort holds through member `i`'s resource now (buffers, kept scratch), and
  // the most it held at once; not what comes from the device's pool directly (a sort's kept runs,
  // a device_result's slots, a p2p_clique's state).
  memory_usage memory_held(std::size_t i) const {
    detail::element_at(devices_, i, "device_group::memory_held", "members");
    return memory_[i].usage();
  }
  // Gives the algorithms' kept scratch back now, on the members' streams.
  void release_scratch() noexcept {
    for (std::size_t i = 0; i < size(); ++i)
      cache_[i].release();
  }

  // Work enqueued on the members' streams from now on waits for what is already on `origin`.
  void fork(stream_ref origin) {
    const detail::nvtx_range range("fork", "%zu members from device %d", size(),
                                   origin.device().get());
    detail::require_stream(origin, "device_group::fork", "origin");
    event_ref mark = origin_event(origin.device());
    mark.record(origin);
    for (stream_ref s : stream_refs_)
      s.wait(mark);
  }

  // Work enqueued on `origin` from now on waits for what is already on every member's stream.
  void join(stream_ref origin) {
    const detail::nvtx_range range("join", "%zu members into device %d", size(),
                                   origin.device().get());
    detail::require_stream(origin, "device_group::join", "origin");
    for (std::size_t i = 0; i < size(); ++i) {
      member_events_[i].record(stream_refs_[i]);
      origin.wait(member_events_[i]);
    }
  }

  // A new stream of member `i`'s own (on its device, in its SM share where SMs are split), beside
  // the member's stream: for work that must run alongside it (a communication stream, say).
  cohort::stream new_stream(std::size_t i) const {
    const device_ref member =
        detail::element_at(devices_, i, "device_group::new_stream", "members");
    if (splits_sms()) return cohort::stream::adopt(member, sm_shares_[i].make_stream());
    return cohort::stream(member);
  }

  // Blocks the host until every member's stream is idle, then throws what an engine over the group
  // found broken while it ran (a p2p clique whose peer did not arrive: p2p_error). Refused while
  // a member's stream is being captured into a graph (there is nothing to wait for yet).
  void synchronize() const;

  // Enables peer access both ways between every pair of members that has a peer path; returns
  // whether every pair has one (always true for an emulated group).
  bool enable_peer_access() const { return enable_peer_access_among(devices_); }

 private:
  // Emulated, SMs shared: `devices` repeats one device.
  device_group(std::vector<device_ref> devices, std::vector<detail::sm_share> shares)
      : devices_(std::move(devices))
      , emulated_(true)
      , sm_shares_(std::move(shares)) {
    make_streams_and_events();
  }
  // Emulated, one member per SM share. (The count is read before the shares move: the order in
  // which a call's arguments are built is unspecified.)
  static device_group from_shares(device_ref device, std::vector<detail::sm_share> shares) {
    const std::size_t n = shares.size();
    return device_group(std::vector<device_ref>(n, device), std::move(shares));
  }

  void make_streams_and_events() {
    streams_.reserve(size());
    member_events_.reserve(size());
    for (std::size_t i = 0; i < size(); ++i) {
      if (splits_sms())
        streams_.push_back(new_stream(i));
      else
        streams_.emplace_back(devices_[i]);
      member_events_.emplace_back(devices_[i]);
    }
    stream_refs_.assign(streams_.begin(), streams_.end());
    make_memory();
  }

  void make_memory() {
    memory_ = std::make_unique<detail::tracking_resource[]>(size());
    cache_ = std::make_unique<detail::member_cache[]>(size());
    for (std::size_t i = 0; i < size(); ++i) {
      memory_[i].bind(devices_[i]);
      cache_[i].bind(devices_[i],
                     splits_sms() ? sm_shares_[i].sm_count() : detail::multiprocessors(devices_[i]),
                     memory_[i]);
    }
  }

  // One reusable event per origin device: re-recording it after the waits were enqueued is safe,
  // since cudaStreamWaitEvent captures the record current at the time of the call.
  event_ref origin_event(device_ref device) {
    for (cohort::event& e : origin_events_)
      if (e.device() == device) return e;
    origin_events_.emplace_back(device);
    return origin_events_.back();
  }

  std::vector<device_ref> devices_;
  bool emulated_ = false;
  // Declared before the streams so that streams made from a share are destroyed first.
  std::vector<detail::sm_share> sm_shares_;
  std::vector<cohort::stream> streams_; // the members' streams where the group made them
  std::vector<stream_ref> stream_refs_; // every member's stream, made or borrowed
  std::vector<cohort::event> member_events_;
  std::vector<cohort::event> origin_events_;
  // One per member, at a fixed address: buffers refer to it until they are freed.
  std::unique_ptr<detail::tracking_resource[]> memory_;
  // After the streams and resources, so that it goes first: its scratch goes back on them.
  std::unique_ptr<detail::member_cache[]> cache_;
  // Checked by synchronize (detail/group_watch.cuh); shared with the cliques that register.
  std::shared_ptr<detail::group_watch> watch_ = std::make_shared<detail::group_watch>();
};

// Every member checked first: a capturing member k is refused before members 0..k-1 are waited
// for.
inline void device_group::synchronize() const {
  detail::refuse_capture(*this, "device_group::synchronize",
                         "nothing runs until the graph is launched",
                         "Synchronize after the capture ends.");
  for (stream_ref s : stream_refs_)
    s.synchronize();
  if (watch_) watch_->check();
}

} // namespace cohort
