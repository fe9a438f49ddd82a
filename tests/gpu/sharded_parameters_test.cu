// sharded_parameters (ZeRO stage 3): layers of 1, 2 and prime sizes (none a multiple of the
// members) over groups of 1, 2 and 3 (emulated on GPU 0, and real GPUs where that many are
// visible), in float and bfloat16. Each round writes the shards on the compute streams (held a
// while, so that a gather that does not wait for them reads the last round's values), then runs
// a forward (each layer's gathered weights copied out on the compute streams, held too, so that a
// release that does not wait for the copy lets the next gather overwrite what it reads) and a
// backward (each layer's whole gradients written, reduce-scattered into the gradient shards), with
// the gathered buffers' memory poisoned first; checked against a host reference in double. Also:
// the memory the group counts back to where it was after each release, graph capture and
// replays, the NCCL engines, and bad input refused before anything is enqueued.
#include "testing.cuh"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

namespace {

const std::size_t group_sizes[] = {1, 2, 3};
const std::vector<std::size_t> layer_sizes = {1, 2, 7919, 65537, 100003};

// Layer l's weight e in round `round`, and rank q's gradient k of it: quarters up to 7.5, exact in
// bfloat16 and summed exactly in float.
__host__ __device__ float weight(int round, std::size_t l, std::size_t e) {
  const unsigned h = static_cast<unsigned>(e) * 2654435761u + static_cast<unsigned>(l) * 7919u +
                     static_cast<unsigned>(round) * 977u;
  return static_cast<float>(static_cast<int>(h % 61u) - 30) / 4.0f;
}
__host__ __device__ float gradient(int round, std::size_t q, std::size_t l, std::size_t k) {
  const unsigned h = static_cast<unsigned>(k) * 40503u + static_cast<unsigned>(q) * 2654435761u +
                     static_cast<unsigned>(l) * 131u + static_cast<unsigned>(round) * 17u;
  return static_cast<float>(static_cast<int>(h % 53u) - 26) / 4.0f;
}

__device__ void hold_for(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// A rank's shard of layer l (its elements [first, first + n) of the layer; past `count`, padding).
template <class T>
__global__ void write_shard(T* out, std::size_t n, std::size_t first, std::size_t count,
                            std::size_t l, int round, long long hold) {
  hold_for(hold);
  for (std::size_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
    out[j] = static_cast<T>(first + j < count ? weight(round, l, first + j) : -1.0f);
}
template <class T>
__global__ void copy_out(const T* from, T* to, std::size_t n, long long hold) {
  hold_for(hold);
  for (std::size_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x)
    to[j] = from[j];
}
template <class T>
__global__ void write_gradients(T* out, std::size_t n, std::size_t q, std::size_t l, int round,
                                long long hold) {
  hold_for(hold);
  for (std::size_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    out[k] = static_cast<T>(gradient(round, q, l, k));
}

template <class T>
double as_double(T v) {
  return static_cast<double>(static_cast<float>(v));
}
template <class T>
bool close(T got, double expected) {
  const double tolerance = std::is_same_v<T, float> ? 1e-6 : std::ldexp(1.0, -8);
  return std::fabs(as_double(got) - expected) <= tolerance * std::fabs(expected) + 1e-7;
}
template <class T>
bool is_poison(T v) {
  const T p = cohort::testing::poison_value<T>();
  return std::memcmp(&v, &p, sizeof(T)) == 0;
}

// A shard's elements: count / ranks rounded up, then up to 16 bytes (the host's own account).
template <class T>
std::size_t expected_shard(std::size_t count, std::size_t ranks) {
  const std::size_t unit = 16 / std::gcd(std::size_t{16}, sizeof(T));
  return ((count + ranks - 1) / ranks + unit - 1) / unit * unit;
}

// Per member: the shards of every layer in one flat buffer with a gap of poison after each, the
// gradient shards likewise, and `seen`, every layer's gathered weights as copied out.
template <class T>
struct fixture {
  static constexpr std::size_t gap = 5;
  cohort::device_group group;
  std::unique_ptr<cohort::p2p_clique> peers;
  std::vector<cohort::stream> compute;
  std::size_t ranks;
  std::vector<std::size_t> rank_of; // member i's rank
  std::vector<std::size_t> blocks, shard_at, seen_at;
  std::size_t shard_total = 0, seen_total = 0;
  std::vector<cohort::device_buffer<T>> weights, gradients, seen;

  fixture(cohort::device_group g, std::size_t ranks_ = 0, std::size_t rank = 0)
      : group(std::move(g))
      , ranks(ranks_ == 0 ? group.size() : ranks_) {
    if (ranks_ == 0) peers = std::make_unique<cohort::p2p_clique>(group);
    for (std::size_t l = 0; l < layer_sizes.size(); ++l) {
      blocks.push_back(expected_shard<T>(layer_sizes[l], ranks));
      shard_at.push_back(shard_total);
      shard_total += blocks.back() + gap;
      seen_at.push_back(seen_total);
      seen_total += layer_sizes[l] + gap;
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      compute.push_back(group.new_stream(i));
      rank_of.push_back(ranks_ == 0 ? i : rank);
      weights.emplace_back(shard_total, compute.back());
      gradients.emplace_back(shard_total, compute.back());
      seen.emplace_back(seen_total, compute.back());
    }
  }
  std::size_t members() const { return group.size(); }
  std::vector<cohort::stream_ref> compute_refs() const { return {compute.begin(), compute.end()}; }
  std::vector<cohort::memory_resource_ref> group_memory() const {
    std::vector<cohort::memory_resource_ref> m;
    for (std::size_t i = 0; i < members(); ++i)
      m.push_back(group.memory_resource(i));
    return m;
  }
  std::vector<cuda::std::span<T>> shards(std::vector<cohort::device_buffer<T>>& of, std::size_t l) {
    std::vector<cuda::std::span<T>> s;
    for (auto& b : of)
      s.emplace_back(b.data() + shard_at[l], blocks[l]);
    return s;
  }
  void add_layers(cohort::sharded_parameters<T>& params) {
    for (std::size_t l = 0; l < layer_sizes.size(); ++l) {
      CHECK(params.shard_size(layer_sizes[l]) == blocks[l]);
      CHECK(params.add(layer_sizes[l], shards(weights, l), shards(gradients, l)) == l);
    }
  }
  // The outputs poisoned, on the compute streams (where the buffers were made).
  void poison() {
    for (std::size_t i = 0; i < members(); ++i) {
      gradients[i].fill_bytes(cohort::testing::poison_byte);
      seen[i].fill_bytes(cohort::testing::poison_byte);
    }
  }
  // What the next gathers allocate on `on[i]` from `from[i]` holds poison: the same stream's
  // pool reuses a block freed on it at once.
  void poison_pool(const std::vector<cohort::stream_ref>& on,
                   const std::vector<cohort::memory_resource_ref>& from) {
    std::size_t bytes = 0;
    for (std::size_t b : blocks)
      bytes += 2 * b * ranks * sizeof(T) + 256;
    for (std::size_t i = 0; i < members(); ++i) {
      cohort::device_buffer<unsigned char> p(
          bytes, on[i], from.empty() ? cohort::default_memory_resource() : from[i]);
      p.fill_bytes(cohort::testing::poison_byte);
    }
  }
  void write_shards(int round, long long hold) {
    for (std::size_t i = 0; i < members(); ++i)
      for (std::size_t l = 0; l < layer_sizes.size(); ++l)
        cohort::launch(compute[i], {.grid = 32, .block = 256}, write_shard<T>,
                       weights[i].data() + shard_at[l], blocks[l], rank_of[i] * blocks[l],
                       layer_sizes[l], l, round, hold);
  }
  std::vector<T> read(const cohort::device_buffer<T>& b, std::size_t i) {
    std::vector<T> host(b.size());
    b.copy_to_host(host);
    compute[i].synchronize();
    return host;
  }
  // Elements of member i's outputs that are not the reference (the weights of round `round`, the
  // gradients' mean or sum of round `gradient_round`), and elements of the gaps that are not poison.
  // The first few are reported, with where they are and what they hold.
  std::size_t wrong(std::size_t i, int round, int gradient_round, bool average) {
    std::size_t bad = 0;
    auto count = [&](bool ok, const char* what, std::size_t l, std::size_t at, T got) {
      if (ok) return;
      if (++bad <= 4)
        MESSAGE("member " << i << ": " << std::string(what) << " of layer " << l << ", element "
                          << at << ", holds " << as_double(got));
    };
    const std::vector<T> got = read(seen[i], i);
    for (std::size_t l = 0; l < layer_sizes.size(); ++l) {
      for (std::size_t e = 0; e < layer_sizes[l]; ++e)
        count(as_double(got[seen_at[l] + e]) == weight(round, l, e), "weight", l, e,
              got[seen_at[l] + e]);
      for (std::size_t k = 0; k < gap; ++k)
        count(is_poison(got[seen_at[l] + layer_sizes[l] + k]), "gap after the weights", l, k,
              got[seen_at[l] + layer_sizes[l] + k]);
    }
    const std::vector<T> g = read(gradients[i], i);
    for (std::size_t l = 0; l < layer_sizes.size(); ++l) {
      for (std::size_t j = 0; j < blocks[l]; ++j) {
        const std::size_t k = rank_of[i] * blocks[l] + j; // the layer's element
        double s = 0;
        if (k < layer_sizes[l])
          for (std::size_t q = 0; q < ranks; ++q)
            s += gradient(gradient_round, q, l, k);
        count(close(g[shard_at[l] + j], average ? s / static_cast<double>(ranks) : s),
              "gradient shard", l, j, g[shard_at[l] + j]);
      }
      for (std::size_t k = 0; k < gap; ++k)
        count(is_poison(g[shard_at[l] + blocks[l] + k]), "gap after the gradient shard", l, k,
              g[shard_at[l] + blocks[l] + k]);
    }
    return bad;
  }
};

// One step: a forward whose gathers run one layer ahead, each layer's weights copied out, then a
// backward that writes each layer's gradients (rank q's: gradient(round, q, ...)) and reduces them.
template <class T>
void step(fixture<T>& f, cohort::sharded_parameters<T>& params, int round, long long hold) {
  const std::size_t layers = layer_sizes.size();
  params.gather(0);
  for (std::size_t l = 0; l < layers; ++l) {
    if (l + 1 < layers) params.gather(l + 1);
    CHECK(params.gathered(l));
    params.wait(l);
    for (std::size_t i = 0; i < f.members(); ++i) {
      const cuda::std::span<T> w = params.full(l, i);
      REQUIRE(w.size() == layer_sizes[l]);
      cohort::launch(f.compute[i], {.grid = 32, .block = 256}, copy_out<T>,
                     static_cast<const T*>(w.data()), f.seen[i].data() + f.seen_at[l], w.size(),
                     hold);
    }
    params.release(l);
    CHECK_FALSE(params.gathered(l));
  }
  params.gather(layers - 1, cohort::gather_for::backward);
  for (std::size_t l = layers; l-- > 0;) {
    if (l > 0) params.gather(l - 1, cohort::gather_for::backward);
    params.wait(l);
    for (std::size_t i = 0; i < f.members(); ++i) {
      const cuda::std::span<T> g = params.full_gradients(l, i);
      REQUIRE(g.size() == layer_sizes[l]);
      cohort::launch(f.compute[i], {.grid = 32, .block = 256}, write_gradients<T>, g.data(),
                     g.size(), f.rank_of[i], l, round, hold);
    }
    params.reduce_gradients(l);
    params.release(l);
  }
  for (std::size_t l = 0; l < layers; ++l)
    params.wait(l);
}

template <class T>
void check_rounds(fixture<T>& f, cohort::sharded_parameters<T>& params, bool average,
                  const std::vector<cohort::memory_resource_ref>& memory) {
  std::vector<cohort::stream_ref> collectives; // the cliques' streams: the group's
  for (std::size_t i = 0; i < f.members(); ++i)
    collectives.push_back(f.group.stream(i));
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    f.poison();
    f.poison_pool(collectives, memory);
    params.finish(); // the collectives' streams after the poison, the compute streams after them
    f.write_shards(round, round == 0 ? 20'000 : 0);
    step(f, params, round, round == 0 ? 20'000 : 0);
    params.finish();
    for (std::size_t i = 0; i < f.members(); ++i) {
      CAPTURE(i);
      CHECK(f.wrong(i, round, round, average) == 0);
    }
  }
}

std::vector<cohort::device_group> groups_of(std::size_t m) {
  std::vector<cohort::device_group> groups;
  groups.push_back(cohort::device_group::emulated(cohort::device_ref{0}, m));
  if (m > 1 && cohort::device_count() >= static_cast<int>(m))
    groups.push_back(cohort::testing::group_of(m));
  return groups;
}

template <class T>
void check_p2p(std::size_t m, bool average) {
  for (cohort::device_group& g : groups_of(m)) {
    CAPTURE(g.is_emulated());
    fixture<T> f(std::move(g));
    const auto memory = f.group_memory();
    cohort::sharded_parameters<T> params(*f.peers, f.compute_refs(),
                                         {.average = average, .memory = memory});
    CHECK(params.members() == m);
    CHECK(params.ranks() == m);
    f.add_layers(params);
    check_rounds(f, params, average, memory);
  }
}

} // namespace

TEST_CASE("sharded_parameters gathers layers and reduce-scatters their gradients (float)") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    check_p2p<float>(m, true);
    check_p2p<float>(m, false);
  }
}

TEST_CASE("sharded_parameters gathers bfloat16 layers and averages their gradients in float") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    check_p2p<__nv_bfloat16>(m, true);
  }
}

TEST_CASE("sharded_parameters holds a layer's memory from its gather to its release only") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : {std::size_t{2}, std::size_t{3}}) {
    CAPTURE(m);
    fixture<float> f(cohort::device_group::emulated(cohort::device_ref{0}, m));
    cohort::sharded_parameters<float> params(*f.peers, f.compute_refs(),
                                             {.memory = f.group_memory()});
    f.add_layers(params);
    f.write_shards(0, 0); // what the gathers read, written before they run
    std::vector<std::size_t> base;
    for (std::size_t i = 0; i < m; ++i)
      base.push_back(f.group.memory_held(i).bytes);
    auto held = [&](std::size_t extra) {
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < m; ++i)
        wrong += f.group.memory_held(i).bytes == base[i] + extra ? 0 : 1;
      return wrong;
    };
    for (std::size_t l = 0; l < layer_sizes.size(); ++l) {
      CAPTURE(l);
      const std::size_t layer_bytes = f.blocks[l] * m * sizeof(float);
      params.gather(l);
      CHECK(held(layer_bytes) == 0);
      params.release(l);
      CHECK(held(0) == 0);
      params.gather(l, cohort::gather_for::backward);
      CHECK(held(2 * layer_bytes) == 0);
      params.wait(l);
      for (std::size_t i = 0; i < m; ++i) // the gradients the reduction reads
        cohort::launch(f.compute[i], {.grid = 32, .block = 256}, write_gradients<float>,
                       params.full_gradients(l, i).data(), layer_sizes[l], i, l, 0, 0ll);
      params.reduce_gradients(l); // the gradients' buffer goes, the weights stay
      CHECK(held(layer_bytes) == 0);
      params.release(l);
      CHECK(held(0) == 0);
    }
    params.finish();
    f.group.synchronize();
    for (std::size_t i = 0; i < m; ++i)
      CHECK(f.group.memory_held(i).peak >= base[i] + 2 * f.blocks.back() * m * sizeof(float));
    // Destroyed with a layer still gathered: freed after the compute streams, counted back.
    {
      cohort::sharded_parameters<float> left(*f.peers, f.compute_refs(),
                                             {.memory = f.group_memory()});
      left.add(layer_sizes[2], f.shards(f.weights, 2));
      left.gather(0);
      CHECK(held(f.blocks[2] * m * sizeof(float)) == 0);
    }
    CHECK(held(0) == 0);
    f.group.synchronize();
  }
}

TEST_CASE("sharded_parameters works inside a group_graph capture and its replays") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : group_sizes) {
    CAPTURE(m);
    fixture<float> f(cohort::testing::group_of(m));
    cohort::sharded_parameters<float> params(*f.peers, f.compute_refs());
    f.add_layers(params);
    for (cohort::stream& s : f.compute)
      s.synchronize();
    cohort::group_graph graph = cohort::group_graph::capture(f.group, [&] {
      params.finish(); // brings the compute streams into the capture of the group's streams
      step(f, params, 1, 5'000);
      params.finish(); // and back: the group's streams wait for them
    });
    for (int replay = 0; replay < 3; ++replay) {
      CAPTURE(replay);
      f.poison();
      f.write_shards(replay, 0); // the weights change between replays
      for (cohort::stream& s : f.compute)
        s.synchronize();
      graph.launch();
      f.group.synchronize();
      for (std::size_t i = 0; i < m; ++i) {
        CAPTURE(i);
        CHECK(f.wrong(i, replay, 1, true) == 0); // the graph writes round 1's gradients
      }
    }
    // Nothing of the graph's stays gathered on the host's side.
    for (std::size_t l = 0; l < layer_sizes.size(); ++l)
      CHECK_FALSE(params.gathered(l));
  }
}

#if COHORT_WITH_NCCL
// NCCL cannot put two ranks on one GPU: a clique of one on GPU 0 everywhere, of two on two GPUs.
TEST_CASE("sharded_parameters over an NCCL clique gathers and reduce-scatters") {
  COHORT_SKIP_UNLESS_GPUS(1);
  for (std::size_t m : {std::size_t{1}, std::size_t{2}}) {
    if (cohort::device_count() < static_cast<int>(m)) continue;
    CAPTURE(m);
    fixture<float> f(cohort::testing::group_of(m));
    cohort::nccl_clique nccl(f.group);
    const auto memory = f.group_memory();
    cohort::sharded_parameters<float> params(nccl, f.compute_refs(), {.memory = memory});
    f.add_layers(params);
    check_rounds(f, params, true, memory);
  }
}

// One process's rank of a communicator: one member, holding the shard of its rank.
TEST_CASE("sharded_parameters over one process's rank of a communicator") {
  COHORT_SKIP_UNLESS_GPUS(1);
  using namespace std::chrono_literals;
  const cohort::device_ref d{0};
  auto comm = cohort::communicator::create(cohort::unique_id::create(), 1, 0, d, 60s);
  fixture<float> f(cohort::device_group({d}), /*ranks=*/1, /*rank=*/0);
  cohort::stream collectives(d);
  cohort::sharded_parameters<float> params(comm, collectives, f.compute[0]);
  CHECK(params.members() == 1);
  CHECK(params.ranks() == 1);
  f.add_layers(params);
  for (int round = 0; round < 2; ++round) {
    f.poison();
    f.poison_pool({collectives}, {});
    params.finish();
    f.write_shards(round, 20'000);
    step(f, params, round, 20'000);
    params.finish();
    CHECK(f.wrong(0, round, round, true) == 0);
  }
  CHECK_THROWS_WITH_AS(cohort::sharded_parameters<float>(comm, f.compute[0], f.compute[0]),
                       doctest::Contains("is the stream the collectives run on"),
                       std::invalid_argument);
}
#endif

TEST_CASE("sharded_parameters refuses bad input and misuse before it enqueues anything") {
  COHORT_SKIP_UNLESS_GPUS(1);
  fixture<float> f(cohort::device_group::emulated(cohort::device_ref{0}, 2));
  const auto refs = f.compute_refs();
  using params_t = cohort::sharded_parameters<float>;
  CHECK_THROWS_WITH_AS(params_t(*f.peers, {refs[0]}), doctest::Contains("one stream per member"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params_t(*f.peers, {f.peers->stream(0), refs[1]}),
                       doctest::Contains("cohort::sharded_parameters: argument 'compute[0]'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params_t(*f.peers, refs, {.memory = {f.group.memory_resource(0)}}),
                       doctest::Contains("options.memory"), std::invalid_argument);

  // Every member's shards hold a mark of their own; no refused call below may change them, nor
  // take memory from the group.
  for (std::size_t i = 0; i < 2; ++i) {
    f.weights[i].fill_bytes(static_cast<unsigned char>(0x31 + i));
    f.gradients[i].fill_bytes(static_cast<unsigned char>(0x51 + i));
  }
  params_t params(*f.peers, refs, {.memory = f.group_memory()});
  const std::size_t n = layer_sizes[2], block = f.blocks[2];
  auto w = f.shards(f.weights, 2), g = f.shards(f.gradients, 2);
  // A layer whose shards are not the parameters' shard size: refused by name.
  CHECK_THROWS_WITH_AS(params.add(n, {w[0], w[1].first(block - 1)}, g),
                       doctest::Contains("cohort::sharded_parameters::add: argument 'weights[1]'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.add(n + block, w, g), doctest::Contains("argument 'weights[0]'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      params.add(n, w, {cuda::std::span<float>(g[0].data(), block + 1), g[1]}),
      doctest::Contains(doctest::String(
          ("argument 'gradients[0]': has " + std::to_string(block + 1) + " elements").c_str())),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.add(n, {w[0]}, g), doctest::Contains("one span per member"),
                       std::invalid_argument);
  std::vector<float> host(block);
  CHECK_THROWS_WITH_AS(params.add(n, {w[0], cuda::std::span<float>(host.data(), block)}, g),
                       doctest::Contains("weights[1]"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.add(0, w, g), doctest::Contains("argument 'count'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.add(n, w, w), doctest::Contains("overlaps weights[0]"),
                       std::invalid_argument);
  CHECK(params.add(n, w, g) == 0);
  std::vector<cuda::std::span<float>> spare; // block-sized, apart from every span taken
  for (std::size_t i = 0; i < 2; ++i)
    spare.emplace_back(f.weights[i].data() + f.shard_at[3], block);
  CHECK_THROWS_WITH_AS(params.add(n, g, spare),
                       doctest::Contains("overlaps layer 0's gradients[0]"), std::invalid_argument);
  CHECK(params.add(layer_sizes[0], f.shards(f.weights, 0)) == 1); // no gradients: forward only
  CHECK(params.size() == 2);

  auto held = [&] { return f.group.memory_held(0).bytes + f.group.memory_held(1).bytes; };
  const std::size_t before = held();
  // The layer's state, refused by name before anything is enqueued.
  CHECK_THROWS_WITH_AS(params.gather(2), doctest::Contains("there are 2 layers"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.full(0, 0), doctest::Contains("call gather(0) first"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.release(0), doctest::Contains("is not gathered"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.reduce_gradients(0), doctest::Contains("holds no gradient buffer"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.gather(1, cohort::gather_for::backward),
                       doctest::Contains("argument 'purpose'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.gradient_shard(1, 0), doctest::Contains("without gradient shards"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.shard(0, 2), doctest::Contains("index 2 is out of range"),
                       std::out_of_range);
  CHECK(held() == before);

  params.gather(0, cohort::gather_for::backward);
  const std::size_t gathered = held();
  CHECK(gathered == before + 2 * 2 * (2 * block) * sizeof(float));
  CHECK_THROWS_WITH_AS(params.full(0, 0), doctest::Contains("call wait(0) first"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.full_gradients(0, 0), doctest::Contains("call wait(0) first"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(params.gather(0), doctest::Contains("is gathered already"),
                       std::invalid_argument);
  params.wait(0);
  CHECK(params.full(0, 1).size() == n);
  for (std::size_t i = 0; i < 2; ++i) // the gradients the reduction reads are written first
    cohort::launch(f.compute[i], {.grid = 32, .block = 256}, write_gradients<float>,
                   params.full_gradients(0, i).data(), n, i, std::size_t{0}, 0, 0ll);
  CHECK_THROWS_WITH_AS(params.full(0, 2), doctest::Contains("out of range"), std::out_of_range);
  params.release(0);
  CHECK_THROWS_WITH_AS(params.release(0), doctest::Contains("is not gathered"),
                       std::invalid_argument);
  // The gradients are still held: a second backward gather would drop them unreduced.
  CHECK_THROWS_WITH_AS(params.gather(0, cohort::gather_for::backward),
                       doctest::Contains("call reduce_gradients(0) first"), std::invalid_argument);
  params.reduce_gradients(0);
  CHECK_THROWS_WITH_AS(params.reduce_gradients(0), doctest::Contains("holds no gradient buffer"),
                       std::invalid_argument);
  CHECK(held() == before);
  params.finish();
  f.group.synchronize();
  // The shards were only read: each still holds its member's mark.
  for (std::size_t i = 0; i < 2; ++i) {
    const std::vector<float> got = f.read(f.weights[i], i);
    const auto* bytes = reinterpret_cast<const unsigned char*>(got.data());
    std::size_t changed = 0;
    for (std::size_t k = 0; k < got.size() * sizeof(float); ++k)
      changed += bytes[k] != 0x31 + i;
    CHECK(changed == 0);
  }
}
