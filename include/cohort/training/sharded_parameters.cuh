// cohort/training/sharded_parameters.cuh — ZeRO stage 3: every member holds a shard of each
// layer's weights (1/size() of them), and a layer's whole weights live only while it computes:
// all-gathered into a transient buffer on the collectives' stream while the layer before still
// runs, released after. Its gradients are reduce-scattered into each member's gradient shard, so
// that gradients, optimizer state and weights all take about 1/n of a GPU's memory. The
// collectives run on cohort's p2p engine, an NCCL clique, or this process's rank of an NCCL
// communicator, as gradient_buckets' do.
//
//   cohort::p2p_clique peers(group);                // its collectives run on group.stream(i)
//   std::vector<cohort::stream> compute;            // the model runs beside them
//   std::vector<cohort::memory_resource_ref> memory; // the transient buffers, counted by the group
//   for (std::size_t i = 0; i < group.size(); ++i) {
//     compute.push_back(group.new_stream(i));
//     memory.push_back(group.memory_resource(i));
//   }
//   cohort::sharded_parameters<__nv_bfloat16> params(peers, {compute.begin(), compute.end()},
//                                                    {.memory = memory});
//   for (int l = 0; l < layers; ++l)  // member i's spans: params.shard_size(count_of(l)) elements
//     params.add(count_of(l), weight_shards_of(l), gradient_shards_of(l));
//   params.gather(0);
//   for (int l = 0; l < layers; ++l) {
//     if (l + 1 < layers) params.gather(l + 1); // the next layer's all-gather runs while l computes
//     params.wait(l);                           // the compute streams wait for layer l's weights
//     forward(l, params, compute);              // reads params.full(l, i) on compute[i]
//     params.release(l);                        // freed once the compute streams are done with it
//   }
//   params.gather(layers - 1, cohort::gather_for::backward);
//   for (int l = layers - 1; l >= 0; --l) {
//     if (l > 0) params.gather(l - 1, cohort::gather_for::backward);
//     params.wait(l);
//     backward(l, params, compute);  // writes params.full_gradients(l, i), reads params.full(l, i)
//     params.reduce_gradients(l);    // the mean of block i into member i's gradient shard
//     params.release(l);
//   }
//   for (int l = 0; l < layers; ++l) {
//     params.wait(l);                // the compute streams wait for layer l's gradient shards
//     for (std::size_t i = 0; i < group.size(); ++i)
//       update(params.shard(l, i), params.gradient_shard(l, i), compute[i]);
//   }
//   params.finish();
//
// Shards. A layer of `count` parameters is cut into ranks() blocks of shard_size(count) elements
// (count / ranks() rounded up to 16 bytes); member i holds the block of its rank, elements
// [rank * block, (rank + 1) * block) of the layer. The last blocks run past `count`: their
// padding is gathered and reduced with the rest and shown by neither full() nor full_gradients().
//
// Ordering. `gather(l)` makes the collectives' stream wait for the compute streams' work so far
// (the update of the shards), then allocates the transient buffer there, from `options.memory`
// (inside a graph capture, from the device's pool: the graph allocates and frees it) and
// all-gathers the shards into it: call it before enqueuing the layer it should overlap. `wait(l)`
// makes the compute streams wait for layer l's last collective (its gather, or its gradients'
// reduction); `full(l, i)` is refused until the compute streams waited for the gather.
// `release(l)` makes the collectives' stream wait for the compute streams and frees the buffer
// there, so the next gather reuses its memory; `reduce_gradients(l)` does the same with the
// gradients' buffer after their reduce-scatter. `finish()` joins the two streams of every member
// both ways (under a capture of the group's streams, first: it brings the compute streams in).
// Every layer gathered inside a capture must be released inside it. Every argument and the
// layer's state (full() before a gather, a second gather or release, ...) is checked before
// anything is enqueued (the communicator form's `collectives` stream, empty or of another device
// than the communicator's, by the constructor).
// The compute streams, the clique or communicator and the shards' memory must outlive the
// parameters; over the p2p engine, `options.memory` must give memory the peers
// can reach (the device's pool, and a group's resources over it, once the clique is made).
#pragma once

#include "../detail/arguments.cuh"
#include "../detail/nvtx.cuh"
#include "../detail/one_capture.cuh"
#include "../errors/argument_error.cuh"
#include "../memory/device_buffer.cuh"
#include "../memory/memory_resource.cuh"
#include "../streams/event.cuh"
#include "../streams/stream_ref.cuh"
#include "detail/bucket_checks.cuh"
#include "detail/bucket_engines.cuh"
#include "detail/shard_checks.cuh"
#include "detail/sharded_layer.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace cohort {

// What gather(l) makes room for: the weights alone (the forward), or also a buffer for the
// layer's whole gradients (full_gradients), which reduce_gradients(l) reduce-scatters and frees.
enum class gather_for { forward, backward };

struct sharded_parameter_options {
  // The gradients' mean over the ranks (each rank's gradient being the mean over its part of the
  // batch), else their sum.
  bool average = true;
  // The peer-to-peer engine's options: half and bfloat16 gradients are summed in float and
  // rounded once. (NCCL reduces them its own way.)
  p2p_options p2p = {.accumulate_in_float = true};
  // Member i's transient buffers come from memory[i] (a group's memory_resource(i) counts them
  // in memory_held(i)); none given: from each device's pool.
  std::vector<memory_resource_ref> memory = {};
};

template <class T>
class sharded_parameters {
 public:
  // `compute[i]`: the stream of member i that runs the model; the collectives run on the clique's.
  sharded_parameters(p2p_clique& peers, std::vector<stream_ref> compute,
                     sharded_parameter_options options = {})
      : sharded_parameters(detail::training::p2p_engine{&peers, options.p2p}, std::move(compute),
                           std::move(options)) {}
#if defined(COHORT_WITH_NCCL) && COHORT_WITH_NCCL
  // Over NCCL, one process driving every GPU.
  sharded_parameters(nccl_clique& nccl, std::vector<stream_ref> compute,
                     sharded_parameter_options options = {})
      : sharded_parameters(detail::training::nccl_clique_engine{&nccl}, std::move(compute),
                           std::move(options)) {}
  // Over NCCL, one process per GPU: this process is the one member, holding the shard of rank
  // comm.rank(); the collectives run on `collectives`, a stream of its device other than `compute`.
  sharded_parameters(communicator& comm, stream_ref collectives, stream_ref compute,
                     sharded_parameter_options options = {})
      : sharded_parameters(detail::training::communicator_engine{&comm, collectives},
                           std::vector<stream_ref>{compute}, std::move(options)) {}
#endif

  // Moves leave the source empty. Destroyed, whatever is still gathered is freed after the compute
  // streams' work so far.
  sharded_parameters(sharded_parameters&&) noexcept = default;
  sharded_parameters& operator=(sharded_parameters&&) noexcept = default;

  // Elements of a shard (per member) of a layer of `count` parameters.
  std::size_t shard_size(std::size_t count) const noexcept {
    return detail::training::shard_elements<T>(count, ranks());
  }

  // A new layer of `count` parameters, returned by its index (0, 1, ... in the order added):
  // `weights[i]` is member i's shard of its weights, `gradients[i]` where member i's shard of its
  // reduced gradients goes (none: the layer is only ever gathered for the forward); each span on
  // its member's device, shard_size(count) elements, apart from every other span given.
  std::size_t add(std::size_t count, std::vector<cuda::std::span<T>> weights,
                  std::vector<cuda::std::span<T>> gradients = {}) {
    const std::size_t block = shard_size(count);
    std::visit(
        [&](const auto& e) {
          detail::training::require_new_layer(e, layers_.size(), count, block, weights, gradients,
                                              taken_);
        },
        engine_);
    std::vector<stream_ref> collectives;
    for (std::size_t i = 0; i < members(); ++i)
      collectives.push_back(collectives_of(i));
    layers_.emplace_back(count, block, ranks(), std::move(weights), std::move(gradients), compute_,
                         std::move(collectives));
    return layers_.size() - 1;
  }

  std::size_t size() const noexcept {
    return layers_.size();
  }
  std::size_t members() const noexcept {
    return compute_.size();
  }
  // The ranks the layers are sharded over (members() but for one process of a communicator).
  std::size_t ranks() const noexcept {
    return std::visit([](const auto& e) { return e.ranks(); }, engine_);
  }
  stream_ref compute_stream(std::size_t member) const {
    return detail::element_at(compute_, member, "sharded_parameters::compute_stream", "members");
  }
  std::size_t count(std::size_t layer) const {
    return at(layer, "sharded_parameters::count").count;
  }
  // Whether layer `layer` is gathered (between gather and release).
  bool gathered(std::size_t layer) const {
    return at(layer, "sharded_parameters::gathered").gathered();
  }
  cuda::std::span<T> shard(std::size_t layer, std::size_t member) const {
    constexpr const char* function = "sharded_parameters::shard";
    return detail::element_at(at(layer, function).weights, member, function, "members");
  }
  cuda::std::span<T> gradient_shard(std::size_t layer, std::size_t member) const {
    constexpr const char* function = "sharded_parameters::gradient_shard";
    const layer_state& l = at(layer, function);
    l.require_gradient_shards(layer, function);
    return detail::element_at(l.gradients, member, function, "members");
  }

  // Member `member`'s whole weights of layer `layer` (count(layer) elements), once the compute
  // streams waited for its gather.
  cuda::std::span<T> full(std::size_t layer, std::size_t member) {
    constexpr const char* function = "sharded_parameters::full";
    layer_state& l = at(layer, function);
    l.require_readable(layer, function);
    return detail::element_at(l.full_weights, member, function, "members").span().first(l.count);
  }
  // Member `member`'s buffer for layer `layer`'s whole gradients (count(layer) elements), between
  // gather(layer, gather_for::backward), waited for, and reduce_gradients(layer).
  cuda::std::span<T> full_gradients(std::size_t layer, std::size_t member) {
    constexpr const char* function = "sharded_parameters::full_gradients";
    layer_state& l = at(layer, function);
    l.require_readable(layer, function);
    l.require_gradient_buffer(layer, function);
    return detail::element_at(l.full_gradients, member, function, "members").span().first(l.count);
  }

  // Layer `layer`'s shards all-gathered into a transient buffer on every member, on the
  // collectives' streams after the compute streams' work so far; with gather_for::backward, a
  // buffer for its whole gradients too (its padding zeroed).
  void gather(std::size_t layer, gather_for purpose = gather_for::forward) {
    constexpr const char* function = "sharded_parameters::gather";
    layer_state& l = at(layer, function);
    l.require_gatherable(layer, purpose == gather_for::backward, function);
    require_launchable(function);
    const detail::nvtx_range range(function, "layer %zu, %zu elements", layer, l.count);
    l.after_compute(); // first: a collectives' stream joins its compute stream's capture here
    l.allocate(resources(), purpose == gather_for::backward);
    try {
      std::visit([&](const auto& e) { e.all_gather(l.weights, l.spans_of(l.full_weights)); },
                 engine_);
    } catch (...) { // nothing reads the buffers: they go back, and the layer is as it was
      l.full_weights.clear();
      l.full_gradients.clear();
      throw;
    }
    l.waited = false;
    l.record_done();
  }

  // Every compute stream waits for layer `layer`'s last collective (its gather or its gradients'
  // reduction).
  void wait(std::size_t layer) {
    at(layer, "sharded_parameters::wait").wait_done();
  }

  // Layer `layer`'s whole gradients, written on the compute streams, reduce-scattered into the
  // members' gradient shards on the collectives' streams; their buffer is freed there after.
  void reduce_gradients(std::size_t layer) {
    constexpr const char* function = "sharded_parameters::reduce_gradients";
    layer_state& l = at(layer, function);
    l.require_gradient_buffer(layer, function);
    require_launchable(function);
    const detail::nvtx_range range(function, "layer %zu, %zu elements", layer, l.count);
    l.after_compute();
    auto reduce = [&](auto op) {
      std::visit(
          [&](const auto& e) { e.reduce_scatter(l.spans_of(l.full_gradients), l.gradients, op); },
          engine_);
    };
    if (options_.average)
      reduce(avg);
    else
      reduce(sum);
    l.record_done();
    l.full_gradients.clear(); // freed on the collectives' streams, after the reduction
  }

  // The compute streams are done with layer `layer`'s weights (all enqueued there so far): its
  // transient buffer is freed on the collectives' streams after that work.
  void release(std::size_t layer) {
    constexpr const char* function = "sharded_parameters::release";
    layer_state& l = at(layer, function);
    l.require_gathered(layer, function);
    require_launchable(function);
    const detail::nvtx_range range(function, "layer %zu", layer);
    l.after_compute();
    l.full_weights.clear();
    l.waited = false;
  }

  // Every member's compute stream waits for everything enqueued on its collectives' stream so
  // far, and the collectives' stream for everything on the compute stream.
  void finish() {
    for (std::size_t i = 0; i < members(); ++i) {
      end_of_collectives_[i].record(collectives_of(i));
      compute_[i].wait(end_of_collectives_[i]);
      end_of_compute_[i].record(compute_[i]);
      collectives_of(i).wait(end_of_compute_[i]);
    }
  }

 private:
  using layer_state = detail::training::sharded_layer<T>;

  sharded_parameters(detail::training::engine engine, std::vector<stream_ref> compute,
                     sharded_parameter_options options)
      : engine_(engine)
      , compute_(std::move(compute))
      , options_(std::move(options)) {
    std::visit(
        [&](const auto& e) {
          detail::training::require_compute_streams(e, compute_, "sharded_parameters");
        },
        engine_);
    if (!options_.memory.empty())
      detail::require_count(options_.memory.size(), compute_.size(), "sharded_parameters",
                            "options.memory", "one resource per member, or none");
    for (std::size_t i = 0; i < compute_.size(); ++i) {
      end_of_compute_.emplace_back(compute_[i].device());
      end_of_collectives_.emplace_back(compute_[i].device());
    }
  }

  stream_ref collectives_of(std::size_t i) const {
    return std::visit([&](const auto& e) { return e.stream(i); }, engine_);
  }
  // Where member i's transient buffers come from now: under capture the graph's own allocations,
  // from the device's pool (as the algorithms' captured scratch), else options.memory[i].
  std::vector<memory_resource_ref> resources() const {
    std::vector<memory_resource_ref> r;
    for (std::size_t i = 0; i < members(); ++i) {
      const bool captured =
          detail::capture_of(collectives_of(i), "sharded_parameters::gather").active;
      r.push_back(captured || options_.memory.empty() ? default_memory_resource()
                                                      : options_.memory[i]);
    }
    return r;
  }

  const layer_state& at(std::size_t layer, const char* function) const {
    if (layer >= layers_.size())
      detail::throw_invalid_argument(function, "layer",
                                     "is " + std::to_string(layer) + "; there are " +
                                         std::to_string(layers_.size()) + " layers.");
    return layers_[layer];
  }
  layer_state& at(std::size_t layer, const char* function) {
    return const_cast<layer_state&>(std::as_const(*this).at(layer, function));
  }

  void require_launchable(const char* function) const {
    std::visit([&](const auto& e) { detail::training::require_launchable(e, compute_, function); },
               engine_);
  }

  detail::training::engine engine_;
  std::vector<stream_ref> compute_;
  sharded_parameter_options options_;
  std::vector<detail::training::taken_span> taken_;
  std::vector<event> end_of_compute_;
  std::vector<event> end_of_collectives_;
  std::vector<layer_state> layers_; // last: destroyed first, while the streams' events still live
};

} // namespace cohort
