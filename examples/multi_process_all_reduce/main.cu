// multi_process_all_reduce — one process per GPU, the way a job scales past one machine: started
// by mpirun (or srun, or a torchrun-style launcher), each process finds its rank in the
// launcher's environment, rank 0 hands the NCCL id to the others through a file on a shared
// filesystem, and every rank all-reduces its gradients.
//
//   mpirun -np 2 build/examples/multi_process_all_reduce /tmp/job.id
//   srun -N 2 --ntasks-per-node 8 build/examples/multi_process_all_reduce /shared/job.id
#include <cohort/cohort.cuh>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Ranks on this node, as mpirun, srun or torchrun say (0 when none says).
int ranks_on_this_node() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE",
                           "LOCAL_WORLD_SIZE"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <id file on a filesystem every rank sees>\n", argv[0]);
    return 2;
  }
  const auto env = cohort::launch_environment_from();
  if (!env) {
    std::puts(
        "SKIPPED: not started by a launcher (no rank in the environment); run it under mpirun");
    return 0;
  }
  if (cohort::device_count() == 0) {
    std::puts("No GPU is visible: nothing to run.");
    return 0;
  }
  if (ranks_on_this_node() > cohort::device_count()) {
    // Every rank needs its own GPU (NCCL refuses two ranks on one GPU); all ranks skip alike.
    std::printf("SKIPPED: %d ranks on this node need %d GPUs, %d visible\n", ranks_on_this_node(),
                ranks_on_this_node(), cohort::device_count());
    return 0;
  }
  // Creation is bounded: if a rank never starts, the others throw timeout_error after 2 minutes.
  cohort::communicator comm = cohort::bootstrap_from_environment(argv[1], std::chrono::minutes(2));
  const int rank = comm.rank(), size = comm.size();
  cohort::stream stream(comm.device());

  // "Gradients": 64 Mi floats per rank; rank r holds (r + 1) * (i % 7).
  const std::size_t n = std::size_t{1} << 26;
  cohort::device_buffer<float> grads(n, stream);
  float* g = grads.data();
  cohort::for_each_n(stream, n, [=] __device__(std::size_t i) {
    g[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7));
  });
  cohort::all_reduce(comm, stream, grads.span(), cohort::sum); // warm-up: NCCL connects here

  cohort::event start(comm.device(), cohort::event::timing::on),
      stop(comm.device(), cohort::event::timing::on);
  const int calls = 20;
  start.record(stream);
  for (int k = 0; k < calls; ++k)
    cohort::all_reduce(comm, stream, grads.span(), cohort::avg); // the average keeps values fixed
  stop.record(stream);
  comm.wait(stream, std::chrono::minutes(1)); // bounded: aborts and throws if a rank is stuck
  const double ms = cohort::elapsed(start, stop).count() / calls;

  // After the first sum every rank holds S * (i % 7) with S = size (size + 1) / 2; averages keep it
  // (exactly where size is a power of two; NCCL's average scales each input by 1/size before the
  // sum, so other sizes may move the last bit, which the check allows).
  std::vector<float> out(n);
  grads.copy_to_host(out);
  stream.synchronize();
  const float s = static_cast<float>(size * (size + 1) / 2);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float want = s * static_cast<float>(i % 7);
    wrong += !(std::fabs(out[i] - want) <= 1e-4f * want); // a NaN counts as wrong
  }
  const double bytes = static_cast<double>(n * sizeof(float));
  const double algbw = bytes / (ms * 1e-3) / 1e9;
  std::printf("rank %d of %d (GPU %d): all_reduce of %.0f MiB took %.3f ms: algbw %.1f GB/s, busbw "
              "%.1f GB/s; %zu wrong elements\n",
              rank, size, comm.device().get(), bytes / (1 << 20), ms, algbw,
              algbw * 2.0 * (size - 1) / size, wrong);
  if (wrong != 0) return 1;
  std::printf("rank %d ok\n", rank);
  return 0;
}
