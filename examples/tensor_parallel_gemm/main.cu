// tensor_parallel_gemm — C = A·B with the inner dimension K split across GPUs: GPU i holds the
// columns K_i of A and the rows K_i of B, computes its partial product A_i·B_i with cuBLAS, and an
// all_reduce sums the partials so that every GPU holds C (C = A_1·B_1 + A_2·B_2 + ...). Two ways:
//   - textbook: the whole partial product, then one all_reduce of all of C;
//   - overlapped (cohort::chunk_pipeline): C in column blocks; block k's all_reduce runs on each
//     GPU's stream while block k + 1's GEMM computes on a second stream, so only the last block's
//     all_reduce is left in the open. Tried with 4, 8 and 16 blocks, and with the all_reduce's
//     kernels on at most half (the clique's default) or an eighth of each GPU's SMs.
// Each is checked against the whole product on one GPU and timed against it: efficiency is
// T1 / (n · Tn), the speed-up over one GPU divided by the number of GPUs. The sums go through
// cohort's peer-to-peer engine, so the program runs on an emulated group (one GPU) as well.
//
//   build/examples/tensor_parallel_gemm [M N K]      (default 8192 8192 8192, floats)
#include "../common/cublas_handle.cuh"

#include <cohort/cohort.cuh>

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// One cuBLAS handle on one member's device (../common/cublas_handle.cuh: with a workspace of its
// own, so that cuBLAS never allocates during a GEMM that an all_reduce may be waiting for).
class blas {
 public:
  explicit blas(cohort::stream_ref stream)
      : handle_(stream) {}
  // C (m × n, leading dimension m) = A (m × k, leading dimension lda) · B (k × n, ldb),
  // column-major, on `stream`.
  void gemm(cohort::stream_ref stream, int m, int n, int k, const float* a, int lda, const float* b,
            int ldb, float* c) {
    cohort::scoped_device on(handle_.device());
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasSgemm(handle_.on(stream), CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, lda, b,
                             ldb, &zero, c, m),
                 "cublasSgemm", handle_.device().get());
  }

 private:
  cublas_handle handle_;
};

// The matrices' entries, from their global indices: every GPU makes its own slice, no copies.
__host__ __device__ float a_at(std::size_t row, std::size_t col) {
  return static_cast<float>((row * 131 + col * 71) % 97) / 97.0f - 0.5f;
}
__host__ __device__ float b_at(std::size_t row, std::size_t col) {
  return static_cast<float>((row * 53 + col * 29) % 89) / 89.0f - 0.5f;
}

} // namespace

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  const int m = argc > 3 ? std::atoi(argv[1]) : 8192, n = argc > 3 ? std::atoi(argv[2]) : 8192,
            k = argc > 3 ? std::atoi(argv[3]) : 8192;
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  const std::size_t parts = group.size();
  cohort::p2p_clique peers(group);
  const auto split = cohort::partition::even(static_cast<std::size_t>(k), parts); // K_i per GPU
  const std::size_t mn = static_cast<std::size_t>(m) * n;

  // Each member: A_i (m × k_i), B_i (k_i × n), and its partial C (m × n), summed in place.
  std::vector<cohort::device_buffer<float>> a, b;
  cohort::distributed_buffer<float> c(group, cohort::partition::replicated(mn, parts));
  std::vector<std::unique_ptr<blas>> handles;
  for (std::size_t i = 0; i < parts; ++i) {
    const std::size_t k0 = split.offset(i), ki = split.count(i);
    a.emplace_back(static_cast<std::size_t>(m) * ki, group.stream(i));
    b.emplace_back(ki * n, group.stream(i));
    float* ap = a.back().data();
    float* bp = b.back().data();
    const std::size_t mm = static_cast<std::size_t>(m);
    cohort::for_each_n(group.stream(i), mm * ki, [=] __device__(std::size_t e) {
      ap[e] = a_at(e % mm, k0 + e / mm); // column-major: column (k0 + e / m) of A
    });
    cohort::for_each_n(group.stream(i), ki * n, [=] __device__(std::size_t e) {
      bp[e] = b_at(k0 + e % ki, e / ki); // column-major, leading dimension k_i
    });
    handles.push_back(std::make_unique<blas>(group.stream(i)));
  }
  // Textbook: the whole partial product on each member's stream, then one all_reduce of C.
  auto textbook = [&] {
    for (std::size_t i = 0; i < parts; ++i)
      handles[i]->gemm(group.stream(i), m, n, static_cast<int>(split.count(i)), a[i].data(), m,
                       b[i].data(), static_cast<int>(split.count(i)), c.shard(i).data.data());
    cohort::all_reduce(peers, c, cohort::sum);
  };
  // Overlapped: block k of C (columns [offset, offset + count) of it, contiguous in column-major
  // order) is A_i times block k's columns of B_i, on the member's compute stream; then its
  // all_reduce, on the member's stream, through `clique`.
  cohort::chunk_pipeline overlap(group);
  auto gemm_block = [&](std::size_t blocks) {
    return [&, columns = cohort::partition::even(static_cast<std::size_t>(n), blocks)](
               const cohort::member& member, std::size_t k) {
      const std::size_t i = member.rank, ki = split.count(i);
      handles[i]->gemm(member.stream, m, static_cast<int>(columns.count(k)), static_cast<int>(ki),
                       a[i].data(), m, b[i].data() + columns.offset(k) * ki, static_cast<int>(ki),
                       c.shard(i).data.data() + columns.offset(k) * m);
    };
  };
  auto overlapped = [&](cohort::p2p_clique& clique, std::size_t blocks) {
    const auto columns = cohort::partition::even(static_cast<std::size_t>(n), blocks);
    std::vector<cuda::std::span<float>> spans(parts);
    overlap.run(blocks, gemm_block(blocks), [&](std::size_t k) {
      for (std::size_t i = 0; i < parts; ++i)
        spans[i] = c.shard(i).data.subspan(columns.offset(k) * m, columns.count(k) * m);
      cohort::all_reduce(clique, spans, cohort::sum);
    });
  };

  // The baseline: the whole product on one whole GPU (its own stream: on an emulated group,
  // member 0's stream would have only its share of the SMs).
  cohort::stream whole(group.device(0));
  cohort::stream_ref s0 = whole;
  cohort::device_buffer<float> a_all(static_cast<std::size_t>(m) * k, s0),
      b_all(static_cast<std::size_t>(k) * n, s0), c_one(mn, s0);
  {
    float* ap = a_all.data();
    float* bp = b_all.data();
    const std::size_t mm = static_cast<std::size_t>(m), kk = static_cast<std::size_t>(k);
    cohort::for_each_n(s0, mm * kk,
                       [=] __device__(std::size_t e) { ap[e] = a_at(e % mm, e / mm); });
    cohort::for_each_n(s0, kk * n, [=] __device__(std::size_t e) { bp[e] = b_at(e % kk, e / kk); });
  }
  blas one(s0);
  auto one_gpu = [&] { one.gemm(whole, m, n, k, a_all.data(), m, b_all.data(), k, c_one.data()); };

  // Time both (after a warm-up), each on its own: events on `origin`, which the group's streams
  // fork from and join back to.
  auto time_ms = [&](auto&& run, int reps) {
    run();
    whole.synchronize();
    group.synchronize();
    cohort::event start(group.device(0), cohort::event::timing::on);
    cohort::event stop(group.device(0), cohort::event::timing::on);
    start.record(whole);
    group.fork(whole);
    for (int r = 0; r < reps; ++r)
      run();
    group.join(whole);
    stop.record(whole);
    stop.synchronize();
    return cohort::elapsed(start, stop).count() / reps;
  };
  // Every member's C against the one-GPU C (the partial sums round differently: a relative
  // tolerance).
  std::vector<float> reference(mn), got(mn);
  auto wrong_entries = [&] {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < parts; ++i) {
      c.local(i).copy_to_host(got);
      group.synchronize();
      for (std::size_t e = 0; e < mn; ++e)
        // Not "greater than the tolerance": a NaN, the poison of a block never computed, must count.
        wrong += !(std::fabs(got[e] - reference[e]) <= 1e-3f * (1.0f + std::fabs(reference[e])));
    }
    return wrong;
  };

  const double t_one = time_ms(one_gpu, 5);
  c_one.copy_to_host(reference);
  whole.synchronize();
  // A few entries of the one-GPU C against the host, in double.
  std::size_t wrong = 0;
  for (std::size_t probe = 0; probe < 8; ++probe) {
    const std::size_t row = (probe * 977) % m, col = (probe * 1531) % n;
    double sum = 0;
    for (int kk = 0; kk < k; ++kk)
      sum += static_cast<double>(a_at(row, kk)) * b_at(kk, col);
    wrong += std::fabs(reference[col * m + row] - sum) > 1e-3 * (1.0 + std::fabs(sum));
  }

  // Each way from a poisoned C (NaN), so that a block never computed or never summed shows.
  const double flops = 2.0 * m * n * static_cast<double>(k);
  std::printf("C = A·B, %d × %d × %d floats, K split over %zu %s GPU(s)\n", m, n, k, parts,
              group.is_emulated() ? "emulated" : "real");
  std::printf("one GPU:                                %8.3f ms  %6.1f TFLOP/s\n", t_one,
              flops / (t_one * 1e-3) / 1e12);
  double best = 0.0;
  auto measure = [&](const std::string& label, auto&& run, std::size_t blocks) {
    // The GEMMs of this shape once alone, so that their kernels are loaded before an all_reduce
    // waits on the GPU (lazy loading: see chunk_pipeline.cuh).
    overlap.run(blocks, gemm_block(blocks), [](std::size_t) {});
    group.synchronize();
    c.fill_bytes(0xFF);
    const double t = time_ms(run, 5);
    const std::size_t wrong_here = wrong_entries();
    const double efficiency = t_one / (t * static_cast<double>(parts));
    std::printf("%-39s %8.3f ms  %6.1f TFLOP/s  speed-up %.2fx, efficiency %.3f%s\n", label.c_str(),
                t, flops / (t * 1e-3) / 1e12, t_one / t, efficiency,
                wrong_here == 0 ? "" : "  WRONG");
    wrong += wrong_here;
    return efficiency;
  };
  const double plain = measure("tensor parallel, then one all_reduce:", textbook, 1);
  // The same group's second clique, whose kernels take at most an eighth of each member's SMs:
  // more room for the GEMM beside them.
  cohort::p2p_clique lean(group, {.max_blocks = std::max(1u, peers.max_blocks() / 4)});
  for (cohort::p2p_clique* clique : {&peers, &lean})
    for (std::size_t blocks : {4, 8, 16}) {
      const std::string label = "overlapped, " + std::to_string(blocks) + " blocks, " +
                                std::to_string(clique->max_blocks()) + " comm. blocks:";
      best = std::max(best, measure(
                                label, [&] { overlapped(*clique, blocks); }, blocks));
    }
  std::printf("best overlapped efficiency %.3f against %.3f without overlap\n", best, plain);
  if (group.is_emulated())
    std::puts("(an emulated group shares one GPU: its speed-up means nothing)");
  std::printf("%zu wrong entries (of %zu per GPU and way, plus 8 checked in double on the host)\n",
              wrong, mn);
  if (wrong != 0) return 1;
  std::puts("tensor_parallel_gemm ok");
  return 0;
}
