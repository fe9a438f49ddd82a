// One rank per process under mpirun (or srun): bootstrap from the launcher's environment (or,
// built with COHORT_TEST_USE_MPI, from MPI itself), then all_reduce, all_gather and a ring of
// sends checked against what every rank can compute itself.
// Usage: mpirun -np N nccl_ranks <id file>. Prints "rank R ok" per rank; "SKIPPED: ..." where the
// machine has fewer GPUs than ranks.
#include <cohort/cohort.cuh>
#if COHORT_TEST_USE_MPI
#include <cohort/nccl/mpi_bootstrap.cuh>
#endif

#include <chrono>
#include <cstdio>
#include <vector>

int run(int argc, char** argv);

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
  if (cohort::device_count() < env->world_size) {
    std::printf("SKIPPED: %d ranks need %d GPUs, %d visible\n", env->world_size, env->world_size,
                cohort::device_count());
    return 0;
  }
  try {
#if COHORT_TEST_USE_MPI
    cohort::communicator comm = cohort::bootstrap_from_mpi(MPI_COMM_WORLD, std::chrono::seconds(120));
#else
    cohort::communicator comm = cohort::bootstrap_from_environment(argv[1], std::chrono::seconds(120));
#endif
    const int rank = comm.rank(), size = comm.size();
    cohort::stream s(comm.device());
    const std::size_t n = 1000003;
    // Rank r holds r + i % 100: every rank can compute what the others hold.
    auto value = [](int r, std::size_t i) { return static_cast<float>(r) + static_cast<float>(i % 100); };
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i)
      mine[i] = value(rank, i);
    cohort::device_buffer<float> x(n, s), all(n * size, s), ring(n, s);
    x.copy_from_host(mine);
    all.fill_bytes(0xA5);
    ring.fill_bytes(0xA5);
    cohort::all_gather(comm, x.span(), all.span(), s);
    cohort::all_reduce(comm, x.span(), cohort::sum, s);
    {
      cohort::nccl_group batch;
      cohort::send(comm, all.span().subspan(rank * n, n), (rank + 1) % size, s);
      cohort::recv(comm, ring.span(), (rank + size - 1) % size, s);
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
    std::printf("rank %d ok\n", rank);
    return 0;
  } catch (const std::exception& e) {
    std::printf("rank failed: %s\n", e.what());
    return 1;
  }
}
