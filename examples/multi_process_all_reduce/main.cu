// multi_process_all_reduce — one process per GPU, the way a job scales past one machine: started
// by mpirun (or srun, or a torchrun-style launcher), each process finds its rank in the
// launcher's environment, rank 0 hands the NCCL id to the others through a file on a shared
// filesystem, and every rank all-reduces its gradients.
//
//   mpirun -np 2 build/examples/multi_process_all_reduce /tmp/job.id
//   srun -N 2 --ntasks-per-node 8 build/examples/multi_process_all_reduce /shared/job.id
#include "../common/launcher.cuh"

#include <cohort/cohort.cuh>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

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
  if (too_few_gpus_for_ranks()) return 0; // every rank needs a GPU of its own
  // Creation is bounded: if a rank never starts, the others throw timeout_error after 2 minutes.
  cohort::communicator comm = cohort::bootstrap_from_environment(argv[1], std::chrono::minutes(2));
  const int rank = comm.rank(), size = comm.size();
  cohort::stream stream(comm.device());

  // "Gradients": 64 Mi floats per rank; rank r holds (i % 7) + 16 r, a value of its own, so that
  // a collective that left any rank's values alone shows. Small integers: every sum is exact.
  const std::size_t n = std::size_t{1} << 26;
  cohort::device_buffer<float> grads(n, stream);
  float* g = grads.data();
  const auto load = [&] {
    cohort::for_each_n(stream, n, [=] __device__(std::size_t i) {
      g[i] = static_cast<float>(static_cast<int>(i % 7) + 16 * rank);
    });
  };
  std::vector<float> out(n);
  // Elements of `grads` that are not want(i) within `slack` (0: exactly); a NaN counts as wrong.
  const auto wrong_elements = [&](auto want, double slack) {
    grads.copy_to_host(out);
    stream.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += !(std::fabs(static_cast<double>(out[i]) - want(i)) <= slack);
    return wrong;
  };
  const double ranks_term = 16.0 * size * (size - 1) / 2; // the sum over ranks of 16 r

  load();
  cohort::all_reduce(comm, stream, grads.span(), cohort::sum); // warm-up: NCCL connects here
  comm.wait(stream, std::chrono::minutes(1));
  const std::size_t wrong_sum = wrong_elements(
      [&](std::size_t i) {
        return static_cast<double>(size) * static_cast<double>(i % 7) + ranks_term;
      },
      0.0);

  // The timing loop: the values are equal on every rank after the sum, so averages keep them.
  cohort::event start(comm.device(), cohort::event::timing::on),
      stop(comm.device(), cohort::event::timing::on);
  const int calls = 20;
  start.record(stream);
  for (int k = 0; k < calls; ++k)
    cohort::all_reduce(comm, stream, grads.span(), cohort::avg);
  stop.record(stream);
  comm.wait(stream, std::chrono::minutes(1)); // bounded: aborts and throws if a rank is stuck
  const double ms = cohort::elapsed(start, stop).count() / calls;

  // The average checked on values of each rank's own: (i % 7) + 8 (size - 1) on every rank. It is
  // exact where size is a power of two; otherwise NCCL's average, which scales each input by
  // 1/size before the sum, may round once per rank, by at most half a unit in the last place of
  // the largest input, which `slack` allows and nothing more.
  load();
  cohort::all_reduce(comm, stream, grads.span(), cohort::avg);
  comm.wait(stream, std::chrono::minutes(1));
  const bool power_of_two = (size & (size - 1)) == 0;
  const double largest = 6.0 + 16.0 * (size - 1);
  const double slack = power_of_two ? 0.0 : size * largest * 1.2e-7;
  const std::size_t wrong_avg = wrong_elements(
      [&](std::size_t i) { return static_cast<double>(i % 7) + ranks_term / size; }, slack);
  const std::size_t wrong = wrong_sum + wrong_avg;
  const double bytes = static_cast<double>(n * sizeof(float));
  const double algbw = bytes / (ms * 1e-3) / 1e9;
  std::printf("rank %d of %d (GPU %d): all_reduce of %.0f MiB took %.3f ms: algbw %.1f GB/s, busbw "
              "%.1f GB/s; %zu wrong elements of the sum, %zu of the average\n",
              rank, size, comm.device().get(), bytes / (1 << 20), ms, algbw,
              algbw * 2.0 * (size - 1) / size, wrong_sum, wrong_avg);
  if (wrong != 0) return 1;
  std::printf("rank %d ok\n", rank);
  return 0;
}
