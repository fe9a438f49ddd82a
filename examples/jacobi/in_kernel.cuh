// jacobi's second solver: the whole run is one cooperative, persistent kernel per GPU that
// exchanges its halos itself through a cohort::p2p_handle. Iteration k reads grid k % 2 and writes
// grid (k + 1) % 2, its edge rows also into the neighbours' halo rows of that grid (peer stores),
// then meets every block of every GPU (grid_sync): the halos it reads next are complete, and no
// neighbour still reads the grid it writes next. No host events, no copies, no launches per
// iteration. Included by main.cu after slab_shape, update and fill_initial.
#pragma once

#include <cohort/p2p/device.cuh>

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

// Like update(), with the rows a neighbour wrote during the kernel (the halo rows 0 and rows + 1)
// read through L2: L1 is not coherent with other GPUs' stores.
__device__ inline float update_reading_halos(const float* in, const slab_shape& s, std::size_t row,
                                             std::size_t column) {
  const float* p = in + row * s.nx + column;
  const float up = row == 1 ? __ldcg(p - s.nx) : *(p - s.nx);
  const float down = row == s.rows ? __ldcg(p + s.nx) : *(p + s.nx);
  return average(up, down, *(p - 1), *(p + 1));
}

// `grids[0]`, `grids[1]`: this member's slabs (and its neighbours'); `rows_above`: how many rows
// the member above owns (where its bottom halo row sits).
__global__ void __launch_bounds__(512)
    jacobi_persistent(cohort::p2p_handle<float> grid0, cohort::p2p_handle<float> grid1,
                      slab_shape s, std::size_t rows_above, std::size_t iterations) {
  auto session = grid0.session();
  const int rank = grid0.rank();
  const bool has_up = rank > 0, has_down = rank + 1 < grid0.ranks();
  const std::size_t columns = s.nx - 2;
  const std::size_t points = s.rows * columns;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t k = 0; k < iterations; ++k) {
    const cohort::p2p_handle<float>& from = k % 2 == 0 ? grid0 : grid1;
    const cohort::p2p_handle<float>& to = k % 2 == 0 ? grid1 : grid0;
    const float* in = from.local();
    float* out = to.local();
    float* up_halo = has_up ? to.peer(rank - 1) + (rows_above + 1) * s.nx : nullptr;
    float* down_halo = has_down ? to.peer(rank + 1) : nullptr;
    for (std::size_t p = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; p < points;
         p += stride) {
      const std::size_t r = 1 + p / columns, c = 1 + p % columns;
      if (s.fixed(r)) continue;
      const float v = update_reading_halos(in, s, r, c);
      out[r * s.nx + c] = v;
      if (r == 1 && up_halo != nullptr) up_halo[c] = v;
      if (r == s.rows && down_halo != nullptr) down_halo[c] = v;
    }
    session.grid_sync();
  }
  session.end();
}

class jacobi_in_kernel {
 public:
  jacobi_in_kernel(const cohort::device_group& group, std::size_t nx, std::size_t ny)
      : group_(group)
      , peers_(group)
      , nx_(nx)
      , ny_(ny)
      , rows_(cohort::partition::even(ny, group.size()))
      , grids_{cohort::distributed_buffer<float>(group, equal_slabs()),
               cohort::distributed_buffer<float>(group, equal_slabs())} {
    // Every block of every member resident at once (grid_sync), the same grid everywhere.
    int per_sm = 0;
    cohort::check_cuda(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, jacobi_persistent, threads, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor", group.device(0).get());
    unsigned blocks = cohort::detail::p2p::max_blocks;
    for (std::size_t i = 0; i < group.size(); ++i)
      blocks = std::min(blocks,
                        std::max(1u, static_cast<unsigned>(per_sm) * group.concurrent_sm_count(i)));
    blocks_ = blocks;
  }

  unsigned blocks() const noexcept { return blocks_; }

  // Runs `iterations` from the starting grid (after a short warm-up that loads the kernel), returns
  // the milliseconds they took (host clock, around one launch per member) and leaves the final
  // grid in `result`.
  double solve(std::size_t iterations, std::span<float> result) {
    reset();
    launch(std::min<std::size_t>(iterations, 20));
    reset();
    const auto start = std::chrono::steady_clock::now();
    launch(iterations);
    group_.synchronize();
    const auto stop = std::chrono::steady_clock::now();
    const cohort::distributed_buffer<float>& last = grids_[iterations % 2];
    for (std::size_t i = 0; i < group_.size(); ++i) {
      const slab_shape s = shape(i);
      cohort::scoped_device on(group_.device(i));
      cohort::check_cuda(cudaMemcpyAsync(result.data() + s.first_row * nx_,
                                         last.shard(i).data.data() + nx_,
                                         s.rows * nx_ * sizeof(float), cudaMemcpyDeviceToHost,
                                         group_.stream(i).native_handle()),
                         "cudaMemcpyAsync(device to host)", group_.device(i).get());
    }
    group_.synchronize();
    return std::chrono::duration<double, std::milli>(stop - start).count();
  }

 private:
  static constexpr unsigned threads = 512; // 256 blocks of 512: about half of an H200's threads

  // Every member's slab as large as the largest: a p2p_handle needs the same size everywhere.
  cohort::partition equal_slabs() const {
    std::size_t most = 0;
    for (std::size_t i = 0; i < rows_.parts(); ++i)
      most = std::max(most, rows_.count(i));
    return cohort::partition::replicated((most + 2) * nx_, rows_.parts());
  }
  slab_shape shape(std::size_t i) const { return {nx_, ny_, rows_.count(i), rows_.offset(i)}; }

  void reset() {
    group_.synchronize();
    for (std::size_t i = 0; i < group_.size(); ++i)
      for (cohort::distributed_buffer<float>& grid : grids_)
        cohort::launch(group_.stream(i),
                       {.grid = blocks_for(nx_, shape(i).rows + 2),
                        .block = block_size,
                        .name = "fill_initial"},
                       fill_initial, grid.shard(i).data.data(), shape(i));
    group_.synchronize();
  }

  void launch(std::size_t iterations) {
    cohort::p2p_launch(
        peers_,
        {.grid = blocks_, .block = threads, .name = "jacobi_persistent", .cooperative = true},
        jacobi_persistent, [&](std::size_t i) {
          return std::make_tuple(cohort::p2p_handle_for(peers_, grids_[0], i),
                                 cohort::p2p_handle_for(peers_, grids_[1], i), shape(i),
                                 i > 0 ? rows_.count(i - 1) : 0, iterations);
        });
  }

  const cohort::device_group& group_;
  cohort::p2p_clique peers_;
  std::size_t nx_, ny_;
  cohort::partition rows_;
  std::array<cohort::distributed_buffer<float>, 2> grids_;
  unsigned blocks_ = 1;
};
