// One rank per process under mpirun (or srun): bootstrap from the launcher's environment (or,
// built with COHORT_TEST_USE_MPI, from MPI itself), then all_reduce, all_gather and a ring of
// sends checked against what every rank can compute itself.
// Usage: mpirun -np N nccl_ranks <id file> [late_peer | root_fails]. Prints "rank R ok" per rank;
// "SKIPPED: ..." where the machine has fewer GPUs than ranks. With `late_peer`, rank 0 then posts
// an all_reduce on a communicator with a 10 s time-out that the other ranks never join, and
// destroys it: it must return within the time-out (plus slack) instead of waiting for them
// forever. With `root_fails` (the MPI build, rank 0 started with no GPU visible), every rank must
// get the bootstrap's error; it needs no GPU of its own.
#include <cohort/cohort.cuh>
#if COHORT_TEST_USE_MPI
#include <cohort/nccl/mpi_bootstrap.cuh>
#endif

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int run(int argc, char** argv);

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Rank 0 posts a collective the others never join, then destroys its communicator; the others
// wait (bounded) for rank 0's word that it is done, so that they stay away but alive.
bool late_peer(cohort::communicator& comm, const std::string& done_file) {
  using namespace std::chrono_literals;
  const int rank = comm.rank();
  cohort::communicator short_lived = comm.split(0, rank, 10s);
  cohort::stream s(comm.device());
  cohort::device_buffer<float> x(1 << 16, s);
  x.fill_bytes(0);
  cohort::all_reduce(short_lived, s, x.span(), cohort::sum); // every rank: connects the peers
  short_lived.wait(s, 60s);
  if (rank != 0) {
    const auto started = std::chrono::steady_clock::now();
    while (!std::ifstream(done_file) && seconds_since(started) < 120)
      std::this_thread::sleep_for(50ms);
    return true;
  }
  cohort::all_reduce(short_lived, s, x.span(), cohort::sum); // nobody else comes
  const auto started = std::chrono::steady_clock::now();
  { cohort::communicator doomed = std::move(short_lived); }
  const double took = seconds_since(started);
  std::ofstream(done_file) << "done\n";
  std::printf("rank 0: destroyed a communicator with an unjoined collective in %.1f s\n", took);
  s.synchronize(); // the aborted collective has left the stream
  return took >= 9.9 && took < 10.0 + 20.0;
}

#if COHORT_TEST_USE_MPI
// Rank 0 runs with no GPU visible (the test hides them from it), so bootstrap_from_mpi fails there
// before the id exists: rank 0 must throw its own error, and every other rank an error naming
// rank 0, instead of waiting in MPI_Bcast for ever (which it did before).
int root_fails() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    cohort::communicator comm =
        cohort::bootstrap_from_mpi(MPI_COMM_WORLD, std::chrono::seconds(20));
    std::printf("rank %d: the bootstrap returned though rank 0 has no GPU\n", rank);
    return 1;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::printf("rank %d: %s\n", rank, e.what());
    const bool named = rank == 0
                           ? what.find("no GPU is visible to rank 0") != std::string::npos
                           : what.find("rank 0 could not make the NCCL id") != std::string::npos;
    if (!named) return 1;
  }
  std::printf("rank %d ok\n", rank);
  return 0;
}
#endif

} // namespace

int main(int argc, char** argv) {
#if COHORT_TEST_USE_MPI
  MPI_Init(&argc, &argv);
  const int result = run(argc, argv);
  MPI_Finalize();
  return result;
#else
  return run(argc, argv);
#endif
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <id file>\n", argv[0]);
    return 2;
  }
  const auto env = cohort::launch_environment_from();
  if (!env) {
    std::puts("SKIPPED: not started by a launcher (no rank in the environment)");
    return 0;
  }
#if COHORT_TEST_USE_MPI
  if (argc > 2 && std::string(argv[2]) == "root_fails") return root_fails();
#endif
  if (cohort::device_count() < env->world_size) {
    std::printf("SKIPPED: %d ranks need %d GPUs, %d visible\n", env->world_size, env->world_size,
                cohort::device_count());
    return 0;
  }
  try {
#if COHORT_TEST_USE_MPI
    cohort::communicator comm =
        cohort::bootstrap_from_mpi(MPI_COMM_WORLD, std::chrono::seconds(120));
#else
    cohort::communicator comm =
        cohort::bootstrap_from_environment(argv[1], std::chrono::seconds(120));
#endif
    const int rank = comm.rank(), size = comm.size();
    cohort::stream s(comm.device());
    const std::size_t n = 1000003;
    // Rank r holds r + i % 100: every rank can compute what the others hold.
    auto value = [](int r, std::size_t i) {
      return static_cast<float>(r) + static_cast<float>(i % 100);
    };
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i)
      mine[i] = value(rank, i);
    cohort::device_buffer<float> x(n, s), all(n * size, s), ring(n, s);
    x.copy_from_host(mine);
    all.fill_bytes(0xA5);
    ring.fill_bytes(0xA5);
    cohort::all_gather(comm, s, x.span(), all.span());
    cohort::all_reduce(comm, s, x.span(), cohort::sum);
    {
      cohort::nccl_group batch;
      cohort::send(comm, s, all.span().subspan(rank * n, n), (rank + 1) % size);
      cohort::recv(comm, s, ring.span(), (rank + size - 1) % size);
      batch.end();
    }
    comm.wait(s, std::chrono::seconds(120));
    std::vector<float> sum(n), gathered(n * size), received(n);
    x.copy_to_host(sum);
    all.copy_to_host(gathered);
    ring.copy_to_host(received);
    s.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float expected = 0;
      for (int r = 0; r < size; ++r) {
        expected += value(r, i);
        wrong += gathered[r * n + i] != value(r, i);
      }
      wrong += sum[i] != expected;
      wrong += received[i] != value((rank + size - 1) % size, i);
    }
    if (wrong != 0) {
      std::printf("rank %d: %zu wrong elements\n", rank, wrong);
      return 1;
    }
    if (argc > 2 && std::string(argv[2]) == "late_peer" &&
        !late_peer(comm, std::string(argv[1]) + ".done")) {
      std::printf("rank %d: destroying a communicator with an unjoined collective was not "
                  "bounded by its time-out\n",
                  rank);
      return 1;
    }
    std::printf("rank %d ok\n", rank);
    return 0;
  } catch (const std::exception& e) {
    std::printf("rank failed: %s\n", e.what());
    return 1;
  }
}
