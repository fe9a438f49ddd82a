// README's "NCCL, in one process or one process per GPU", as a program that plain nvcc builds
// with the flags the README gives for builds without CMake (tests/compile/CMakeLists.txt runs it):
// <cohort/cohort.cuh> holds the NCCL layer only under COHORT_WITH_NCCL=1, which the CMake target
// defines and a plain build must.
#include <cohort/cohort.cuh>

#include <chrono>

int main(int argc, char** argv) {
  if (argc < 2) return 0; // built, not run
  cohort::device_group group(cohort::devices());
  const std::size_t count = std::size_t(1) << 20;

  // One process driving every GPU: one rank per member, calls grouped for you.
  cohort::nccl_clique nccl(group);
  cohort::distributed_buffer<float> grads(group,
                                          cohort::partition::replicated(count, group.size()));
  cohort::all_reduce(nccl, grads, cohort::avg);
  nccl.wait(std::chrono::seconds(30));
  cohort::nccl_clique bounded(group, cohort::default_nccl_timeout, cohort::nccl_calls::bounded);

  // One process per GPU, under mpirun, srun or a torchrun-style launcher.
  cohort::communicator comm = cohort::bootstrap_from_environment(argv[1]);
  cohort::stream stream(comm.device());
  cohort::device_buffer<float> grads_on_this_gpu(count, stream);
  cohort::all_reduce(comm, stream, grads_on_this_gpu.span(), cohort::sum);
  comm.wait(stream, std::chrono::seconds(30));
}
