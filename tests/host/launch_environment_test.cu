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
