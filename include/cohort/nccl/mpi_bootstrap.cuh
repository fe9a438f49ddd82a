// cohort/nccl/mpi_bootstrap.cuh — one NCCL rank per MPI rank, the id passed by MPI.
//
// Not part of <cohort/cohort.cuh>: include it where MPI is available and link `cohort::mpi`
// (made by cohort's CMake when it finds MPI).
//
//   MPI_Init(&argc, &argv);
//   cohort::communicator comm = cohort::bootstrap_from_mpi(MPI_COMM_WORLD);
//   cohort::all_reduce(comm, data, cohort::sum, stream);
//   // destroy comm, then MPI_Finalize();
//
// Rank 0 of `mpi` creates the id and broadcasts it; each process takes GPU (its rank among the
// processes of its node mod the visible GPUs).
#pragma once

#include "communicator.cuh"

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace cohort {

namespace detail {

inline void check_mpi(int result, const char* call) {
  if (result == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(result, text, &length);
  throw std::runtime_error(std::string("cohort::bootstrap_from_mpi: ") + call + " failed: " + text);
}

} // namespace detail

inline communicator bootstrap_from_mpi(MPI_Comm mpi,
                                       std::chrono::milliseconds timeout = default_nccl_timeout,
                                       nccl_calls calls = nccl_calls::blocking) {
  int rank = 0, size = 0;
  detail::check_mpi(MPI_Comm_rank(mpi, &rank), "MPI_Comm_rank");
  detail::check_mpi(MPI_Comm_size(mpi, &size), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  detail::check_mpi(MPI_Comm_split_type(mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                    "MPI_Comm_split_type");
  int local_rank = 0;
  const int got_local = MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  detail::check_mpi(got_local, "MPI_Comm_rank (node)");
  const int visible = device_count();
  if (visible == 0) throw std::runtime_error("cohort::bootstrap_from_mpi: no GPU visible.");
  ncclUniqueId id{};
  if (rank == 0) id = unique_id::create().native();
  detail::check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi), "MPI_Bcast");
  return communicator::create(unique_id::from_native(id), size, rank,
                              device_ref{local_rank % visible}, timeout, calls);
}

} // namespace cohort
