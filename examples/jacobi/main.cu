// jacobi — a 2D Jacobi solver for Laplace's equation (5-point stencil, fixed boundary: top edge
// 1, the other edges 0) with the grid split in rows over the GPUs of a group. Each member holds
// its rows plus one halo row above and one below, twice (read one grid, write the other, swap).
// Every iteration a member first computes its two edge rows on a high-priority stream and sends
// them into its neighbours' halo rows through peer memory, while its interior rows are computed
// on its main stream; events make the neighbours' next iteration wait for the halo, so the host
// never waits inside the loop. A second solver (in_kernel.cuh) runs the whole loop as one
// cooperative kernel per GPU that exchanges its halos itself through a cohort::p2p_handle, and is
// timed against the first in the same run. Runs on every visible GPU, or on an emulated group of 2
// on GPU 0 where only one is visible, and reports the parallel efficiency against the same solver
// on GPU 0 alone.
//
//   build/examples/jacobi [nx] [ny] [iterations]      (defaults: 16384 16384 1000)
#include <cohort/cohort.cuh>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// The starting grid: the top edge is held at 1, everything else starts (and the other three edges
// stay) at 0.
__host__ __device__ inline float initial_value(std::size_t row) {
  return row == 0 ? 1.0f : 0.0f;
}

// One Jacobi update. The kernels and the host reference all use it, so every path does the same
// float operations in the same order.
__host__ __device__ inline float average(float up, float down, float left, float right) {
  return 0.25f * ((up + down) + (left + right));
}

// One member's slab: its `rows` rows of the grid at local rows 1..rows, between the halo rows 0
// and rows + 1, each `nx` floats. Local row r is global row first_row + r - 1.
struct slab_shape {
  std::size_t nx;        // columns of the grid
  std::size_t ny;        // rows of the whole grid
  std::size_t rows;      // rows this member owns
  std::size_t first_row; // global row of local row 1

  // Rows 0 and ny - 1 of the grid are boundary values: never updated.
  __host__ __device__ bool fixed(std::size_t local_row) const {
    const std::size_t global = first_row + local_row - 1;
    return global == 0 || global + 1 == ny;
  }
};

__device__ inline float update(const float* in, std::size_t nx, std::size_t row,
                               std::size_t column) {
  const float* p = in + row * nx + column;
  return average(*(p - nx), *(p + nx), *(p - 1), *(p + 1));
}

// Writes the starting values into a slab, halo rows included; a halo row outside the grid (above
// the first member, below the last) is never read and gets 0.
__global__ void fill_initial(float* slab, slab_shape s) {
  for (std::size_t r = blockIdx.y; r < s.rows + 2; r += gridDim.y) {
    const bool outside = (r == 0 && s.first_row == 0) || s.first_row + r - 1 >= s.ny;
    const float v = outside ? 0.0f : initial_value(s.first_row + r - 1);
    for (std::size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < s.nx;
         c += static_cast<std::size_t>(gridDim.x) * blockDim.x)
      slab[r * s.nx + c] = v;
  }
}

// The two edge rows (blockIdx.y 0: local row 1, 1: local row `rows`), also stored into the
// neighbours' halo rows when `up_halo` / `down_halo` point there (peer memory, or null).
__global__ void edge_rows(const float* __restrict__ in, float* __restrict__ out, slab_shape s,
                          float* __restrict__ up_halo, float* __restrict__ down_halo) {
  const bool top = blockIdx.y == 0;
  const std::size_t r = top ? 1 : s.rows;
  if (s.fixed(r)) return;
  float* halo = top ? up_halo : down_halo;
  for (std::size_t c = 1 + blockIdx.x * blockDim.x + threadIdx.x; c + 1 < s.nx;
       c += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float v = update(in, s.nx, r, c);
    out[r * s.nx + c] = v;
    if (halo != nullptr) halo[c] = v;
  }
}

// The interior rows, local rows 2..rows - 1: they need no halo.
__global__ void interior_rows(const float* __restrict__ in, float* __restrict__ out, slab_shape s) {
  for (std::size_t r = 2 + blockIdx.y; r < s.rows; r += gridDim.y) {
    if (s.fixed(r)) continue;
    for (std::size_t c = 1 + blockIdx.x * blockDim.x + threadIdx.x; c + 1 < s.nx;
         c += static_cast<std::size_t>(gridDim.x) * blockDim.x)
      out[r * s.nx + c] = update(in, s.nx, r, c);
  }
}

constexpr unsigned block_size = 256;

dim3 blocks_for(std::size_t columns, std::size_t rows) {
  const std::size_t x = std::min<std::size_t>((columns + block_size - 1) / block_size, 65535);
  const std::size_t y = std::min<std::size_t>(rows, 65535);
  return dim3(static_cast<unsigned>(std::max<std::size_t>(x, 1)),
              static_cast<unsigned>(std::max<std::size_t>(y, 1)));
}

// The solver over a group: rows split evenly, two slabs per member (distributed buffers whose
// shards are slabs), an edge stream per member next to the member's own stream, and per member
// two events for each stream, one per parity of the iteration.
//
// Iteration k reads grid k % 2 and writes grid (k + 1) % 2. Member i's edge rows wait for its
// own interior rows and its neighbours' edge rows of iteration k - 1 (they read the rows those
// wrote, and the halo rows they write into were read by the neighbours' iteration k - 1); its
// interior rows wait for its own edge rows of iteration k - 1. Iteration k records into event slot
// k % 2 and waits on slot (k + 1) % 2: when the host enqueues member i, member i - 1 has already
// recorded iteration k (in the other slot) and member i + 1 not yet, so each wait sees the record
// of iteration k - 1.
class jacobi_solver {
 public:
  // `direct`: the edge kernel stores into the neighbours' halos (peer access must be enabled
  // between neighbours); otherwise the edge rows are copied there with cudaMemcpyPeerAsync.
  jacobi_solver(const cohort::device_group& group, std::size_t nx, std::size_t ny, bool direct)
      : group_(group)
      , nx_(nx)
      , ny_(ny)
      , rows_(cohort::partition::even(ny, group.size()))
      , direct_(direct)
      , grids_{cohort::distributed_buffer<float>(group, slab_split(rows_, nx)),
               cohort::distributed_buffer<float>(group, slab_split(rows_, nx))} {
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (rows_.count(i) < 2)
        throw std::invalid_argument("jacobi_solver: argument 'ny': " + std::to_string(ny) +
                                    " rows give member " + std::to_string(i) +
                                    " fewer than 2 rows.");
      int least = 0, greatest = 0;
      {
        cohort::scoped_device on(group.device(i));
        cohort::check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                           "cudaDeviceGetStreamPriorityRange", group.device(i).get());
      }
      // On an emulated group this stream is not in the member's SM share: the edge kernel may
      // run on any SM of the GPU (it is 2 rows against the member's thousands).
      edge_streams_.emplace_back(group.device(i), greatest);
      for (int parity = 0; parity < 2; ++parity) {
        edge_done_.emplace_back(group.device(i));
        interior_done_.emplace_back(group.device(i));
      }
    }
  }
  jacobi_solver(const jacobi_solver&) = delete;
  jacobi_solver& operator=(const jacobi_solver&) = delete;
  // Neighbours may still write into this member's slabs from their edge streams: let everything
  // finish before the slabs are freed on the members' streams.
  ~jacobi_solver() {
    try {
      synchronize();
    } catch (...) { // a destructor never throws; the error surfaced where the work was checked
    }
  }

  const cohort::device_group& group() const noexcept { return group_; }

  // Puts both grids back to the starting values and waits for that (outside the iteration loop).
  void reset() {
    synchronize();
    for (std::size_t i = 0; i < group_.size(); ++i) {
      const slab_shape s = shape(i);
      for (cohort::distributed_buffer<float>& grid : grids_)
        cohort::launch(group_.stream(i), {.grid = blocks_for(nx_, s.rows + 2), .block = block_size},
                       fill_initial, grid.shard(i).data.data(), s);
    }
    step_ = 0;
    synchronize();
  }

  // Every stream of the solver waits for `start` before its next work.
  void fork(cohort::event_ref start) {
    for (std::size_t i = 0; i < group_.size(); ++i) {
      group_.stream(i).wait(start);
      edge_streams_[i].wait(start);
    }
  }

  // `origin` waits for every iteration enqueued so far.
  void join(cohort::stream_ref origin) {
    const std::size_t last = (step_ + 1) % 2;
    for (std::size_t i = 0; i < group_.size(); ++i) {
      origin.wait(edge_done(i, last));
      origin.wait(interior_done(i, last));
    }
  }

  // Enqueues `n` iterations and returns at once.
  void iterate(std::size_t n) {
    for (; n > 0; --n)
      step();
  }

  // Copies the grid of the last iteration into `out` (nx * ny floats, row-major) and waits.
  void gather(std::span<float> out) {
    synchronize();
    const cohort::distributed_buffer<float>& grid = grids_[step_ % 2];
    for (std::size_t i = 0; i < group_.size(); ++i) {
      cohort::scoped_device on(group_.device(i));
      const slab_shape s = shape(i);
      cohort::check_cuda(cudaMemcpyAsync(out.data() + s.first_row * nx_,
                                         grid.shard(i).data.data() + nx_,
                                         s.rows * nx_ * sizeof(float), cudaMemcpyDeviceToHost,
                                         group_.stream(i).native_handle()),
                         "cudaMemcpyAsync(device to host)", group_.device(i).get());
    }
    synchronize();
  }

  // Blocks the host until every stream of the solver is idle.
  void synchronize() const {
    for (std::size_t i = 0; i < group_.size(); ++i) {
      edge_streams_[i].synchronize();
      group_.stream(i).synchronize();
    }
  }

 private:
  static cohort::partition slab_split(const cohort::partition& rows, std::size_t nx) {
    std::vector<std::size_t> counts;
    for (std::size_t i = 0; i < rows.parts(); ++i)
      counts.push_back((rows.count(i) + 2) * nx);
    return cohort::partition::from_counts(std::move(counts));
  }

  slab_shape shape(std::size_t i) const { return {nx_, ny_, rows_.count(i), rows_.offset(i)}; }
  cohort::event_ref edge_done(std::size_t i, std::size_t parity) {
    return edge_done_[2 * i + parity];
  }
  cohort::event_ref interior_done(std::size_t i, std::size_t parity) {
    return interior_done_[2 * i + parity];
  }

  void step() {
    const std::size_t now = step_ % 2; // read grid `now`, record into event slot `now`
    const std::size_t next = 1 - now;  // write grid `next`, wait on event slot `next`
    const std::size_t members = group_.size();
    for (std::size_t i = 0; i < members; ++i) {
      const cohort::device_ref device = group_.device(i);
      const cohort::stream_ref main = group_.stream(i);
      const cohort::stream& edge = edge_streams_[i];
      const slab_shape s = shape(i);
      const float* in = grids_[now].shard(i).data.data();
      float* out = grids_[next].shard(i).data.data();
      // Where this member's edge rows go: the bottom halo row of the member above, the top halo
      // row of the member below (in their `next` grids).
      float* up_halo =
          i > 0 ? grids_[next].shard(i - 1).data.data() + (rows_.count(i - 1) + 1) * nx_ : nullptr;
      float* down_halo = i + 1 < members ? grids_[next].shard(i + 1).data.data() : nullptr;

      // Edge rows and the halo exchange, on the edge stream.
      edge.wait(interior_done(i, next));
      if (i > 0) edge.wait(edge_done(i - 1, next));
      if (i + 1 < members) edge.wait(edge_done(i + 1, next));
      cohort::launch(edge, {.grid = blocks_for(nx_ - 2, 2), .block = block_size}, edge_rows, in,
                     out, s, direct_ ? up_halo : nullptr, direct_ ? down_halo : nullptr);
      if (!direct_) {
        cohort::scoped_device on(device); // the peer copies are enqueued with it current
        const std::size_t bytes = (nx_ - 2) * sizeof(float); // columns 1..nx-2; edges are fixed
        if (up_halo != nullptr)
          cohort::check_cuda(cudaMemcpyPeerAsync(up_halo + 1, group_.device(i - 1).get(),
                                                 out + nx_ + 1, device.get(), bytes,
                                                 edge.native_handle()),
                             "cudaMemcpyPeerAsync(halo up)", device.get());
        if (down_halo != nullptr)
          cohort::check_cuda(cudaMemcpyPeerAsync(down_halo + 1, group_.device(i + 1).get(),
                                                 out + s.rows * nx_ + 1, device.get(), bytes,
                                                 edge.native_handle()),
                             "cudaMemcpyPeerAsync(halo down)", device.get());
      }
      edge_done(i, now).record(edge);

      // Interior rows, on the member's stream, overlapping the above.
      main.wait(edge_done(i, next));
      if (s.rows > 2) {
        cohort::launch(main, {.grid = blocks_for(nx_ - 2, s.rows - 2), .block = block_size},
                       interior_rows, in, out, s);
      }
      interior_done(i, now).record(main);
    }
    ++step_;
  }

  const cohort::device_group& group_;
  std::size_t nx_, ny_;
  cohort::partition rows_;
  bool direct_;
  std::array<cohort::distributed_buffer<float>, 2> grids_;
  std::vector<cohort::stream> edge_streams_;
  std::vector<cohort::event> edge_done_;     // [2 * member + parity]
  std::vector<cohort::event> interior_done_; // [2 * member + parity]
  std::size_t step_ = 0;                     // iterations enqueued since the last reset
};

#include "in_kernel.cuh"

// Runs `iterations` from the starting grid (after a short warm-up), returns the milliseconds they
// took on the GPUs and leaves the final grid in `result`.
double solve(jacobi_solver& solver, std::size_t iterations, std::span<float> result) {
  const cohort::device_ref home = solver.group().device(0);
  cohort::stream origin(home);
  cohort::event start(home, cohort::event::timing::on), stop(home, cohort::event::timing::on);
  solver.reset();
  solver.iterate(std::min<std::size_t>(iterations, 20)); // loads the kernels, maps peer memory
  solver.reset();
  start.record(origin);
  solver.fork(start);
  solver.iterate(iterations);
  solver.join(origin);
  stop.record(origin);
  stop.synchronize();
  solver.gather(result);
  return cohort::elapsed(start, stop).count();
}

// The same iterations on the host, for a small grid.
std::vector<float> host_jacobi(std::size_t nx, std::size_t ny, std::size_t iterations) {
  std::vector<float> a(nx * ny);
  for (std::size_t r = 0; r < ny; ++r)
    for (std::size_t c = 0; c < nx; ++c)
      a[r * nx + c] = initial_value(r);
  std::vector<float> b = a;
  for (std::size_t k = 0; k < iterations; ++k) {
    for (std::size_t r = 1; r + 1 < ny; ++r)
      for (std::size_t c = 1; c + 1 < nx; ++c)
        b[r * nx + c] =
            average(a[(r - 1) * nx + c], a[(r + 1) * nx + c], a[r * nx + c - 1], a[r * nx + c + 1]);
    a.swap(b);
  }
  return a;
}

double max_abs_difference(std::span<const float> a, std::span<const float> b) {
  double most = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    most = std::max(most, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return most;
}

bool parse(const char* text, std::size_t& value) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || text[0] == '-') return false;
  value = static_cast<std::size_t>(v);
  return true;
}

int run(std::size_t nx, std::size_t ny, std::size_t iterations) {
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  const bool real = !group.is_emulated();
  cohort::device_group single{cohort::device_ref{0}};
  const std::size_t n = group.size();
  if (ny < 2 * n || ny < 3) {
    std::fprintf(stderr, "jacobi: ny = %zu rows is too few for %zu members (at least %zu).\n", ny,
                 n, std::max<std::size_t>(2 * n, 3));
    return 2;
  }

  // Direct stores need peer access between neighbours (an emulated group is one GPU: always).
  bool direct = group.enable_peer_access();
  if (!direct) {
    direct = true;
    for (std::size_t i = 0; i + 1 < n; ++i)
      if (cohort::link_between(group.device(i), group.device(i + 1)).kind ==
              cohort::link_kind::host ||
          cohort::link_between(group.device(i + 1), group.device(i)).kind ==
              cohort::link_kind::host)
        direct = false;
  }
  if (real)
    std::printf("group: %zu members, one per visible GPU\n", n);
  else
    std::printf("group: emulated group of 2 members on GPU 0 (only one GPU is visible), %s\n",
                group.splits_sms() ? "each on half of its SMs" : "sharing its SMs");
  std::printf("halo exchange: %s\n",
              direct ? "the edge-row kernel stores into the neighbours' halo rows (peer memory)"
                     : "cudaMemcpyPeerAsync on the edge stream (some neighbours have no peer "
                       "path)");

  // Correctness on a small grid, against the host.
  const std::size_t check_nx = 64, check_ny = std::max<std::size_t>(64, 2 * n), check_iters = 50;
  const std::vector<float> want = host_jacobi(check_nx, check_ny, check_iters);
  std::vector<float> got_one(want.size()), got_n(want.size());
  {
    jacobi_solver solver(single, check_nx, check_ny, true);
    solve(solver, check_iters, got_one);
  }
  {
    jacobi_solver solver(group, check_nx, check_ny, direct);
    solve(solver, check_iters, got_n);
  }
  const double one_vs_host = max_abs_difference(got_one, want);
  const double n_vs_host = max_abs_difference(got_n, want);
  std::printf("check: %zu x %zu grid, %zu iterations: max |GPU - host| is %g on 1 member, %g on "
              "%zu members\n",
              check_nx, check_ny, check_iters, one_vs_host, n_vs_host, n);

  // The timed runs: 1 member on GPU 0, then the whole group, from the same starting grid.
  std::printf("grid: %zu columns x %zu rows of floats (%.2f GiB per copy), %zu iterations\n", nx,
              ny, static_cast<double>(nx * ny * sizeof(float)) / 1073741824.0, iterations);
  std::vector<float> result_one(nx * ny), result_n(nx * ny);
  double t1 = 0.0, tn = 0.0;
  {
    jacobi_solver solver(single, nx, ny, true);
    t1 = solve(solver, iterations, result_one);
  }
  {
    jacobi_solver solver(group, nx, ny, direct);
    tn = solve(solver, iterations, result_n);
  }
  const double bytes = 2.0 * static_cast<double>(nx * ny * sizeof(float)) *
                       static_cast<double>(iterations); // each point read once, written once
  const double efficiency = t1 / (static_cast<double>(n) * tn);
  std::printf("1 member (GPU 0): T1 = %.1f ms (%.3f ms per iteration, %.0f GB/s of grid read "
              "and written)\n",
              t1, t1 / static_cast<double>(iterations), bytes / (t1 * 1e6));
  std::printf("%zu members: TN = %.1f ms (%.3f ms per iteration, %.0f GB/s)\n", n, tn,
              tn / static_cast<double>(iterations), bytes / (tn * 1e6));
  std::printf("parallel efficiency T1 / (N * TN) = %.1f / (%zu * %.1f) = %.2f\n", t1, n, tn,
              efficiency);
  if (!real)
    std::puts("  (the members share one GPU, so this efficiency says little about real GPUs)");
  // The in-kernel halo exchange, checked on the small grid, then timed on the large one.
  double in_kernel_error = 0.0;
  try {
    std::vector<float> got_k(want.size()), result_k(nx * ny);
    {
      jacobi_in_kernel solver(group, check_nx, check_ny);
      solver.solve(check_iters, got_k);
    }
    jacobi_in_kernel solver(group, nx, ny);
    const double tk = solver.solve(iterations, result_k);
    in_kernel_error =
        std::max(max_abs_difference(got_k, want), max_abs_difference(result_k, result_n));
    std::printf("%zu members, halos exchanged in one persistent kernel per GPU (%u blocks each, "
                "grid_sync per iteration): TK = %.1f ms (%.3f ms per iteration, %.0f GB/s), "
                "TN / TK = %.2f; max |in-kernel - host or events| %g\n",
                n, solver.blocks(), tk, tk / static_cast<double>(iterations), bytes / (tk * 1e6),
                tn / tk, in_kernel_error);
  } catch (const std::invalid_argument& e) {
    // Only the p2p clique's refusal of a group with no peer path between some members means the
    // in-kernel exchange cannot run here; any other invalid_argument is a failure.
    const std::string what = e.what();
    if (what.find("cohort::p2p_clique: argument 'group'") == std::string::npos ||
        what.find("have no peer path") == std::string::npos) {
      std::printf("in-kernel halo exchange failed: %s\n", e.what());
      return 1;
    }
    std::printf("in-kernel halo exchange skipped (no peer path): %s\n", e.what());
  }
  const double n_vs_one = max_abs_difference(result_n, result_one);
  std::printf("value at the centre after %zu iterations: %.6g\n", iterations,
              static_cast<double>(result_n[(ny / 2) * nx + nx / 2]));
  std::printf("max |%zu members - 1 member| over the grid: %g%s\n", n, n_vs_one,
              n_vs_one == 0.0 ? " (bit for bit the same)" : "");

  const double tolerance = 1e-5;
  if (one_vs_host > tolerance || n_vs_host > tolerance || n_vs_one > tolerance ||
      in_kernel_error > tolerance) {
    std::printf("mismatch: a difference is above %g\n", tolerance);
    return 1;
  }
  std::puts("jacobi ok");
  return 0;
}

int main(int argc, char** argv) {
  std::size_t nx = 16384, ny = 16384, iterations = 1000;
  if (argc > 4 || (argc > 1 && !parse(argv[1], nx)) || (argc > 2 && !parse(argv[2], ny)) ||
      (argc > 3 && !parse(argv[3], iterations)) || nx < 3 || iterations < 1) {
    std::fprintf(stderr, "usage: jacobi [nx >= 3] [ny] [iterations >= 1]   (default 16384 16384 "
                         "1000)\n");
    return 2;
  }
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  try {
    return run(nx, ny, iterations);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jacobi: %s\n", e.what());
    return 1;
  }
}
