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
// An *emulated* group runs N logical devices on one physical GPU, each with its own stream, so that
// multi-GPU code runs and is tested on one GPU. It is always asked for by name and says so:
//
//   auto group = cohort::device_group::emulated(cohort::device_ref{0}, 4);
//   assert(group.is_emulated() && group.size() == 4);
//
// A group is used from one host thread at a time.
#pragma once

#include "../devices/device_ref.cuh"
#include "../devices/topology.cuh"
#include "../streams/event.cuh"
#include "../streams/stream.cuh"

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace cohort {

class device_group {
public:
  // A group of distinct real devices, in the given order. Rejects an empty list, a device out of
  // range and a device listed twice.
  explicit device_group(const std::vector<device_ref>& devices) : devices_(devices) {
    detail::require_argument(!devices.empty(), "device_group", "devices",
                             "the list is empty; a group needs at least one device.");
    for (std::size_t i = 0; i < devices.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j)
        if (devices[j] == devices[i])
          detail::throw_invalid_argument(
              "device_group", "devices",
              "device " + std::to_string(devices[i].get()) + " is listed twice (positions " +
                  std::to_string(j) + " and " + std::to_string(i) +
                  "). Use cohort::device_group::emulated(device, n) to run several logical "
                  "devices on one GPU.");
    }
    for (device_ref d : devices)
      detail::require_valid_device(d, "device_group", "devices");
    make_streams_and_events();
  }
  device_group(std::initializer_list<device_ref> devices)
      : device_group(std::vector<device_ref>(devices)) {}

  // `n` logical devices on the one physical `device`, each with its own stream.
  static device_group emulated(device_ref device, std::size_t n) {
    detail::require_argument(n > 0, "device_group::emulated", "n",
                             "a group needs at least one logical device.");
    detail::require_valid_device(device, "device_group::emulated", "device");
    return device_group(std::vector<device_ref>(n, device), emulated_tag{});
  }

  device_group(device_group&&) noexcept = default;
  device_group& operator=(device_group&&) noexcept = default;
  device_group(const device_group&) = delete;
  device_group& operator=(const device_group&) = delete;

  std::size_t size() const noexcept { return devices_.size(); }
  // True when several members share one physical GPU (made by `emulated`).
  bool is_emulated() const noexcept { return emulated_; }
  // The physical device of member `i`.
  device_ref device(std::size_t i) const { return devices_.at(i); }
  stream_ref stream(std::size_t i) const { return streams_.at(i); }
  const std::vector<device_ref>& devices() const noexcept { return devices_; }

  // Work enqueued on the members' streams from now on waits for what is already on `origin`.
  void fork(stream_ref origin) {
    event_ref mark = origin_event(origin.device());
    mark.record(origin);
    for (const cohort::stream& s : streams_)
      s.wait(mark);
  }

  // Work enqueued on `origin` from now on waits for what is already on every member's stream.
  void join(stream_ref origin) {
    for (std::size_t i = 0; i < size(); ++i) {
      member_events_[i].record(streams_[i]);
      origin.wait(member_events_[i]);
    }
  }

  // Blocks the host until every member's stream is idle.
  void synchronize() const {
    for (const cohort::stream& s : streams_)
      s.synchronize();
  }

  // Enables peer access both ways between every pair of members that has a peer path; returns
  // whether every pair has one (always true for an emulated group).
  bool enable_peer_access() const { return enable_peer_access_among(devices_); }

private:
  struct emulated_tag {};
  device_group(std::vector<device_ref> devices, emulated_tag)
      : devices_(std::move(devices)), emulated_(true) {
    make_streams_and_events();
  }

  void make_streams_and_events() {
    streams_.reserve(size());
    member_events_.reserve(size());
    for (device_ref d : devices_) {
      streams_.emplace_back(d);
      member_events_.emplace_back(d);
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
  std::vector<cohort::stream> streams_;
  std::vector<cohort::event> member_events_;
  std::vector<cohort::event> origin_events_;
};

} // namespace cohort
