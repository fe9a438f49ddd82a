// Reading the launcher's environment (no NCCL involved).
#include "testing.cuh"

#include <doctest/doctest.h>

#include <map>
#include <string>

namespace {

auto lookup_in(const std::map<std::string, std::string>& env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

} // namespace

TEST_CASE("launch environments of torchrun, Open MPI, Slurm and MPICH are read") {
  auto torchrun = cohort::launch_environment_from(
      lookup_in({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
  REQUIRE(torchrun);
  CHECK(torchrun->rank == 3);
  CHECK(torchrun->world_size == 8);
  CHECK(torchrun->local_rank == 1);
  auto ompi = cohort::launch_environment_from(lookup_in({{"OMPI_COMM_WORLD_RANK", "1"},
                                                         {"OMPI_COMM_WORLD_SIZE", "2"},
                                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  REQUIRE(ompi);
  CHECK(ompi->rank == 1);
  CHECK(ompi->world_size == 2);
  auto slurm = cohort::launch_environment_from(
      lookup_in({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "5"}}));
  REQUIRE(slurm);
  CHECK(slurm->world_size == 16);
  auto mpich = cohort::launch_environment_from(lookup_in({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}}));
  REQUIRE(mpich);
  CHECK(mpich->local_rank == 0);
  CHECK_FALSE(cohort::launch_environment_from(lookup_in({})));
  // mpiexec (MPICH, Intel MPI) inside an sbatch job: every rank also sees the job's step, rank 0
  // of 1. The MPI ranks win (Slurm's variables used to, making every process rank 0 of 1).
  auto inside_slurm = cohort::launch_environment_from(lookup_in({{"SLURM_PROCID", "0"},
                                                                 {"SLURM_NTASKS", "1"},
                                                                 {"SLURM_LOCALID", "0"},
                                                                 {"PMI_RANK", "3"},
                                                                 {"PMI_SIZE", "8"},
                                                                 {"MPI_LOCALRANKID", "3"}}));
  REQUIRE(inside_slurm);
  CHECK(inside_slurm->rank == 3);
  CHECK(inside_slurm->world_size == 8);
  CHECK(inside_slurm->local_rank == 3);
  CHECK_THROWS_WITH_AS(
      cohort::launch_environment_from(lookup_in({{"RANK", "x"}, {"WORLD_SIZE", "2"}})),
      doctest::Contains("argument 'RANK'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      cohort::launch_environment_from(lookup_in({{"RANK", "2"}, {"WORLD_SIZE", "2"}})),
      doctest::Contains("is 2 but WORLD_SIZE is 2"), std::invalid_argument);
}

// Seen while writing tests/fuzz/environment_fuzz.cpp: strtol took "+5" and " 5", and values past
// INT_MAX wrapped.
TEST_CASE("launch variables must be plain whole numbers that fit an int") {
  for (const char* bad : {"+1", " 1", "1 ", "-0", "0x1", "2147483648", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(
        cohort::launch_environment_from(lookup_in({{"RANK", bad}, {"WORLD_SIZE", "4"}})),
        doctest::Contains("argument 'RANK'"), std::invalid_argument);
  }
  const auto most =
      cohort::launch_environment_from(lookup_in({{"RANK", "0"}, {"WORLD_SIZE", "2147483647"}}));
  REQUIRE(most);
  CHECK(most->world_size == 2147483647);
}

TEST_CASE("a run's tag comes from its launcher and tells it from earlier runs") {
  CHECK(cohort::launch_run_tag(lookup_in({})).empty());
  CHECK(cohort::launch_run_tag(lookup_in({{"PMIX_NAMESPACE", "prterun-node-123@1"},
                                          {"SLURM_JOB_ID", "41"},
                                          {"SLURM_STEP_ID", "0"}})) ==
        "PMIX_NAMESPACE=prterun-node-123@1");
  CHECK(cohort::launch_run_tag(lookup_in({{"OMPI_MCA_ess_base_jobid", "2837"}})) ==
        "OMPI_MCA_ess_base_jobid=2837");
  const auto first =
      cohort::launch_run_tag(lookup_in({{"SLURM_JOB_ID", "41"}, {"SLURM_STEP_ID", "0"}}));
  const auto second =
      cohort::launch_run_tag(lookup_in({{"SLURM_JOB_ID", "41"}, {"SLURM_STEP_ID", "1"}}));
  CHECK(first == "SLURM=41.0");
  CHECK(first != second);
  // A batch script's own environment (no step) names no run.
  CHECK(cohort::launch_run_tag(lookup_in({{"SLURM_JOB_ID", "41"}})).empty());
  CHECK(cohort::launch_run_tag(lookup_in({{"TORCHELASTIC_RUN_ID", "abc"}})) ==
        "TORCHELASTIC_RUN_ID=abc");
  // torchrun's run id without --rdzv-id is "none" in every run: it names no run.
  CHECK(cohort::launch_run_tag(lookup_in({{"TORCHELASTIC_RUN_ID", "none"}})).empty());
}
