// cohort/training/loss_scaler.cuh — dynamic loss scaling for fp16 (half) training over
// gradient_buckets, as mixed-precision trainers run it: the loss is multiplied by a scale so that
// small gradients do not underflow half's range; a step whose gradients hold an inf or a NaN on
// any member is skipped by every member and the scale halves; after a run of clean steps it
// doubles. The decision is made on the GPUs: the host never waits for it.
//
//   __global__ void sgd(__half* w, const __half* g, std::size_t n, float rate,
//                       cohort::loss_scale_view loss_scale) {
//     if (loss_scale.skip()) return; // some member's gradients overflowed: every member skips
//     const float step = rate * loss_scale.inverse_scale(); // the unscaling, fused in the update
//     for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
//       w[k] = __float2half(__half2float(w[k]) - step * __half2float(g[k]));
//   }
//
//   cohort::gradient_buckets<__half> buckets(peers, {compute.begin(), compute.end()});
//   for (int l = 0; l < layers; ++l) buckets.add(gradients_of(l));
//   cohort::loss_scaler scaler(buckets, {.initial_scale = 65536.0f, .growth_interval = 2000});
//   for (int l = layers - 1; l >= 0; --l) {
//     backward(l, compute, scaler); // member i's loss gradient times scaler.view(i).scale()
//     buckets.ready(l);
//   }
//   scaler.update(buckets); // overflow checked, voted on by every member, scale updated
//   for (int l = 0; l < layers; ++l)
//     for (std::size_t i = 0; i < group.size(); ++i)
//       cohort::launch(compute[i], {.grid = 264, .block = 256}, sgd, weights_of(l)[i].data(),
//                      gradients_of(l)[i].data(), gradients_of(l)[i].size(), 0.01f,
//                      scaler.view(i));
//   buckets.finish();
//   const cohort::loss_scale_report seen = scaler.report(); // never waits
//   std::printf("scale %g, %llu of %llu steps skipped\n", seen.scale, seen.skipped, seen.steps);
//
// `update(buckets)` goes on each member's collectives stream (the clique's, or the one given
// with a communicator) after the buckets' collectives and the compute stream's work so far: a
// kernel raises the member's flag where its part of the reduced gradients (the whole bucket for
// all_reduce, its block for reduce_scatter) holds an inf or a NaN (a member's overflow survives
// the mean: inf and NaN propagate through the sum), one all_reduce (max) of one int per member
// over the buckets' own engine gives every member the same verdict, and a one-thread kernel
// turns it into the step's verdict and the next scale on every member alike. The compute streams
// wait for it, so kernels enqueued there afterwards read it through `view(i)`: `skip()`, and
// `inverse_scale()` to unscale the gradients where they are read anyway (the optimizer);
// `scale()` is the next backward's multiplier. Member 0's update also writes the scale and the
// counters to pinned host memory, which `report()` reads without waiting: the values of the last
// update the GPU finished (synchronize a compute stream first for those of every update enqueued).
//
// Over a communicator (one process per GPU) `update` is a collective: every process calls it at
// the same point of its step. The scaler keeps the buckets' compute streams; they, the clique or
// communicator and the gradients' memory must outlive it, and a graph that captured `update` must
// not be launched once the scaler is gone. Every argument is checked before anything is enqueued.
#pragma once

#include "../communication/operators.cuh"
#include "../detail/arguments.cuh"
#include "../detail/nvtx.cuh"
#include "../errors/argument_error.cuh"
#include "../execution/launch.cuh"
#include "../memory/detail/pinned_slots.cuh"
#include "../memory/device_buffer.cuh"
#include "../streams/event.cuh"
#include "../streams/stream_ref.cuh"
#include "detail/bucket_checks.cuh"
#include "detail/bucket_engines.cuh"
#include "detail/loss_scale_kernels.cuh"
#include "gradient_buckets.cuh"

#include <cuda/std/span>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cohort {

struct loss_scale_options {
  float initial_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;      // the scale's factor after `growth_interval` clean steps
  float backoff_factor = 0.5f;     // its factor after a step that overflowed
  unsigned growth_interval = 2000; // clean steps in a row before the scale grows
  float min_scale = 1.0f;          // the scale never falls below this
  float max_scale = 16777216.0f;   // nor grows above this (2^24)
};

// What the host sees of the scaler (member 0's state after the last update the GPU finished).
struct loss_scale_report {
  float scale;                // what the next backward multiplies its loss by
  unsigned long long steps;   // updates made
  unsigned long long skipped; // steps skipped (an inf or a NaN in some member's gradients)
  bool last_skipped;          // whether the last update skipped its step
};

class loss_scaler;

// A member's scaler state as its kernels read it on the device; pass it by value. A default view
// stands for no scaler (scale 1, nothing skipped), so one kernel serves scaled and plain runs.
class loss_scale_view {
 public:
  loss_scale_view() = default;
  // The next backward's multiplier for the loss (its gradient).
  __device__ float scale() const { return state_ != nullptr ? state_->scale : 1.0f; }
  // 1 / the scale the gradients of the last update were made with: multiply them by it.
  __device__ float inverse_scale() const {
    return state_ != nullptr ? state_->inverse_scale : 1.0f;
  }
  // Whether the last update found an inf or a NaN in some member's gradients: skip the step.
  __device__ bool skip() const { return state_ != nullptr && state_->skip != 0; }

 private:
  friend class loss_scaler;
  explicit loss_scale_view(const detail::training::loss_scale_state* state)
      : state_(state) {}
  const detail::training::loss_scale_state* state_ = nullptr;
};

namespace detail::training {

// The engine a gradient_buckets runs its collectives on, which the scaler's vote runs on too.
struct bucket_access {
  template <class T>
  static const engine& engine_of(const gradient_buckets<T>& buckets) {
    return buckets.engine_;
  }
};

inline loss_scale_rules checked_rules(const loss_scale_options& o) {
  constexpr const char* function = "loss_scaler";
  const auto positive = [&](float v, const char* name) {
    require_argument(std::isfinite(v) && v > 0.0f, function, name, [&] {
      return "is " + std::to_string(v) + "; it must be positive and finite.";
    });
  };
  positive(o.initial_scale, "options.initial_scale");
  positive(o.min_scale, "options.min_scale");
  positive(o.max_scale, "options.max_scale");
  require_argument(std::isfinite(o.growth_factor) && o.growth_factor > 1.0f, function,
                   "options.growth_factor", [&] {
                     return "is " + std::to_string(o.growth_factor) +
                            "; it must be finite and above 1 (the scale grows by it).";
                   });
  require_argument(o.backoff_factor > 0.0f && o.backoff_factor < 1.0f, function,
                   "options.backoff_factor", [&] {
                     return "is " + std::to_string(o.backoff_factor) +
                            "; it must lie between 0 and 1 (the scale shrinks by it).";
                   });
  require_argument(o.growth_interval > 0, function, "options.growth_interval",
                   "is 0; the scale grows after at least one clean step.");
  require_argument(o.min_scale <= o.initial_scale && o.initial_scale <= o.max_scale, function,
                   "options.initial_scale", [&] {
                     return "is " + std::to_string(o.initial_scale) + "; it must lie within [" +
                            std::to_string(o.min_scale) + ", " + std::to_string(o.max_scale) +
                            "] (options.min_scale, options.max_scale).";
                   });
  return {o.growth_factor, o.backoff_factor, o.min_scale, o.max_scale, o.growth_interval};
}

} // namespace detail::training

class loss_scaler {
 public:
  // A scaler for `buckets`' members: its state on each member's device, beside the compute
  // streams the buckets were given.
  template <class T>
  explicit loss_scaler(const gradient_buckets<T>& buckets, loss_scale_options options = {})
      : options_(options)
      , rules_(detail::training::checked_rules(options)) {
    for (std::size_t i = 0; i < buckets.members(); ++i) {
      const stream_ref s = buckets.compute_stream(i);
      compute_.push_back(s);
      states_.emplace_back(1, s);
      before_.emplace_back(s.device());
      after_.emplace_back(s.device());
      launch(s, {.name = "loss_scaler (initial state)"},
             detail::training::initialize_scale<detail::training::loss_scale_state>,
             states_.back().data(), options.initial_scale);
    }
    // Last: nothing after it can throw and leave the slot taken.
    host_ = static_cast<detail::training::loss_scale_host_copy*>(
        detail::pinned_slots::instance().take());
    *host_ = {0, 0, 0, options.initial_scale, 0};
  }

  loss_scaler(loss_scaler&& other) noexcept
      : options_(other.options_)
      , rules_(other.rules_)
      , compute_(std::move(other.compute_))
      , states_(std::move(other.states_))
      , before_(std::move(other.before_))
      , after_(std::move(other.after_))
      , updated_(other.updated_)
      , host_(std::exchange(other.host_, nullptr)) {}
  loss_scaler& operator=(loss_scaler&&) = delete;
  loss_scaler(const loss_scaler&) = delete;
  loss_scaler& operator=(const loss_scaler&) = delete;

  // Waits for member 0's last update, which writes the host's copy, before that pinned memory
  // goes back to cohort's pool; the state's memory is freed in each compute stream's order.
  ~loss_scaler() {
    if (host_ == nullptr) return;
    try {
      if (updated_) after_[0].synchronize();
    } catch (...) { // the GPU may still write the slot: it is never handed out again (256 B lost)
      return;
    }
    detail::pinned_slots::instance().give_back(host_);
  }

  // This step's verdict and the next scale, from the reduced gradients of every bucket of
  // `buckets` (the ones the scaler was made for: the same compute streams), after all the work
  // enqueued so far on their compute and collectives streams; the compute streams wait for it.
  template <class T>
  void update(const gradient_buckets<T>& buckets) {
    static_assert(detail::training::checkable_float<T>,
                  "cohort::loss_scaler checks half, bfloat16, float and double gradients.");
    constexpr const char* function = "loss_scaler::update";
    require_alive(function);
    detail::require_argument(buckets.members() == members(), function, "buckets", [&] {
      return "has " + std::to_string(buckets.members()) + " members; this scaler was made for " +
             std::to_string(members()) + ": make the scaler from these buckets.";
    });
    for (std::size_t i = 0; i < members(); ++i)
      detail::require_argument(buckets.compute_stream(i) == compute_[i], function, "buckets", [&] {
        return "member " + std::to_string(i) +
               "'s compute stream is not the one this scaler was made with (its state is "
               "ordered on it): make the scaler from these buckets.";
      });
    detail::require_argument(buckets.size() > 0, function, "buckets",
                             "holds no buckets: add the gradients before the first update.");
    const detail::training::engine& engine = detail::training::bucket_access::engine_of(buckets);
    std::visit([&](const auto& e) { detail::training::require_launchable(e, compute_, function); },
               engine);
    const detail::nvtx_range range("loss_scaler::update", "%zu buckets, %zu members",
                                   buckets.size(), members());
    std::visit(
        [&](const auto& e) {
          for (std::size_t i = 0; i < members(); ++i) {
            before_[i].record(compute_[i]);
            e.stream(i).wait(before_[i]);
            check(e.stream(i), buckets, i);
          }
          vote(e, flags());
          updated_ = true;
          for (std::size_t i = 0; i < members(); ++i) {
            launch(e.stream(i), {.name = "loss_scaler (update)"},
                   detail::training::update_scale<detail::training::loss_scale_state>,
                   states_[i].data(), rules_, i == 0 ? host_ : nullptr);
            after_[i].record(e.stream(i));
            compute_[i].wait(after_[i]);
          }
        },
        engine);
  }

  // Member `member`'s state for its kernels on its compute stream.
  loss_scale_view view(std::size_t member) const {
    return loss_scale_view(
        detail::element_at(states_, member, "loss_scaler::view", "members").data());
  }

  // The scale and the counters as of the last update the GPU finished; never waits.
  loss_scale_report report() const {
    require_alive("loss_scaler::report");
    const volatile detail::training::loss_scale_host_copy* in = host_;
    for (;;) {
      const unsigned long long sequence = in->sequence;
      if (sequence % 2 != 0) continue; // member 0's update is writing it
      std::atomic_thread_fence(std::memory_order_acquire);
      const loss_scale_report seen{in->scale, in->steps, in->skipped, in->last_skipped != 0};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (in->sequence == sequence) return seen;
    }
  }

  std::size_t members() const noexcept { return compute_.size(); }
  const loss_scale_options& options() const noexcept { return options_; }

 private:
  void require_alive(const char* function) const {
    detail::require_argument(host_ != nullptr, function, "this", "the scaler was moved away.");
  }

  // Member i's flag, one int of its state, for the vote.
  std::vector<cuda::std::span<int>> flags() {
    std::vector<cuda::std::span<int>> out;
    for (auto& s : states_)
      out.emplace_back(&s.data()->found, 1);
    return out;
  }

  // The vote: every member's flag becomes the largest. The p2p engine's options are the
  // buckets' (an algorithm they force need not suit one int): the flag takes the defaults.
  static void vote(const detail::training::p2p_engine& e,
                   const std::vector<cuda::std::span<int>>& flags) {
    cohort::all_reduce(*e.peers, flags, cohort::max);
  }
  template <class Engine>
  static void vote(const Engine& e, const std::vector<cuda::std::span<int>>& flags) {
    e.all_reduce(flags, cohort::max);
  }

  // Member i's flag raised where its part of any bucket holds an inf or a NaN: one launch for up
  // to spans_per_check buckets.
  template <class T>
  void check(stream_ref stream, const gradient_buckets<T>& buckets, std::size_t i) {
    using detail::training::check_threads;
    detail::training::span_batch<T> batch{};
    std::size_t elements = 0;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const cuda::std::span<T> part = buckets.shard(b, i);
      batch.data[batch.used] = part.data();
      batch.count[batch.used] = part.size();
      elements += part.size();
      if (++batch.used < detail::training::spans_per_check && b + 1 < buckets.size()) continue;
      // A block reads 16 bytes a thread per pass; at most 1024 blocks (their loop covers more).
      const std::size_t per_block = std::size_t{check_threads} * (16 / sizeof(T));
      const std::size_t blocks = (elements + per_block - 1) / per_block;
      launch(stream,
             {.grid = static_cast<unsigned>(blocks < 1024 ? blocks : 1024),
              .block = check_threads,
              .name = "loss_scaler (overflow check)"},
             detail::training::flag_non_finite<T>, batch, states_[i].data());
      batch = {};
      elements = 0;
    }
  }

  loss_scale_options options_;
  detail::training::loss_scale_rules rules_;
  std::vector<stream_ref> compute_;
  std::vector<device_buffer<detail::training::loss_scale_state>> states_;
  std::vector<event> before_; // on the compute streams: the check follows their work
  std::vector<event> after_;  // on the collectives streams, after the update
  bool updated_ = false;
  detail::training::loss_scale_host_copy* host_ = nullptr;
};

} // namespace cohort
