// cohort/execution/scoped_scratch_resource.cuh — scratch for the calls in a scope from a resource
// the caller gives, instead of the group's.
//
// The reductions, scans and sorts keep their scratch in the group between calls, from the group's
// memory resource. While a scoped_scratch_resource lives, a group's calls take their scratch from
// its resource instead: a caching allocator's memory for the calls of one step, say, given back to
// it when the scope ends. The buffers still come from the group's resource.
//
//   {
//     cohort::scoped_scratch_resource use(group, torch_scratch); // any async resource
//     auto sum = cohort::multi_device_reduce(group, x, 0.0f, cuda::std::plus<>{});
//     cohort::multi_device_inclusive_scan(group, x, cuda::std::plus<>{});
//   } // the scratch goes back to torch_scratch, on the members' streams
//
// The scratch a group kept from its own resource goes back when the scope begins; what the calls
// in the scope took goes back when it ends, on each member's stream after the work enqueued there,
// so the resource must outlive the scope (not the work). It counts in memory_held while it is
// held. Two exceptions stay with the device's pool, as they do with a group's resource: memory
// that other members read during a call (their resource may not let them), and a call captured
// into a graph (the graph allocates and frees its scratch). Scopes nest; the inner one's resource
// serves until it ends. A group is used from one host thread at a time, its scopes too.
#pragma once

#include "../memory/memory_resource.cuh"
#include "detail/group_access.cuh"
#include "detail/group_arguments.cuh"
#include "device_group.cuh"

#include <cstddef>
#include <optional>
#include <vector>

namespace cohort {

class scoped_scratch_resource {
 public:
  // From now on `group`'s calls take their scratch from `resource`. Refused (std::logic_error)
  // while a member's stream is being captured: begin the scope before the capture.
  scoped_scratch_resource(const device_group& group, memory_resource_ref resource)
      : group_(group) {
    detail::refuse_capture(group, "scoped_scratch_resource",
                           "the scratch the group holds cannot be given back inside a graph",
                           "Begin the scope before the capture.");
    before_.reserve(group.size());
    for (std::size_t i = 0; i < group.size(); ++i)
      before_.push_back(detail::group_memory_access::scope_scratch(group, i, resource));
  }
  // The scratch goes back to the resource, and the resource before serves again.
  ~scoped_scratch_resource() {
    for (std::size_t i = 0; i < before_.size(); ++i)
      detail::group_memory_access::scope_scratch(group_, i, before_[i]);
  }
  scoped_scratch_resource(const scoped_scratch_resource&) = delete;
  scoped_scratch_resource& operator=(const scoped_scratch_resource&) = delete;

 private:
  const device_group& group_;
  std::vector<std::optional<memory_resource_ref>> before_;
};

} // namespace cohort
