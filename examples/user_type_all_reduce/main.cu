// user_type_all_reduce — all-reduce a type NCCL cannot: per-feature statistics (min, max, sum and
// count) gathered on every GPU from its own batch of samples and merged on all of them, with
// cohort's peer-to-peer engine. Runs on every visible GPU, or on an emulated group of 2 on one GPU.
//
//   build/examples/user_type_all_reduce
#include <cohort/cohort.cuh>

#include <cfloat>
#include <cstdio>
#include <vector>

// What one GPU knows about one feature. Merging two is associative and commutative, which is all
// all_reduce asks of an operator.
struct feature_stats {
  float min, max;
  double sum;
  unsigned long long count;
};

struct merge {
  __host__ __device__ feature_stats operator()(const feature_stats& a,
                                               const feature_stats& b) const {
    return {a.min < b.min ? a.min : b.min, a.max > b.max ? a.max : b.max, a.sum + b.sum,
            a.count + b.count};
  }
};

// The sample value of `feature` in row `row` on GPU `rank`: any deterministic data will do.
__host__ __device__ float sample(int rank, int row, int feature) {
  return static_cast<float>((row * 37 + feature * 11 + rank * 101) % 1000) / 10.0f - 50.0f;
}

int main() {
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  cohort::p2p_clique peers(group); // checks that every pair of GPUs can reach each other
  const int features = 1000, rows = 4096;
  const auto ranks = group.size();

  // Each GPU summarises its own rows: one feature_stats per feature.
  cohort::distributed_buffer<feature_stats> stats(group,
                                                  cohort::partition::replicated(features, ranks));
  for (std::size_t r = 0; r < ranks; ++r) {
    feature_stats* out = stats.shard(r).data.data();
    const int rank = static_cast<int>(r);
    cohort::for_each_n(group.stream(r), features, [=] __device__(std::size_t f) {
      feature_stats s{FLT_MAX, -FLT_MAX, 0.0, 0};
      for (int row = 0; row < rows; ++row) {
        const float v = sample(rank, row, static_cast<int>(f));
        s = merge{}(s, feature_stats{v, v, v, 1});
      }
      out[f] = s;
    });
  }

  // Every GPU gets the statistics over all rows of all GPUs.
  cohort::all_reduce(peers, stats, merge{});

  // Check GPU 0's result (and that every GPU agrees) against the host.
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    std::vector<feature_stats> got(features);
    stats.local(r).copy_to_host(got);
    group.synchronize();
    for (int f = 0; f < features; ++f) {
      feature_stats want{FLT_MAX, -FLT_MAX, 0.0, 0};
      for (std::size_t q = 0; q < ranks; ++q)
        for (int row = 0; row < rows; ++row) {
          const float v = sample(static_cast<int>(q), row, f);
          want = merge{}(want, feature_stats{v, v, v, 1});
        }
      const feature_stats& g = got[f];
      if (g.min != want.min || g.max != want.max || g.count != want.count ||
          (g.sum - want.sum) > 1e-6 * (1.0 + (want.sum < 0 ? -want.sum : want.sum)) ||
          (want.sum - g.sum) > 1e-6 * (1.0 + (want.sum < 0 ? -want.sum : want.sum)))
        ++wrong;
    }
  }
  std::vector<feature_stats> first(features);
  stats.local(0).copy_to_host(first);
  group.synchronize();
  std::printf("%zu %s GPU(s), %d features, %d rows each: feature 0 has min %.1f, max %.1f, "
              "mean %.3f over %llu samples\n",
              ranks, group.is_emulated() ? "emulated" : "real", features, rows, first[0].min,
              first[0].max, first[0].sum / static_cast<double>(first[0].count), first[0].count);
  std::printf("%zu of %zu merged statistics differ from the host's\n", wrong,
              static_cast<std::size_t>(features) * ranks);
  if (wrong != 0) return 1;
  std::puts("user_type_all_reduce ok");
  return 0;
}
