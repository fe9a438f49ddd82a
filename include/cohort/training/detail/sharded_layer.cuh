// cohort/training/detail/sharded_layer.cuh — one layer of sharded_parameters: the members'
// shards, the transient buffers it holds between a gather and their release, the events that
// order the compute streams and the collectives' streams around them, and the checks of its
// state (texts built only on a failure).
#pragma once

#include "../../detail/arguments.cuh"
#include "../../devices/scoped_device.cuh"
#include "../../errors/argument_error.cuh"
#include "../../errors/cuda_error.cuh"
#include "../../memory/device_buffer.cuh"
#include "../../memory/memory_resource.cuh"
#include "../../streams/event.cuh"
#include "../../streams/stream_ref.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace cohort::detail::training {

template <class T>
class sharded_layer {
 public:
  std::size_t count;  // the layer's parameters
  std::size_t padded; // a shard times the ranks: what a gathered buffer holds
  std::vector<cuda::std::span<T>> weights, gradients; // member i's shards (gradients: maybe none)
  // Held from a gather to its release (weights) or to the gradients' reduction; each freed on the
  // collectives' stream it was allocated on, after that stream waited for the compute stream.
  std::vector<device_buffer<T>> full_weights, full_gradients;
  bool waited = false; // the compute streams waited for the gather that holds full_weights

  sharded_layer(std::size_t count_, std::size_t shard, std::size_t ranks,
                std::vector<cuda::std::span<T>> weights_,
                std::vector<cuda::std::span<T>> gradients_, std::vector<stream_ref> compute,
                std::vector<stream_ref> collectives)
      : count(count_)
      , padded(shard * ranks)
      , weights(std::move(weights_))
      , gradients(std::move(gradients_))
      , compute_(std::move(compute))
      , collectives_(std::move(collectives)) {
    for (stream_ref s : compute_) {
      handed_.emplace_back(s.device());
      done_.emplace_back(s.device());
    }
  }
  sharded_layer(sharded_layer&&) noexcept = default;
  sharded_layer& operator=(sharded_layer&&) = delete;
  // What is still held is freed after the compute streams' work so far; never throws.
  ~sharded_layer() {
    if (!gathered() && !holds_gradients()) return;
    try {
      after_compute();
    } catch (...) { // the device is gone or the context lost: nothing is left to order
    }
  }

  bool gathered() const noexcept { return !full_weights.empty(); }
  bool holds_gradients() const noexcept { return !full_gradients.empty(); }

  // Member i's collectives' stream waits for the work on its compute stream so far.
  void after_compute() {
    for (std::size_t i = 0; i < compute_.size(); ++i) {
      handed_[i].record(compute_[i]);
      collectives_[i].wait(handed_[i]);
    }
  }
  // After the layer's last collective, on every collectives' stream.
  void record_done() {
    for (std::size_t i = 0; i < compute_.size(); ++i)
      done_[i].record(collectives_[i]);
  }
  // The compute streams wait for the layer's last collective.
  void wait_done() {
    for (std::size_t i = 0; i < compute_.size(); ++i)
      compute_[i].wait(done_[i]);
    waited = gathered();
  }

  // Member i's buffers on its collectives' stream from `from[i]`: the weights', and the
  // gradients' too where asked (their padding zeroed, so that it reduces to zero). Running out of
  // memory on a member frees, on their streams, what the members before it got.
  void allocate(const std::vector<memory_resource_ref>& from, bool with_gradients) {
    std::vector<device_buffer<T>> w, g;
    for (std::size_t i = 0; i < collectives_.size(); ++i) {
      const stream_ref on = collectives_[i];
      w.emplace_back(padded, on, from[i]);
      if (!with_gradients) continue;
      g.emplace_back(padded, on, from[i]);
      if (padded == count) continue;
      const scoped_device device(on.device());
      check_cuda(cudaMemsetAsync(g.back().data() + count, 0, (padded - count) * sizeof(T),
                                 on.native_handle()),
                 "cudaMemsetAsync (sharded_parameters::gather)", on.device().get());
    }
    full_weights = std::move(w);
    if (with_gradients) full_gradients = std::move(g);
  }

  // The whole (padded) spans of the members' buffers, as the collectives take them.
  static std::vector<cuda::std::span<T>> spans_of(std::vector<device_buffer<T>>& buffers) {
    std::vector<cuda::std::span<T>> s;
    for (device_buffer<T>& b : buffers)
      s.push_back(b.span());
    return s;
  }

  // The state checks, `layer` being this layer's index and `function` the call's name.
  void require_gatherable(std::size_t layer, bool backward, const char* function) const {
    require_argument(!gathered(), function, "layer", [&] {
      return std::to_string(layer) + " is gathered already: release(" + std::to_string(layer) +
             ") it first.";
    });
    if (!backward) return;
    require_argument(!gradients.empty(), function, "purpose", [&] { return no_gradients(layer); });
    require_argument(!holds_gradients(), function, "layer", [&] {
      return std::to_string(layer) + "'s gradients of its last backward gather are not reduced " +
             "yet: call reduce_gradients(" + std::to_string(layer) + ") first.";
    });
  }
  void require_gathered(std::size_t layer, const char* function) const {
    require_argument(gathered(), function, "layer", [&] {
      return std::to_string(layer) + " is not gathered: call gather(" + std::to_string(layer) +
             ") first (a layer is released once a gather).";
    });
  }
  // The compute streams may use the transient buffers now.
  void require_readable(std::size_t layer, const char* function) const {
    require_gathered(layer, function);
    require_argument(waited, function, "layer", [&] {
      return std::to_string(layer) + " is gathered but the compute streams have not waited for " +
             "it: call wait(" + std::to_string(layer) +
             ") first (the all-gather may still be writing).";
    });
  }
  void require_gradient_buffer(std::size_t layer, const char* function) const {
    require_argument(holds_gradients(), function, "layer", [&] {
      return std::to_string(layer) + " holds no gradient buffer: gather it with " +
             "gather_for::backward first (its gradients are reduced once a gather).";
    });
  }
  void require_gradient_shards(std::size_t layer, const char* function) const {
    require_argument(!gradients.empty(), function, "layer", [&] { return no_gradients(layer); });
  }

 private:
  static std::string no_gradients(std::size_t layer) {
    return "layer " + std::to_string(layer) +
           " was added without gradient shards: it can only be gathered for the forward.";
  }

  std::vector<stream_ref> compute_, collectives_;
  std::vector<event> handed_; // on the compute streams: their work before a collective or a free
  std::vector<event> done_;   // on the collectives' streams: after the layer's last collective
};

} // namespace cohort::detail::training
