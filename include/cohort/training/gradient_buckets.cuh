// cohort/training/gradient_buckets.cuh — data-parallel gradients reduced in buckets while the
// backward pass still runs (as PyTorch DDP does), or reduce-scattered so that each member updates
// only its shard of the weights (as ZeRO does). The collectives run on cohort's p2p engine, an
// NCCL clique (one process, several GPUs) or this process's rank of an NCCL communicator (one
// process per GPU, under mpirun or srun), with the same calls.
//
//   cohort::p2p_clique peers(group);            // its collectives run on group.stream(i)
//   std::vector<cohort::stream> compute;        // the model runs beside them, on its own streams
//   for (std::size_t i = 0; i < group.size(); ++i) compute.push_back(group.new_stream(i));
//   cohort::gradient_buckets<__nv_bfloat16> buckets(peers, {compute.begin(), compute.end()});
//   for (int l = 0; l < layers; ++l) buckets.add(gradients_of(l)); // one span per member
//   for (int l = layers - 1; l >= 0; --l) {
//     backward(l, compute);  // layer l's gradients, enqueued on every member's compute stream
//     buckets.ready(l);      // their mean over the members starts as soon as they are done
//   }
//   buckets.finish();        // the compute streams wait for every bucket, the clique for them
//
// ZeRO's step: each bucket is cut into one equal block per rank; after `ready`, member i's block
// (its rank's) is the mean and the rest of its span is left as it was. Member i updates its block
// of the weights (held in float, with the optimizer state, for that block only) and `gather` hands
// every member the whole of them again:
//
//   cohort::gradient_buckets<__nv_bfloat16> sharded(
//       peers, {compute.begin(), compute.end()},
//       {.reduction = cohort::bucket_reduction::reduce_scatter});
//   for (int l = 0; l < layers; ++l) sharded.add(gradients_of(l));
//   for (int l = layers - 1; l >= 0; --l) {
//     backward(l, compute);
//     sharded.ready(l);
//   }
//   for (int l = 0; l < layers; ++l) {
//     sharded.wait(l);                   // the compute streams wait for bucket l's blocks
//     for (std::size_t i = 0; i < group.size(); ++i) update(sharded.shard(l, i), compute[i]);
//     sharded.gather(l, weights_of(l));  // block i of member i's weights to every member
//   }
//   sharded.finish();
//
// Ordering. `ready(b)` records an event on every member's compute stream and makes the
// collectives' stream wait for it, then enqueues the collective there: the host never waits.
// `wait(b)` makes the compute streams wait for bucket b's last collective; `finish()` joins the
// two streams of every member both ways, so that the next round's backward cannot overwrite
// gradients a collective still reads. Call `finish()` also before the first round where the
// collectives' streams hold work the backward must follow; under capture it is what brings the
// compute streams into the capture and back. A bucket is handed over once between two
// `finish()` calls; `ready` on it again is refused (it would average it twice).
//
// The compute streams must be other streams than the collectives' (on a member's own device; for
// an emulated group, `device_group::new_stream(i)` gives one in the member's SM share), and
// outlive the buckets; so must the clique or communicator and the spans' memory. Every argument is
// checked before anything is enqueued: the communicator form's `collectives` stream is refused
// by the constructor where it is empty or of another device than the communicator's.
#pragma once

#include "../communication/operators.cuh"
#include "../detail/arguments.cuh"
#include "../detail/nvtx.cuh"
#include "../detail/one_capture.cuh"
#include "../distributed/distributed_view.cuh"
#include "../errors/argument_error.cuh"
#include "../streams/event.cuh"
#include "../streams/stream_ref.cuh"
#include "detail/bucket_checks.cuh"
#include "detail/bucket_engines.cuh"

#include <cuda/std/span>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace cohort {

enum class bucket_reduction {
  all_reduce,     // every member gets the whole reduced bucket (data parallel)
  reduce_scatter, // member i gets block i of it, each block 1/size() of the bucket (ZeRO)
};

struct gradient_bucket_options {
  bucket_reduction reduction = bucket_reduction::all_reduce;
  // The mean over the members (the gradient of the whole batch, where each member's gradient is
  // the mean over its part), else the sum.
  bool average = true;
  // The peer-to-peer engine's options: half and bfloat16 gradients are summed in float and
  // rounded once. (NCCL reduces them its own way.)
  p2p_options p2p = {.accumulate_in_float = true};
};

namespace detail::training {
struct bucket_access; // what loss_scaler reads of the buckets: their engine
} // namespace detail::training

template <class T>
class gradient_buckets {
 public:
  // `compute[i]`: the stream of member i that produces the gradients and consumes the result.
  // The collectives run on the clique's streams.
  gradient_buckets(p2p_clique& peers, std::vector<stream_ref> compute,
                   gradient_bucket_options options = {})
      : gradient_buckets(detail::training::p2p_engine{&peers, options.p2p}, std::move(compute),
                         options) {}
#if defined(COHORT_WITH_NCCL) && COHORT_WITH_NCCL
  // Over NCCL, one process driving every GPU: the collectives run on the clique's streams.
  gradient_buckets(nccl_clique& nccl, std::vector<stream_ref> compute,
                   gradient_bucket_options options = {})
      : gradient_buckets(detail::training::nccl_clique_engine{&nccl}, std::move(compute), options) {
  }
  // Over NCCL, one process per GPU (mpirun, srun): this process's rank of `comm` is the one
  // member, its gradients one span on the communicator's device; the collectives run on
  // `collectives`, a stream of that device other than `compute`. A reduce_scatter's blocks are
  // cut over the communicator's ranks: this process holds block comm.rank().
  gradient_buckets(communicator& comm, stream_ref collectives, stream_ref compute,
                   gradient_bucket_options options = {})
      : gradient_buckets(detail::training::communicator_engine{&comm, collectives},
                         std::vector<stream_ref>{compute}, options) {}
#endif

  gradient_buckets(gradient_buckets&&) noexcept = default;
  gradient_buckets& operator=(gradient_buckets&&) noexcept = default;

  // A new bucket, returned by its index (0, 1, ... in the order added): one span per member, on
  // that member's device, all the same size, apart from every other bucket's. For
  // reduce_scatter, the size must divide into one equal block per rank (the clique's members, or
  // the communicator's ranks; pad the bucket).
  std::size_t add(std::vector<cuda::std::span<T>> gradients) {
    constexpr const char* function = "gradient_buckets::add";
    std::vector<cuda::std::span<const T>> taken;
    for (const entry& b : buckets_)
      taken.insert(taken.end(), b.spans.begin(), b.spans.end());
    std::visit(
        [&](const auto& e) {
          detail::p2p::require_on_members(e, gradients, function, "gradients");
          const std::size_t count = detail::p2p::common_size(gradients, function, "gradients");
          detail::training::require_new_bucket(
              e, options_.reduction == bucket_reduction::reduce_scatter, gradients, count, taken);
        },
        engine_);
    entry made{std::move(gradients), {}, {}, false};
    for (std::size_t i = 0; i < members(); ++i) {
      made.produced.emplace_back(compute_[i].device());
      made.reduced.emplace_back(compute_[i].device());
    }
    buckets_.push_back(std::move(made));
    return buckets_.size() - 1;
  }

  // The same from a distributed buffer or view over the clique's group, one shard per member.
  template <distributed_range R>
  requires std::is_same_v<range_element_t<R&>, T> std::size_t add(R& gradients) {
    return add(spans_of(gradients, "gradient_buckets::add", "gradients"));
  }

  std::size_t size() const noexcept {
    return buckets_.size();
  }
  std::size_t members() const noexcept {
    return compute_.size();
  }
  stream_ref compute_stream(std::size_t member) const {
    return detail::element_at(compute_, member, "gradient_buckets::compute_stream", "members");
  }
  const gradient_bucket_options& options() const noexcept {
    return options_;
  }
  // Elements per member in bucket `bucket`.
  std::size_t count(std::size_t bucket) const {
    return detail::element_at(buckets_, bucket, "gradient_buckets::count", "buckets")
        .spans[0]
        .size();
  }

  // What member `member` holds of the reduced bucket: the block of its rank for reduce_scatter
  // (block `member` over a clique, block comm.rank() over a communicator), the whole span for
  // all_reduce.
  cuda::std::span<T> shard(std::size_t bucket, std::size_t member) const {
    // Accessor indices past the end are std::out_of_range, as from std::vector::at.
    const entry& b = detail::element_at(buckets_, bucket, "gradient_buckets::shard", "buckets");
    detail::element_at(compute_, member, "gradient_buckets::shard", "members");
    if (options_.reduction == bucket_reduction::all_reduce) return b.spans[member];
    return detail::training::block_of(engine_, b.spans[member], member);
  }

  // Bucket `bucket`'s gradients are complete on every compute stream (all that is enqueued there
  // so far): its reduction runs on the clique's streams after them.
  void ready(std::size_t bucket) {
    constexpr const char* function = "gradient_buckets::ready";
    entry& b = buckets_[checked(bucket, function)];
    if (b.handed_over)
      detail::throw_invalid_argument(function, "bucket",
                                     std::to_string(bucket) +
                                         " was handed over already since the last finish(); "
                                         "call finish() to end a round before the next.");
    require_launchable(function);
    const detail::nvtx_range range("gradient_buckets::ready", "bucket %zu, %zu elements", bucket,
                                   b.spans[0].size());
    after_compute(b);
    with_operator([&](auto op) {
      std::visit(
          [&](const auto& e) {
            if (options_.reduction == bucket_reduction::all_reduce)
              e.all_reduce(b.spans, op);
            else
              e.reduce_scatter(b.spans, detail::training::blocks_of(engine_, b.spans), op);
          },
          engine_);
    });
    b.handed_over = true;
    record_reduced(b);
  }

  // Every compute stream waits for bucket `bucket`'s last collective (its reduction or gather).
  void wait(std::size_t bucket) const {
    const entry& b = buckets_[checked(bucket, "gradient_buckets::wait")];
    for (std::size_t i = 0; i < members(); ++i)
      compute_[i].wait(b.reduced[i]);
  }

  // reduce_scatter only: member i's block i of `data[i]` goes to every member (in place), after
  // the compute streams' work so far. `data` is laid out as the bucket: one span per member, each
  // as large as the bucket's.
  void gather(std::size_t bucket, const std::vector<cuda::std::span<T>>& data) {
    constexpr const char* function = "gradient_buckets::gather";
    entry& b = buckets_[checked(bucket, function)];
    detail::require_argument(options_.reduction == bucket_reduction::reduce_scatter, function,
                             "this",
                             "gathers shards: it needs buckets made with "
                             "bucket_reduction::reduce_scatter.");
    std::visit([&](const auto& e) { detail::p2p::require_on_members(e, data, function, "data"); },
               engine_);
    for (const auto& d : data)
      detail::require_count(d.size(), b.spans[0].size(), function, "data", [&] {
        return "per member, the size of bucket " + std::to_string(bucket);
      });
    require_launchable(function);
    const detail::nvtx_range range("gradient_buckets::gather", "bucket %zu", bucket);
    after_compute(b);
    std::visit(
        [&](const auto& e) { e.all_gather(detail::training::blocks_of(engine_, data), data); },
        engine_);
    record_reduced(b);
  }

  // The same from a distributed buffer or view over the clique's group, one shard per member.
  template <distributed_range R>
  requires std::is_same_v<range_element_t<R&>, T>
  void gather(std::size_t bucket, R& data) {
    gather(bucket, spans_of(data, "gradient_buckets::gather", "data"));
  }

  // Every member's compute stream waits for everything enqueued on the clique's stream so far,
  // and the clique's stream for everything on the compute stream; every bucket may be handed
  // over again.
  void finish() {
    // The compute stream waits first, so that under capture of the clique's streams it joins the
    // capture before anything is recorded on it.
    for (std::size_t i = 0; i < members(); ++i) {
      end_of_collectives_[i].record(collectives(i));
      compute_[i].wait(end_of_collectives_[i]);
      end_of_compute_[i].record(compute_[i]);
      collectives(i).wait(end_of_compute_[i]);
    }
    for (entry& b : buckets_)
      b.handed_over = false;
  }

 private:
  friend struct detail::training::bucket_access;
  gradient_buckets(detail::training::engine engine, std::vector<stream_ref> compute,
                   gradient_bucket_options options)
      : engine_(engine)
      , compute_(std::move(compute))
      , options_(options) {
    std::visit([&](const auto& e) { detail::training::require_compute_streams(e, compute_); },
               engine_);
    for (std::size_t i = 0; i < compute_.size(); ++i) {
      end_of_compute_.emplace_back(compute_[i].device());
      end_of_collectives_.emplace_back(compute_[i].device());
    }
  }

  // Member i's stream where its collectives run.
  stream_ref collectives(std::size_t i) const {
    return std::visit([&](const auto& e) { return e.stream(i); }, engine_);
  }
  struct entry {
    std::vector<cuda::std::span<T>> spans;
    std::vector<event> produced; // on the compute streams, before the collective
    std::vector<event> reduced;  // on the clique's streams, after it
    bool handed_over;
  };

  std::size_t checked(std::size_t bucket, const char* function) const {
    if (bucket >= buckets_.size())
      detail::throw_invalid_argument(function, "bucket",
                                     "is " + std::to_string(bucket) + "; there are " +
                                         std::to_string(buckets_.size()) + " buckets.");
    return bucket;
  }

  // A distributed range's shards, one per member (checked as the collectives check).
  template <class R>
  std::vector<cuda::std::span<T>> spans_of(R& range, const char* function,
                                           const char* argument) const {
    std::visit(
        [&](const auto& e) { detail::require_buffer_of_group(range, e, function, argument); },
        engine_);
    std::vector<cuda::std::span<T>> spans;
    for (std::size_t i = 0; i < range.shards(); ++i)
      spans.push_back(range.shard(i).data);
    return spans;
  }

  template <class Call>
  void with_operator(Call&& call) const {
    if (options_.average)
      call(avg);
    else
      call(sum);
  }

  void require_launchable(const char* function) const {
    std::visit([&](const auto& e) { detail::training::require_launchable(e, compute_, function); },
               engine_);
  }

  void after_compute(entry& b) {
    for (std::size_t i = 0; i < members(); ++i) {
      b.produced[i].record(compute_[i]);
      collectives(i).wait(b.produced[i]);
    }
  }

  void record_reduced(entry& b) {
    for (std::size_t i = 0; i < members(); ++i)
      b.reduced[i].record(collectives(i));
  }

  detail::training::engine engine_;
  std::vector<stream_ref> compute_;
  gradient_bucket_options options_;
  std::vector<event> end_of_compute_;
  std::vector<event> end_of_collectives_;
  std::vector<entry> buckets_;
};

} // namespace cohort
