// gradient_buckets: buckets of float and bfloat16 gradients produced on compute streams of their
// own (held there a while, so that a collective run too early reads poison), averaged or summed on
// the clique's streams, in all_reduce and reduce_scatter + gather form, over groups of 1, 2 and 3
// (real GPUs where that many are visible, else emulated); rounds in a row; under graph capture;
// argument errors before anything is enqueued.
#include "p2p_hooks.cuh"
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <memory>

namespace {

using cohort::bucket_reduction;

const std::size_t group_sizes[] = {1, 2, 3};

// Member `member`'s gradient element k in round `round`: quarters up to 7.5, exact in bfloat16 and
// summed exactly in float.
__host__ __device__ float gradient(int round, int member, std::size_t k) {
  const unsigned h = static_cast<unsigned>(k) * 2654435761u +
                     static_cast<unsigned>(member) * 40503u + static_cast<unsigned>(round) * 977u;
  return static_cast<float>(static_cast<int>(h % 61u) - 30) / 4.0f;
}

// Writes member `member`'s gradients of `round` at [first, first + n) of `out`, after every thread
// has spun `hold` clock cycles: a collective that does not wait for this kernel reads poison.
template <class T>
__global__ void produce(T* out, std::size_t first, std::size_t n, int round, int member,
                        long long hold) {
  const long long start = clock64();
  while (clock64() - start < hold) {
  }
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    out[first + k] = static_cast<T>(gradient(round, member, first + k));
}

// to[k] = from[k] * scale + shift over [first, first + n): the shard update (float arithmetic).
template <class T>
__global__ void scale_shift(const T* from, T* to, std::size_t first, std::size_t n, float scale,
                            float shift) {
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    to[first + k] = static_cast<T>(static_cast<float>(from[first + k]) * scale + shift);
}

template <class T>
float as_float(T v) {
  return static_cast<float>(v);
}

template <class T>
bool close(T got, double expected) {
  const double g = as_float(got);
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : std::ldexp(1.0, -8);
  return std::fabs(g - expected) <= tolerance * std::fabs(expected) + 1e-7;
}

template <class T>
bool is_poison(T v) {
  const T p = cohort::testing::poison_value<T>();
  return std::memcmp(&v, &p, sizeof(T)) == 0;
}

// One flat gradient buffer per member holding the buckets with a gap of poison between them, the
// compute streams, and the host's view.
template <class T>
struct fixture {
  static constexpr std::size_t gap = 5;
  cohort::device_group group;
  cohort::p2p_clique peers;
  std::vector<cohort::stream> compute;
  std::vector<std::size_t> sizes, offsets;
  std::size_t total = 0;
  std::vector<cohort::device_buffer<T>> flat, weights;

  fixture(std::size_t members, std::vector<std::size_t> bucket_sizes,
          cohort::p2p_clique_options options = {})
      : group(cohort::testing::group_of(members))
      , peers(group, options)
      , sizes(std::move(bucket_sizes)) {
    for (std::size_t s : sizes) {
      offsets.push_back(total);
      total += s + gap;
    }
    for (std::size_t i = 0; i < members; ++i) {
      compute.push_back(group.new_stream(i));
      flat.emplace_back(total, compute.back());
      weights.emplace_back(total, compute.back());
    }
  }
  std::size_t members() const { return group.size(); }
  std::vector<cohort::stream_ref> compute_refs() const { return {compute.begin(), compute.end()}; }
  std::vector<cuda::std::span<T>> spans(std::vector<cohort::device_buffer<T>>& of, std::size_t b) {
    std::vector<cuda::std::span<T>> out;
    for (auto& buffer : of)
      out.push_back(cuda::std::span<T>(buffer.data() + offsets[b], sizes[b]));
    return out;
  }
  void poison() {
    for (std::size_t i = 0; i < members(); ++i) {
      flat[i].fill_bytes(cohort::testing::poison_byte);
      weights[i].fill_bytes(cohort::testing::poison_byte);
    }
  }
  void produce_bucket(std::size_t b, int round, long long hold) {
    for (std::size_t i = 0; i < members(); ++i)
      cohort::launch(compute[i], {.grid = 64, .block = 256}, produce<T>, flat[i].data(), offsets[b],
                     sizes[b], round, static_cast<int>(i), hold);
  }
  std::vector<T> read(const cohort::device_buffer<T>& buffer, std::size_t i) {
    std::vector<T> host(buffer.size());
    buffer.copy_to_host(host);
    compute[i].synchronize();
    return host;
  }
  // Bucket b's elements on member i that are not the host's reference for `round`.
  std::size_t wrong_in_bucket(std::size_t i, std::size_t b, int round, bool average) {
    const std::vector<T> got = read(flat[i], i);
    std::size_t wrong = 0;
    for (std::size_t k = offsets[b]; k < offsets[b] + sizes[b]; ++k)
      wrong += close(got[k], reduced(round, k, average)) ? 0 : 1;
    return wrong;
  }
  // The host's reference in double: the mean (or sum) of every member's element k.
  double reduced(int round, std::size_t k, bool average) const {
    double s = 0;
    for (std::size_t q = 0; q < members(); ++q)
      s += gradient(round, static_cast<int>(q), k);
    return average ? s / static_cast<double>(members()) : s;
  }
};

// Counts, over the gaps between buckets of `host`, the elements that are not poison.
template <class T>
std::size_t gaps_written(const fixture<T>& f, const std::vector<T>& host) {
  std::size_t wrong = 0;
  for (std::size_t b = 0; b < f.sizes.size(); ++b)
    for (std::size_t k = 0; k < f.gap; ++k)
      wrong += is_poison(host[f.offsets[b] + f.sizes[b] + k]) ? 0 : 1;
  return wrong;
}

// A byte of its own for member i's memory in the refusal case: rank-distinct, so that a sum or an
// average a refused call enqueued after all would change every member's elements.
unsigned char mark_of(std::size_t i) {
  return static_cast<unsigned char>(cohort::testing::poison_byte + 0x11 * i);
}

// Member i's buffers of `of` filled with mark_of(i).
template <class T>
void mark(fixture<T>& f, std::vector<cohort::device_buffer<T>>& of) {
  for (std::size_t i = 0; i < f.members(); ++i)
    of[i].fill_bytes(mark_of(i));
}

// Bytes of member i's buffers of `of` that no longer hold mark_of(i), read back after every stream
// the refused calls could have enqueued on (the compute streams and the clique's) is done.
template <class T>
std::size_t unmarked(fixture<T>& f, std::vector<cohort::device_buffer<T>>& of) {
  f.group.synchronize();
  for (auto& s : f.compute)
    s.synchronize();
  std::size_t changed = 0;
  for (std::size_t i = 0; i < f.members(); ++i) {
    const std::vector<T> host = f.read(of[i], i);
    const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
    for (std::size_t k = 0; k < host.size() * sizeof(T); ++k)
      changed += bytes[k] != mark_of(i);
  }
  return changed;
}

// Buckets over the fixture's p2p clique, or (over_nccl) over an NCCL clique of its group.
template <class T>
struct buckets_on {
#if COHORT_WITH_NCCL
  std::unique_ptr<cohort::nccl_clique> nccl;
#endif
  std::unique_ptr<cohort::gradient_buckets<T>> buckets;

  buckets_on(fixture<T>& f, bool over_nccl, cohort::gradient_bucket_options options) {
#if COHORT_WITH_NCCL
    if (over_nccl) {
      nccl = std::make_unique<cohort::nccl_clique>(f.group);
      buckets = std::make_unique<cohort::gradient_buckets<T>>(*nccl, f.compute_refs(), options);
      return;
    }
#endif
    REQUIRE_FALSE(over_nccl);
    buckets = std::make_unique<cohort::gradient_buckets<T>>(f.peers, f.compute_refs(), options);
  }
};

template <class T>
void check_all_reduce(std::size_t members, bool average, bool over_nccl = false) {
  fixture<T> f(members, {1, 1000, 7919, 65537, 300007});
  buckets_on<T> on(f, over_nccl, {.average = average});
  cohort::gradient_buckets<T>& buckets = *on.buckets;
  for (std::size_t b = 0; b < f.sizes.size(); ++b)
    CHECK(buckets.add(f.spans(f.flat, b)) == b);
  CHECK(buckets.size() == f.sizes.size());
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    f.poison(); // on the compute streams, as the buffers were made there
    buckets.finish();
    for (std::size_t b = f.sizes.size(); b-- > 0;) { // the backward: the last layer first
      f.produce_bucket(b, round, round == 0 ? 20'000 : 0);
      buckets.ready(b);
    }
    buckets.finish();
    for (std::size_t i = 0; i < members; ++i) {
      const std::vector<T> got = f.read(f.flat[i], i);
      std::size_t wrong = 0;
      for (std::size_t b = 0; b < f.sizes.size(); ++b)
        for (std::size_t k = f.offsets[b]; k < f.offsets[b] + f.sizes[b]; ++k)
          wrong += close(got[k], f.reduced(round, k, average)) ? 0 : 1;
      CAPTURE(i);
      CHECK(wrong == 0);
      CHECK(gaps_written(f, got) == 0);
    }
  }
}

template <class T>
void check_reduce_scatter_and_gather(std::size_t members, bool over_nccl = false) {
  std::vector<std::size_t> sizes;
  for (std::size_t s : {1, 1000, 7919, 65537})
    sizes.push_back(s * members);
  fixture<T> f(members, sizes);
  buckets_on<T> on(f, over_nccl, {.reduction = bucket_reduction::reduce_scatter});
  cohort::gradient_buckets<T>& shards = *on.buckets;
  for (std::size_t b = 0; b < sizes.size(); ++b)
    shards.add(f.spans(f.flat, b));
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    f.poison();
    shards.finish();
    for (std::size_t b = sizes.size(); b-- > 0;) {
      f.produce_bucket(b, round, round == 0 ? 20'000 : 0);
      shards.ready(b);
    }
    // Each member's update: weights = 2 · (its block of the mean) + round, then gathered.
    for (std::size_t b = 0; b < sizes.size(); ++b) {
      shards.wait(b);
      for (std::size_t i = 0; i < members; ++i) {
        const cuda::std::span<T> mine = shards.shard(b, i);
        CHECK(mine.size() == sizes[b] / members);
        const std::size_t first = static_cast<std::size_t>(mine.data() - f.flat[i].data());
        cohort::launch(f.compute[i], {.grid = 64, .block = 256}, scale_shift<T>, f.flat[i].data(),
                       f.weights[i].data(), first, mine.size(), 2.0f, static_cast<float>(round));
      }
      shards.gather(b, f.spans(f.weights, b));
    }
    shards.finish();
    for (std::size_t i = 0; i < members; ++i) {
      CAPTURE(i);
      const std::vector<T> grads = f.read(f.flat[i], i), weights = f.read(f.weights[i], i);
      std::size_t wrong_grads = 0, wrong_weights = 0;
      for (std::size_t b = 0; b < sizes.size(); ++b) {
        const std::size_t block = sizes[b] / members;
        for (std::size_t k = f.offsets[b]; k < f.offsets[b] + sizes[b]; ++k) {
          const bool own = (k - f.offsets[b]) / block == i;
          const double mean = f.reduced(round, k, true);
          // Member i's block is the mean; the rest of its span still holds its own gradients.
          wrong_grads +=
              own ? (close(grads[k], mean) ? 0 : 1)
                  : (as_float(grads[k]) == gradient(round, static_cast<int>(i), k) ? 0 : 1);
          // Every block of the weights: its owner's update, rounded to T once more.
          wrong_weights +=
              close(weights[k], 2.0 * as_float(static_cast<T>(static_cast<float>(mean))) + round)
                  ? 0
                  : 1;
        }
      }
      CHECK(wrong_grads == 0);
      CHECK(wrong_weights == 0);
      CHECK(gaps_written(f, grads) == 0);
      CHECK(gaps_written(f, weights) == 0);
    }
  }
}

} // namespace

TEST_CASE("gradient_buckets averages and sums float buckets produced on compute streams") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    check_all_reduce<float>(m, true);
    check_all_reduce<float>(m, false);
  }
}

TEST_CASE("gradient_buckets averages bfloat16 gradients in float, rounding once") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    check_all_reduce<__nv_bfloat16>(m, true);
  }
}

TEST_CASE("gradient_buckets reduce-scatters into each member's block and gathers the updates") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    check_reduce_scatter_and_gather<float>(m);
    check_reduce_scatter_and_gather<__nv_bfloat16>(m);
  }
}

#if COHORT_WITH_NCCL
// NCCL cannot put two ranks on one GPU: the pair runs on two real GPUs only; a clique of one on
// GPU 0 runs everywhere (its reductions are copies of one rank's values, so it shows the calls
// and their order, not the arithmetic).
TEST_CASE("gradient_buckets over an NCCL clique of one GPU averages, scatters and gathers") {
  COHORT_SKIP_UNLESS_GPUS(1);
  check_all_reduce<float>(1, true, /*over_nccl=*/true);
  check_reduce_scatter_and_gather<float>(1, /*over_nccl=*/true);
}

TEST_CASE("gradient_buckets over an NCCL clique of two GPUs averages, sums, scatters, gathers") {
  COHORT_SKIP_UNLESS_GPUS(2);
  check_all_reduce<float>(2, true, /*over_nccl=*/true);
  check_all_reduce<float>(2, false, /*over_nccl=*/true);
  check_reduce_scatter_and_gather<float>(2, /*over_nccl=*/true);
}

// One process's rank of a communicator (what each process of an mpirun job holds): one member,
// its block of a reduce_scatter the communicator rank's. A one-rank communicator on GPU 0; the
// mpirun test runs two ranks where two GPUs are visible.
TEST_CASE("gradient_buckets over one process's rank of a communicator") {
  COHORT_SKIP_UNLESS_GPUS(1);
  using namespace std::chrono_literals;
  const cohort::device_ref d{0};
  auto comm = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
  cohort::stream collectives(d), compute(d);
  const std::size_t n = 4099;
  cohort::device_buffer<float> grads(n, compute), weights(n, compute);
  weights.fill_bytes(0); // copied back after the all_reduce pass too, which does not write it
  for (const auto reduction : {bucket_reduction::all_reduce, bucket_reduction::reduce_scatter}) {
    CAPTURE(static_cast<int>(reduction));
    cohort::gradient_buckets<float> buckets(comm, collectives, compute,
                                            {.reduction = reduction, .average = true});
    CHECK(buckets.members() == 1);
    CHECK(buckets.add({grads.span()}) == 0);
    CHECK(buckets.shard(0, 0).size() == n);
    grads.fill_bytes(cohort::testing::poison_byte);
    buckets.finish();
    cohort::launch(compute, {.grid = 64, .block = 256}, produce<float>, grads.data(),
                   std::size_t{0}, n, 3, 0, 20'000ll);
    buckets.ready(0);
    if (reduction == bucket_reduction::reduce_scatter) {
      buckets.wait(0);
      cohort::launch(compute, {.grid = 64, .block = 256}, scale_shift<float>,
                     static_cast<const float*>(grads.data()), weights.data(), std::size_t{0}, n,
                     2.0f, 1.0f);
      buckets.gather(0, {weights.span()});
    }
    buckets.finish();
    std::vector<float> got(n), got_weights(n);
    grads.copy_to_host(got);
    weights.copy_to_host(got_weights);
    compute.synchronize();
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < n; ++k) {
      wrong += got[k] == gradient(3, 0, k) ? 0 : 1;
      if (reduction == bucket_reduction::reduce_scatter)
        wrong += got_weights[k] == 2.0f * gradient(3, 0, k) + 1.0f ? 0 : 1;
    }
    CHECK(wrong == 0);
  }
  // The collectives' stream must be another than the compute stream, on the communicator's device.
  CHECK_THROWS_WITH_AS(cohort::gradient_buckets<float>(comm, compute, compute),
                       doctest::Contains("is the stream the collectives run on"),
                       std::invalid_argument);
  // An empty collectives' stream (moved from) is refused by the constructor, not by ready().
  cohort::stream moved_from(d);
  cohort::stream keeper(std::move(moved_from));
  CHECK_THROWS_WITH_AS(cohort::gradient_buckets<float>(comm, moved_from, compute),
                       doctest::Contains("'collectives': has no CUDA stream"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cohort::sharded_parameters<float>(comm, moved_from, compute),
                       doctest::Contains("'collectives': has no CUDA stream"),
                       std::invalid_argument);
}
#endif

// ready() and gather() made the clique's streams wait for the compute streams before the
// collective refused a broken clique (naming its kernel): now refused first, by their own names.
// Its name holds "launch that fails part-way" (racecheck and initcheck leave such cases out) and
// ends in [serial]: as graph_test's part-way case, it runs alone on the GPU (design.md: with
// other processes time-sharing it, the release did not reach an emulated member's kernel).
TEST_CASE("gradient_buckets refuses ready and gather by name after a launch that fails part-way "
          "[serial]") {
  COHORT_SKIP_UNLESS_GPUS(1);
  fixture<float> f(2, {1000}, {.patience = cohort::testing::patience()});
  cohort::gradient_buckets<float> reduced(f.peers, f.compute_refs());
  reduced.add(f.spans(f.flat, 0));
  cohort::gradient_buckets<float> sharded(f.peers, f.compute_refs(),
                                          {.reduction = cohort::bucket_reduction::reduce_scatter});
  sharded.add(f.spans(f.flat, 0));
  for (cohort::stream& s :
       f.compute) // the buffers, made on them, before the clique's streams use them
    s.synchronize();
  cohort::testing::p2p::fail_launch_on_member(1);
  CHECK_THROWS_AS(cohort::all_reduce(f.peers, f.spans(f.weights, 0), cohort::sum),
                  cohort::cuda_error);
  f.group.synchronize(); // rank 0, launched, was released
  REQUIRE(f.peers.broken());
  CHECK_THROWS_WITH_AS(reduced.ready(0),
                       doctest::Contains("cohort::gradient_buckets::ready: argument 'this'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(sharded.gather(0, f.spans(f.weights, 0)),
                       doctest::Contains("cohort::gradient_buckets::gather: argument 'this'"),
                       std::invalid_argument);
}

// ready() in captures it could not finish, each refused now before anything is enqueued, naming
// the call; the bucket is then reduced right outside any capture:
// - member 0's compute stream captured alone: ready() made member 0's clique stream join that
//   capture, the collective then refused, and the capture could not end (a stream left joined);
// - a capture of the group's (the clique's) streams without the leading finish(): the compute
//   streams are outside it, and a captured clique stream would wait for work outside its capture.
TEST_CASE("gradient_buckets refuses ready where its streams are not in one capture, before "
          "enqueuing") {
  COHORT_SKIP_UNLESS_GPUS(1);
  fixture<float> f(2, {1000});
  cohort::gradient_buckets<float> buckets(f.peers, f.compute_refs());
  buckets.add(f.spans(f.flat, 0));
  for (cohort::stream& s : f.compute)
    s.synchronize();
  const cohort::stream_ref captured = f.compute[0];
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaErrorUnknown;
  {
    const cohort::scoped_device on(captured.device());
    cohort::check_cuda(
        cudaStreamBeginCapture(captured.native_handle(), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
    CHECK_THROWS_WITH_AS(buckets.ready(0), doctest::Contains("cohort::gradient_buckets::ready"),
                         std::logic_error);
    ended = cudaStreamEndCapture(captured.native_handle(), &graph);
  }
  CHECK(ended == cudaSuccess);
  std::size_t nodes = 1;
  if (graph != nullptr) {
    cohort::check_cuda(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
    cohort::check_cuda(cudaGraphDestroy(graph), "cudaGraphDestroy");
  }
  CHECK(nodes == 0);
  (void)cudaGetLastError();

  CHECK_THROWS_WITH_AS(
      cohort::group_graph::capture(f.group, [&] { buckets.ready(0); }),
      doctest::Contains("cohort::gradient_buckets::ready: member 0's collectives' stream"),
      std::logic_error);

  // Nothing was handed over: the bucket still can be, outside any capture.
  f.poison();
  buckets.finish();
  f.produce_bucket(0, 1, 5'000);
  buckets.ready(0);
  buckets.finish();
  for (std::size_t i = 0; i < f.members(); ++i) {
    CAPTURE(i);
    CHECK(f.wrong_in_bucket(i, 0, 1, true) == 0);
  }
}

TEST_CASE("gradient_buckets works inside a group_graph capture and its replays") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    fixture<float> f(m, {3, 4097, 100003});
    cohort::gradient_buckets<float> buckets(f.peers, f.compute_refs());
    for (std::size_t b = 0; b < f.sizes.size(); ++b)
      buckets.add(f.spans(f.flat, b));
    f.poison();
    cohort::group_graph graph = cohort::group_graph::capture(f.group, [&] {
      buckets.finish(); // brings the compute streams into the capture of the group's streams
      for (std::size_t b = f.sizes.size(); b-- > 0;) {
        f.produce_bucket(b, 1, 5'000);
        buckets.ready(b);
      }
      buckets.finish(); // and back: the group's streams wait for them
    });
    for (int replay = 0; replay < 3; ++replay) {
      CAPTURE(replay);
      for (std::size_t i = 0; i < m; ++i) { // between replays, on the group's streams
        f.peers.stream(i).synchronize();
        f.flat[i].fill_bytes(cohort::testing::poison_byte);
        f.compute[i].synchronize();
      }
      graph.launch();
      f.group.synchronize();
      for (std::size_t i = 0; i < m; ++i) {
        const std::vector<float> got = f.read(f.flat[i], i);
        std::size_t wrong = 0;
        for (std::size_t b = 0; b < f.sizes.size(); ++b)
          for (std::size_t k = f.offsets[b]; k < f.offsets[b] + f.sizes[b]; ++k)
            wrong += close(got[k], f.reduced(1, k, true)) ? 0 : 1;
        CAPTURE(i);
        CHECK(wrong == 0);
        CHECK(gaps_written(f, got) == 0);
      }
    }
  }
}

TEST_CASE("gradient_buckets refuses bad arguments before it enqueues anything") {
  COHORT_SKIP_UNLESS_GPUS(1);
  fixture<float> f(2, {1000, 64});
  auto refs = f.compute_refs();
  using cohort::gradient_buckets;
  // Every member's gradients hold a mark of their own: each refused call below must leave them
  // as they are (checked once the streams are done), where one that enqueued a reduction, a
  // gather or a copy before refusing would change them.
  mark(f, f.flat);
  CHECK_THROWS_WITH_AS(gradient_buckets<float>(f.peers, {refs[0]}),
                       doctest::Contains("one stream per member"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(gradient_buckets<float>(f.peers, {f.peers.stream(0), refs[1]}),
                       doctest::Contains("is the stream the collectives run on"),
                       std::invalid_argument);
  if (cohort::device_count() >= 2) // member 0 is GPU 0, member 1 GPU 1
    CHECK_THROWS_WITH_AS(gradient_buckets<float>(f.peers, {refs[1], refs[0]}),
                         doctest::Contains("compute[0]"), std::invalid_argument);

  gradient_buckets<float> buckets(f.peers, refs, {.average = false});
  auto good = f.spans(f.flat, 0);
  CHECK_THROWS_WITH_AS(buckets.add({good[0]}), doctest::Contains("one span per member"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(buckets.add({good[0], good[1].first(999)}),
                       doctest::Contains("as large as rank 0's"), std::invalid_argument);
  std::vector<float> host(1000);
  CHECK_THROWS_WITH_AS(buckets.add({good[0], cuda::std::span<float>(host.data(), host.size())}),
                       doctest::Contains("gradients[1]"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(buckets.add({good[0].first(0), good[1].first(0)}),
                       doctest::Contains("empty"), std::invalid_argument);
  CHECK(buckets.add(good) == 0);
  CHECK_THROWS_WITH_AS(buckets.add({good[0].subspan(500, 10), f.spans(f.flat, 1)[1].first(10)}),
                       doctest::Contains("overlaps bucket 0"), std::invalid_argument);
  if (f.group.is_emulated()) // member 1's span in member 0's bucket 0, on their one GPU
    CHECK_THROWS_WITH_AS(buckets.add({f.spans(f.flat, 1)[0].first(10), good[0].subspan(500, 10)}),
                         doctest::Contains("(member 0's)"), std::invalid_argument);
  CHECK(buckets.size() == 1);
  CHECK_THROWS_WITH_AS(buckets.ready(1), doctest::Contains("there are 1 buckets"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(buckets.wait(1), doctest::Contains("bucket"), std::invalid_argument);
  // The accessors' indices past the end are std::out_of_range (were std::invalid_argument).
  CHECK_THROWS_WITH_AS(buckets.shard(0, 2),
                       "cohort::gradient_buckets::shard: index 2 is out of range (2 members).",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(buckets.shard(1, 0), doctest::Contains("gradient_buckets::shard: index 1"),
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(buckets.count(1),
                       "cohort::gradient_buckets::count: index 1 is out of range (1 buckets).",
                       std::out_of_range);
  CHECK_THROWS_WITH_AS(buckets.gather(0, good), doctest::Contains("reduce_scatter"),
                       std::invalid_argument);
  CHECK(unmarked(f, f.flat) == 0);

  // Handed over twice in one round: refused, so the bucket is summed once, not twice.
  f.poison();
  buckets.finish();
  f.produce_bucket(0, 0, 0);
  buckets.ready(0);
  CHECK_THROWS_WITH_AS(buckets.ready(0), doctest::Contains("finish()"), std::invalid_argument);
  buckets.finish();
  for (std::size_t i = 0; i < 2; ++i) {
    const std::vector<float> got = f.read(f.flat[i], i);
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < 1000; ++k)
      wrong += close(got[k], f.reduced(0, k, false)) ? 0 : 1;
    CHECK(wrong == 0);
  }

  gradient_buckets<float> one_shot(f.peers, refs,
                                   {.p2p = {.algorithm = cohort::p2p_algorithm::one_shot}});
  std::vector<cohort::device_buffer<float>> big;
  big.emplace_back(f.peers.one_shot_limit() / sizeof(float) + 1, refs[0]);
  big.emplace_back(big[0].size(), refs[1]);
  mark(f, big);
  CHECK_THROWS_WITH_AS(one_shot.add({cuda::std::span<float>(big[0].data(), big[0].size()),
                                     cuda::std::span<float>(big[1].data(), big[1].size())}),
                       doctest::Contains("one_shot_limit"), std::invalid_argument);
  CHECK(unmarked(f, big) == 0);

  gradient_buckets<float> shards(f.peers, refs, {.reduction = bucket_reduction::reduce_scatter});
  mark(f, f.flat);
  CHECK_THROWS_WITH_AS(shards.add({good[0].first(999), good[1].first(999)}),
                       doctest::Contains("pad the bucket"), std::invalid_argument);
  shards.add(good);
  CHECK_THROWS_WITH_AS(shards.gather(0, {good[0].first(998), good[1].first(998)}),
                       doctest::Contains("the size of bucket 0"), std::invalid_argument);
  CHECK(unmarked(f, f.flat) == 0);
  CHECK(shards.shard(0, 1).size() == 500);
  CHECK(shards.shard(0, 1).data() == good[1].data() + 500);
}
