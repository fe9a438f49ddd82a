// cohort/execution/detail/group_watch.cuh — what device_group::synchronize checks once its
// members' streams are idle: engines over the group whose kernels can fail without a CUDA error
// (a p2p clique whose barrier gave up on a peer) register a check here, which throws what broke.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace cohort::detail {

class group_watch {
 public:
  // Registers `check`; returns the key that removes it.
  std::size_t add(std::function<void()> check) {
    const std::lock_guard lock(mutex_);
    checks_.emplace_back(++last_key_, std::move(check));
    return last_key_;
  }
  void remove(std::size_t key) noexcept {
    const std::lock_guard lock(mutex_);
    std::erase_if(checks_, [&](const auto& c) { return c.first == key; });
  }
  // Every check, in the order registered; the first that throws ends it.
  void check() const {
    std::vector<std::function<void()>> checks;
    {
      const std::lock_guard lock(mutex_);
      if (checks_.empty()) return; // most groups: nothing to copy
      for (const auto& c : checks_)
        checks.push_back(c.second);
    }
    for (const auto& c : checks)
      c();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::function<void()>>> checks_;
  std::size_t last_key_ = 0;
};

} // namespace cohort::detail
