// cohort/nccl/bootstrap.cuh — one rank per process, started by mpirun, srun or a
// torchrun-style launcher, with the NCCL id passed through a file every rank can read.
//
//   // mpirun -np 8 ./app /shared/job.id     (or srun, or RANK/WORLD_SIZE/LOCAL_RANK set by hand)
//   cohort::communicator comm = cohort::bootstrap_from_environment(argv[1]);
//   cohort::all_reduce(comm, stream, grads.span(), cohort::sum);
//
// Rank 0 creates the id and writes it to the file; the others wait for the file, tagged with the
// launcher's name for this run (launch_run_tag: mpirun's job, srun's step), so that a file an
// earlier run left at that path is not read as this run's. Where the launcher names no run
// (MPICH's mpiexec, RANK set by hand, torchrun without --rdzv-id or --standalone), remove the
// file before starting, or use a path of its own for each run. Each process takes GPU (local
// rank mod visible GPUs). The same program runs across nodes when the file is on a shared file
// system.
#pragma once

#include "../communication/launch_environment.cuh"
#include "communicator.cuh"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

namespace cohort {

// This process's rank of the communicator the launcher's environment describes (see above),
// on GPU (local rank mod visible GPUs). `id_file` is where rank 0 writes the NCCL id and the others
// read it; `timeout` bounds both the wait for the file and the communicator's creation.
inline communicator
bootstrap_from_environment(const std::string& id_file,
                           std::chrono::milliseconds timeout = default_nccl_timeout,
                           nccl_calls calls = nccl_calls::blocking) {
  const std::optional<launch_environment> env = launch_environment_from();
  if (!env)
    throw std::runtime_error(
        "cohort::bootstrap_from_environment: no rank in the environment (RANK/WORLD_SIZE, "
        "OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS or PMI_RANK/PMI_SIZE); start the program "
        "with mpirun, srun or a launcher that sets them.");
  const int visible = device_count();
  if (visible == 0) throw std::runtime_error("cohort::bootstrap_from_environment: no GPU visible.");
  const device_ref device{env->local_rank % visible};
  // Tagged with the run, where the launcher names it, so that the other ranks never take a file an
  // earlier run left at the same path for this run's.
  const std::string run = launch_run_tag();
  unique_id id;
  if (env->rank == 0) {
    id = unique_id::create();
    id.write_file(id_file, run);
  } else {
    try {
      id = unique_id::read_file(id_file, timeout, run);
    } catch (const timeout_error& e) {
      throw timeout_error("cohort::bootstrap_from_environment (rank " + std::to_string(env->rank) +
                          ", GPU " + std::to_string(device.get()) + "): " + e.what());
    }
  }
  return communicator::create(id, env->world_size, env->rank, device, timeout, calls);
}

} // namespace cohort
