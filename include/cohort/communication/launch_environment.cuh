// cohort/communication/launch_environment.cuh — which rank this process is, as the launcher
// (mpirun, srun, torchrun or a user) says in the environment. Pure host code; no NCCL needed.
//
//   if (auto env = cohort::launch_environment_from())
//     use(env->rank, env->world_size, env->local_rank);
//   const std::string run = cohort::launch_run_tag(); // the same in every rank of this run
#pragma once

#include "../errors/argument_error.cuh"

#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>

namespace cohort {

struct launch_environment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
};

namespace detail {

// A variable holding a whole number from 0 to INT_MAX, digits only; unset or empty: no value.
inline std::optional<int> integer_variable(const std::function<const char*(const char*)>& lookup,
                                           const char* name) {
  const char* text = lookup(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  long long value = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9')
      throw_invalid_argument("launch_environment_from", name,
                             std::string("is '") + text + "', not a whole number.");
    value = value * 10 + (*c - '0');
    if (value > std::numeric_limits<int>::max())
      throw_invalid_argument("launch_environment_from", name,
                             std::string("is '") + text + "', more than any rank count.");
  }
  return static_cast<int>(value);
}

} // namespace detail

// The rank, world size and local rank a launcher set, tried in this order: RANK/WORLD_SIZE/
// LOCAL_RANK (torchrun and hand-set), Open MPI's OMPI_COMM_WORLD_*, MPICH's (and Intel MPI's)
// PMI_RANK/PMI_SIZE/MPI_LOCALRANKID, Slurm's SLURM_PROCID/NTASKS/LOCALID. MPI's variables come
// before Slurm's: an mpiexec inside an sbatch or salloc job leaves the job's SLURM_PROCID and
// SLURM_NTASKS in every process's environment, and they describe the job, not the MPI ranks.
// Nothing found: no value.
inline std::optional<launch_environment>
launch_environment_from(const std::function<const char*(const char*)>& lookup =
                            [](const char* name) { return std::getenv(name); }) {
  struct names {
    const char *rank, *size, *local;
  };
  const names schemes[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};
  for (const names& n : schemes) {
    const auto rank = detail::integer_variable(lookup, n.rank);
    const auto size = detail::integer_variable(lookup, n.size);
    if (!rank || !size) continue;
    if (*rank >= *size)
      detail::throw_invalid_argument("launch_environment_from", n.rank,
                                     "is " + std::to_string(*rank) + " but " + n.size + " is " +
                                         std::to_string(*size) + ".");
    launch_environment env;
    env.rank = *rank;
    env.world_size = *size;
    env.local_rank = detail::integer_variable(lookup, n.local).value_or(*rank);
    return env;
  }
  return std::nullopt;
}

// What tells this run of the program from the launcher's earlier runs, the same in every one of
// its processes: Open MPI 5's and PMIx's PMIX_NAMESPACE, Open MPI 4's OMPI_MCA_ess_base_jobid,
// srun's SLURM_JOB_ID.SLURM_STEP_ID, torchrun's TORCHELASTIC_RUN_ID; empty where none is set
// (MPICH's mpiexec, hand-set RANK) or where torchrun was given no --rdzv-id (its run id is then
// "none" in every run; --standalone makes a fresh one). bootstrap_from_environment tags its id
// file with it, so that a file an earlier run left behind is not taken for this run's.
inline std::string launch_run_tag(const std::function<const char*(const char*)>& lookup =
                                      [](const char* name) { return std::getenv(name); }) {
  auto value = [&](const char* name) -> std::string {
    const char* text = lookup(name);
    return text != nullptr ? std::string(text) : std::string();
  };
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"})
    if (std::string tag = value(name); !tag.empty()) return std::string(name) + "=" + tag;
  if (std::string job = value("SLURM_JOB_ID"), step = value("SLURM_STEP_ID");
      !job.empty() && !step.empty())
    return "SLURM=" + job + "." + step;
  if (std::string run = value("TORCHELASTIC_RUN_ID"); !run.empty() && run != "none")
    return "TORCHELASTIC_RUN_ID=" + run;
  return {};
}

} // namespace cohort
