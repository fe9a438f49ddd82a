// loss_scaler: half (and bfloat16, float) gradients produced on compute streams at the scale the
// scaler hands the backward, reduced by gradient_buckets (all_reduce and reduce_scatter), checked
// and voted on by loss_scaler::update, over a group of 1, an emulated group of 2 and two real GPUs
// where visible, on the p2p engine and (where NCCL is built) an NCCL clique and one process's rank
// of a communicator. Every step's verdict, scale and counters, as each member's kernels read them
// and as the host reads them, are checked against a host simulation of the rules; a clean step's
// unscaled gradients (what an optimizer reads) against the host's mean in double; a skipped step
// leaves the optimizer's output (poisoned first) untouched on every member. An inf or a NaN put in
// one member's gradients, where a reduce_scatter hands it to another member's block, still makes
// every member skip. Also under graph capture and replays, and bad arguments refused before
// anything is enqueued.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

namespace {

using cohort::bucket_reduction;

// Member `member`'s unscaled gradient element k in step `step`: quarters in [-7.5, 7.5], so that
// times a power-of-two scale, and their mean over two members, are exact in half and bfloat16.
__host__ __device__ float base(int step, int member, std::size_t k) {
  const unsigned h = static_cast<unsigned>(k) * 2654435761u +
                     static_cast<unsigned>(member) * 40503u + static_cast<unsigned>(step) * 977u;
  return static_cast<float>(static_cast<int>(h % 61u) - 30) / 4.0f;
}

// As a backward makes them: the unscaled values times the scale the loss was multiplied by, which
// the kernel reads on the device (as a loss kernel does), at [first, first + n) of `g`.
template <class T>
__global__ void produce(T* g, std::size_t first, std::size_t n, int step, int member,
                        cohort::loss_scale_view loss_scale) {
  const float scale = loss_scale.scale();
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    g[first + k] = static_cast<T>(base(step, member, first + k) * scale);
}

template <class T>
__global__ void poke(T* at, float value) {
  *at = static_cast<T>(value);
}

// What an optimizer reads: out = g · inverse_scale over [first, first + n), nothing where the
// step is skipped.
template <class T>
__global__ void unscale_into(cohort::loss_scale_view loss_scale, const T* g, float* out,
                             std::size_t first, std::size_t n) {
  if (loss_scale.skip()) return;
  const float inverse = loss_scale.inverse_scale();
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    out[first + k] = static_cast<float>(g[first + k]) * inverse;
}

// The view as the member's kernels see it: scale, inverse_scale, skip.
__global__ void read_view(cohort::loss_scale_view loss_scale, float* out) {
  out[0] = loss_scale.scale();
  out[1] = loss_scale.inverse_scale();
  out[2] = loss_scale.skip() ? 1.0f : 0.0f;
}

// Where a float rounded to T becomes inf (half's largest finite value is 65504; from 65520 up
// rounding goes to inf); the other types do not overflow at these scales.
template <class T>
double overflow_at() {
  return std::is_same_v<T, __half> ? 65520.0 : std::numeric_limits<double>::infinity();
}

enum class engine_kind { p2p, nccl_clique, communicator };

// The rules, on the host: what each update should decide.
struct simulation {
  cohort::loss_scale_options o;
  float scale = o.initial_scale;
  unsigned clean = 0;
  unsigned long long steps = 0, skipped = 0;
  bool last = false;
  // One step: returns the scale its gradients were made with.
  float step(bool overflow) {
    const float used = scale;
    ++steps;
    last = overflow;
    if (overflow) {
      ++skipped;
      clean = 0;
      scale = std::max(scale * o.backoff_factor, o.min_scale);
    } else if (++clean >= o.growth_interval) {
      clean = 0;
      scale = std::min(scale * o.growth_factor, o.max_scale);
    }
    return used;
  }
};

// An inf or a NaN put in member `member`'s gradients in step `step`, at bucket `bucket`'s first
// element (in block 0, member 0's, of a reduce_scatter) or its last (the last member's block).
struct injection {
  int step;
  std::size_t member, bucket;
  bool at_end;
  float value;
};

// One flat gradient buffer per member holding the buckets with gaps between them, the optimizer's
// output, what the members' kernels read of the view, and the buckets over the chosen engine.
template <class T>
struct rig {
  static constexpr std::size_t gap = 3; // odd: buckets start at every alignment
  cohort::device_group group;
  std::optional<cohort::p2p_clique> peers;
#if COHORT_WITH_NCCL
  std::optional<cohort::nccl_clique> nccl;
  std::optional<cohort::communicator> comm;
  std::optional<cohort::stream> collectives;
#endif
  std::vector<cohort::stream> compute;
  std::vector<std::size_t> sizes, offsets;
  std::size_t total = 0;
  std::vector<cohort::device_buffer<T>> grads;
  std::vector<cohort::device_buffer<float>> out, seen;
  std::unique_ptr<cohort::gradient_buckets<T>> buckets;

  rig(cohort::device_group g, engine_kind kind, bucket_reduction reduction,
      const std::vector<std::size_t>& unit_sizes)
      : group(std::move(g)) {
    for (std::size_t s : unit_sizes) { // a multiple of the ranks: reduce_scatter's blocks
      offsets.push_back(total);
      sizes.push_back(s * group.size());
      total += sizes.back() + gap;
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      compute.push_back(group.new_stream(i));
      grads.emplace_back(total, compute.back());
      out.emplace_back(total, compute.back());
      seen.emplace_back(3, compute.back());
    }
    const cohort::gradient_bucket_options options{.reduction = reduction};
    if (kind == engine_kind::p2p) {
      peers.emplace(group, cohort::p2p_clique_options{.patience = cohort::testing::patience()});
      buckets = std::make_unique<cohort::gradient_buckets<T>>(*peers, compute_refs(), options);
    }
#if COHORT_WITH_NCCL
    using namespace std::chrono_literals;
    if (kind == engine_kind::nccl_clique) {
      nccl.emplace(group);
      buckets = std::make_unique<cohort::gradient_buckets<T>>(*nccl, compute_refs(), options);
    }
    if (kind == engine_kind::communicator) {
      REQUIRE(group.size() == 1);
      comm.emplace(
          cohort::communicator::create(cohort::unique_id::create(), 1, 0, group.device(0), 60s));
      collectives.emplace(group.device(0));
      buckets =
          std::make_unique<cohort::gradient_buckets<T>>(*comm, *collectives, compute[0], options);
    }
#endif
    REQUIRE(buckets != nullptr);
    for (std::size_t b = 0; b < sizes.size(); ++b)
      CHECK(buckets->add(spans(b)) == b);
  }
  std::size_t members() const {
    return group.size();
  }
  std::vector<cohort::stream_ref> compute_refs() const {
    return {compute.begin(), compute.end()};
  }
  std::vector<cuda::std::span<T>> spans(std::size_t b) {
    std::vector<cuda::std::span<T>> s;
    for (auto& g : grads)
      s.emplace_back(g.data() + offsets[b], sizes[b]);
    return s;
  }
  // Every stream of the step: the group's (a graph's replay runs there), then the compute streams.
  void synchronize() {
    group.synchronize();
    for (auto& s : compute)
      s.synchronize();
  }
  // Whether any member's input to this step overflows T at `scale`, or the step is injected.
  bool overflows(int step, float scale, const std::vector<injection>& injections) const {
    for (const injection& x : injections)
      if (x.step == step) return true;
    for (std::size_t q = 0; q < members(); ++q)
      for (std::size_t b = 0; b < sizes.size(); ++b)
        for (std::size_t k = offsets[b]; k < offsets[b] + sizes[b]; ++k)
          if (std::fabs(static_cast<double>(base(step, static_cast<int>(q), k)) * scale) >=
              overflow_at<T>())
            return true;
    return false;
  }
  // The host's reference for element k of a clean step: the mean in double.
  double mean(int step, std::size_t k) const {
    double s = 0;
    for (std::size_t q = 0; q < members(); ++q)
      s += base(step, static_cast<int>(q), k);
    return s / static_cast<double>(members());
  }
};

// One training step: the backward produces every bucket (the last first) at the scale of the step
// and hands it over, the scaler updates, the optimizer reads the unscaled gradients of its part.
template <class T>
void enqueue_step(rig<T>& r, cohort::loss_scaler& scaler, int step,
                  const std::vector<injection>& injections) {
  r.buckets->finish();
  for (auto& o : r.out)
    o.fill_bytes(cohort::testing::poison_byte);
  for (std::size_t b = r.sizes.size(); b-- > 0;) {
    for (std::size_t i = 0; i < r.members(); ++i) {
      cohort::launch(r.compute[i], {.grid = 64, .block = 256}, produce<T>, r.grads[i].data(),
                     r.offsets[b], r.sizes[b], step, static_cast<int>(i), scaler.view(i));
      for (const injection& x : injections)
        if (x.step == step && x.member == i && x.bucket == b)
          cohort::launch(r.compute[i], {}, poke<T>,
                         r.grads[i].data() + r.offsets[b] + (x.at_end ? r.sizes[b] - 1 : 0),
                         x.value);
    }
    r.buckets->ready(b);
  }
  scaler.update(*r.buckets);
  for (std::size_t i = 0; i < r.members(); ++i) {
    for (std::size_t b = 0; b < r.sizes.size(); ++b) {
      const cuda::std::span<T> mine = r.buckets->shard(b, i);
      const std::size_t first = static_cast<std::size_t>(mine.data() - r.grads[i].data());
      cohort::launch(r.compute[i], {.grid = 64, .block = 256}, unscale_into<T>, scaler.view(i),
                     static_cast<const T*>(r.grads[i].data()), r.out[i].data(), first, mine.size());
    }
    cohort::launch(r.compute[i], {}, read_view, scaler.view(i), r.seen[i].data());
  }
  r.buckets->finish();
}

// After the step: what every member's kernels read, what the optimizer wrote, what the host reads.
template <class T>
void check_step(rig<T>& r, const cohort::loss_scaler& scaler, int step, const simulation& sim,
                float used) {
  CAPTURE(step);
  CAPTURE(used);
  r.synchronize();
  for (std::size_t i = 0; i < r.members(); ++i) {
    CAPTURE(i);
    std::vector<float> seen(3), out(r.total);
    r.seen[i].copy_to_host(seen);
    r.out[i].copy_to_host(out);
    r.compute[i].synchronize();
    CHECK(seen[0] == sim.scale);
    CHECK(seen[1] == 1.0f / used);
    CHECK(seen[2] == (sim.last ? 1.0f : 0.0f));
    std::size_t wrong = 0, written = 0;
    for (std::size_t b = 0; b < r.sizes.size(); ++b) {
      const cuda::std::span<T> mine = r.buckets->shard(b, i);
      const std::size_t first = static_cast<std::size_t>(mine.data() - r.grads[i].data());
      for (std::size_t k = first; k < first + mine.size(); ++k) {
        const float p = cohort::testing::poison_value<float>();
        if (sim.last) {
          written += std::memcmp(&out[k], &p, sizeof p) != 0;
          continue;
        }
        const double expected = r.mean(step, k);
        wrong += std::fabs(out[k] - expected) <= 1e-6 * std::fabs(expected) + 1e-7 ? 0 : 1;
      }
    }
    CHECK(wrong == 0);   // a clean step's unscaled gradients are the mean of the unscaled ones
    CHECK(written == 0); // a skipped step's optimizer wrote nothing
  }
  const cohort::loss_scale_report seen = scaler.report();
  CHECK(seen.scale == sim.scale);
  CHECK(seen.steps == sim.steps);
  CHECK(seen.skipped == sim.skipped);
  CHECK(seen.last_skipped == sim.last);
}

// Steps 0-2 overflow half by their scale (2^16, 2^15, 2^14 times values up to 7.5), step 3 fits
// (2^13); then an inf on the last member, clean steps, a NaN on member 0, and clean steps up to a
// growth (every 3 clean steps) and past it, whatever the simulation makes of them for T.
template <class T>
void check_training(cohort::device_group group, engine_kind kind, bucket_reduction reduction,
                    std::vector<std::size_t> unit_sizes = {1, 37, 1000, 7919, 65537}) {
  rig<T> r(std::move(group), kind, reduction, unit_sizes);
  const cohort::loss_scale_options options{.initial_scale = 65536.0f, .growth_interval = 3};
  cohort::loss_scaler scaler(*r.buckets, options);
  CHECK(scaler.members() == r.members());
  const std::size_t last = r.members() - 1, buckets = r.sizes.size();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<injection> injections = {
      {4, last, 0, false, inf},                                           // block 0: member 0's
      {6, 0, buckets - 1, true, std::numeric_limits<float>::quiet_NaN()}, // the last member's
      {11, last, buckets / 2, false, -inf}};
  simulation sim{options};
  const cohort::loss_scale_report start = scaler.report();
  CHECK(start.scale == options.initial_scale);
  CHECK(start.steps == 0);
  for (int step = 0; step < 13; ++step) {
    const bool overflow = r.overflows(step, sim.scale, injections);
    enqueue_step(r, scaler, step, injections);
    const float used = sim.step(overflow);
    check_step(r, scaler, step, sim, used);
  }
  CHECK(sim.skipped >= 3); // the injected steps at least
}

} // namespace

TEST_CASE("loss_scaler skips a step on every member where one member's half gradients overflow") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (const auto reduction : {bucket_reduction::all_reduce, bucket_reduction::reduce_scatter}) {
    CAPTURE(static_cast<int>(reduction));
    SUBCASE("a group of 1") {
      check_training<__half>(cohort::testing::group_of(1), engine_kind::p2p, reduction);
    }
    SUBCASE("an emulated group of 2") {
      check_training<__half>(cohort::device_group::emulated(cohort::device_ref{0}, 2),
                             engine_kind::p2p, reduction);
    }
    SUBCASE("two GPUs") {
      COHORT_SKIP_UNLESS_GPUS(2);
      check_training<__half>(cohort::testing::group_of(2), engine_kind::p2p, reduction);
    }
  }
}

TEST_CASE("loss_scaler checks bfloat16 and float gradients, and more buckets than one launch") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_training<__nv_bfloat16>(cohort::testing::group_of(2), engine_kind::p2p,
                                bucket_reduction::all_reduce);
  check_training<float>(cohort::testing::group_of(2), engine_kind::p2p,
                        bucket_reduction::reduce_scatter);
  // 40 buckets: the check takes 32 a launch, so an update makes two; the NaN goes in the last
  // bucket, which the second launch reads.
  check_training<__half>(cohort::testing::group_of(2), engine_kind::p2p,
                         bucket_reduction::all_reduce, std::vector<std::size_t>(40, 5));
}

#if COHORT_WITH_NCCL
// NCCL cannot put two ranks on one GPU: the pair runs on two real GPUs only.
TEST_CASE("loss_scaler over an NCCL clique votes with one NCCL all_reduce") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_training<__half>(cohort::testing::group_of(1), engine_kind::nccl_clique,
                         bucket_reduction::all_reduce);
  if (cohort::device_count() < 2) return;
  check_training<__half>(cohort::testing::group_of(2), engine_kind::nccl_clique,
                         bucket_reduction::all_reduce);
  check_training<__half>(cohort::testing::group_of(2), engine_kind::nccl_clique,
                         bucket_reduction::reduce_scatter);
}

TEST_CASE("loss_scaler over one process's rank of a communicator") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_training<__half>(cohort::testing::group_of(1), engine_kind::communicator,
                         bucket_reduction::all_reduce);
  check_training<__half>(cohort::testing::group_of(1), engine_kind::communicator,
                         bucket_reduction::reduce_scatter);
}
#endif

TEST_CASE("loss_scaler works inside a group_graph capture and its replays") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rig<__half> r(cohort::testing::group_of(2), engine_kind::p2p, bucket_reduction::all_reduce,
                {3, 4097});
  const cohort::loss_scale_options options{.initial_scale = 16.0f, .growth_interval = 2};
  cohort::loss_scaler scaler(*r.buckets, options);
  r.synchronize();
  cohort::group_graph graph =
      cohort::group_graph::capture(r.group, [&] { enqueue_step(r, scaler, 1, {}); });
  r.synchronize();
  CHECK(scaler.report().steps == 0); // captured, not run
  simulation sim{options};
  for (int replay = 0; replay < 5; ++replay) {
    CAPTURE(replay);
    graph.launch();
    const float used = sim.step(false); // 16 · 7.5 fits: the scale doubles every second replay
    check_step(r, scaler, 1, sim, used);
  }
  CHECK(sim.scale == 64.0f);
}

TEST_CASE("loss_scaler refuses bad arguments before it enqueues anything") {
  COHORT_SKIP_UNLESS_GPUS(1);
  rig<__half> r(cohort::testing::group_of(2), engine_kind::p2p, bucket_reduction::all_reduce,
                {1000, 64});
  using cohort::loss_scale_options;
  const auto refused = [&](loss_scale_options o, const char* argument) {
    CAPTURE(argument);
    const std::string expected = "cohort::loss_scaler: argument '" + std::string(argument) + "'";
    CHECK_THROWS_WITH_AS(cohort::loss_scaler(*r.buckets, o), doctest::Contains(expected.c_str()),
                         std::invalid_argument);
  };
  const float inf = std::numeric_limits<float>::infinity();
  refused({.initial_scale = 0.0f}, "options.initial_scale");
  refused({.initial_scale = -1024.0f}, "options.initial_scale");
  refused({.initial_scale = inf, .max_scale = inf}, "options.initial_scale");
  refused({.initial_scale = std::numeric_limits<float>::quiet_NaN()}, "options.initial_scale");
  refused({.initial_scale = 0.5f}, "options.initial_scale");          // below min_scale (1)
  refused({.initial_scale = 1073741824.0f}, "options.initial_scale"); // above max_scale (2^24)
  refused({.growth_factor = 1.0f}, "options.growth_factor");
  refused({.backoff_factor = 1.0f}, "options.backoff_factor");
  refused({.backoff_factor = 0.0f}, "options.backoff_factor");
  refused({.growth_interval = 0}, "options.growth_interval");
  refused({.min_scale = -1.0f}, "options.min_scale");

  // Every member's gradients hold a mark: a refused update must leave them, and the scaler's
  // state, as they are.
  for (std::size_t i = 0; i < r.members(); ++i)
    r.grads[i].fill_bytes(static_cast<unsigned char>(0x3C + i));
  cohort::loss_scaler scaler(*r.buckets, {.initial_scale = 1024.0f});
  rig<__half> one(cohort::testing::group_of(1), engine_kind::p2p, bucket_reduction::all_reduce,
                  {64});
  CHECK_THROWS_WITH_AS(scaler.update(*one.buckets),
                       doctest::Contains("argument 'buckets': has 1 members"),
                       std::invalid_argument);
  std::vector<cohort::stream> others;
  for (std::size_t i = 0; i < r.members(); ++i)
    others.push_back(r.group.new_stream(i));
  cohort::gradient_buckets<__half> elsewhere(*r.peers, {others.begin(), others.end()});
  elsewhere.add(r.spans(1));
  CHECK_THROWS_WITH_AS(scaler.update(elsewhere),
                       doctest::Contains("member 0's compute stream is not the one"),
                       std::invalid_argument);
  cohort::gradient_buckets<__half> empty(*r.peers, r.compute_refs());
  CHECK_THROWS_WITH_AS(scaler.update(empty), doctest::Contains("holds no buckets"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(scaler.view(2),
                       "cohort::loss_scaler::view: index 2 is out of range (2 members).",
                       std::out_of_range);
  for (std::size_t i = 0; i < r.members(); ++i)
    cohort::launch(r.compute[i], {}, read_view, scaler.view(i), r.seen[i].data());
  r.synchronize();
  for (auto& s : others)
    s.synchronize();
  CHECK(scaler.report().steps == 0);
  for (std::size_t i = 0; i < r.members(); ++i) {
    CAPTURE(i);
    std::vector<float> seen(3);
    std::vector<__half> grads(r.total);
    r.seen[i].copy_to_host(seen);
    r.grads[i].copy_to_host(grads);
    r.compute[i].synchronize();
    CHECK(seen == std::vector<float>{1024.0f, 1.0f / 1024.0f, 0.0f});
    const auto* bytes = reinterpret_cast<const unsigned char*>(grads.data());
    std::size_t changed = 0;
    for (std::size_t k = 0; k < grads.size() * sizeof(__half); ++k)
      changed += bytes[k] != static_cast<unsigned char>(0x3C + i);
    CHECK(changed == 0);
  }

  // Nothing was left half done: the next step decides from its own gradients alone.
  simulation sim{scaler.options()};
  enqueue_step(r, scaler, 0, {});
  const float used = sim.step(r.overflows(0, sim.scale, {}));
  check_step(r, scaler, 0, sim, used);

  cohort::loss_scaler moved(std::move(scaler));
  CHECK(moved.report().steps == 1);
  CHECK_THROWS_WITH_AS((void)scaler.report(), doctest::Contains("moved away"),
                       std::invalid_argument);
}
