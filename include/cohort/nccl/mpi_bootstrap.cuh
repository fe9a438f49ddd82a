// cohort/nccl/mpi_bootstrap.cuh — one NCCL rank per MPI rank, the id passed by MPI.
//
// Not part of <cohort/cohort.cuh>: include it where MPI is available and link `cohort::mpi`
// (made by cohort's CMake when it finds MPI).
//
//   MPI_Init(&argc, &argv);
//   cohort::communicator comm = cohort::bootstrap_from_mpi(MPI_COMM_WORLD);
//   cohort::all_reduce(comm, stream, data, cohort::sum);
//   // destroy comm, then MPI_Finalize();
//
// Rank 0 of `mpi` creates the id and broadcasts it; each process takes GPU (its rank among the
// processes of its node mod the visible GPUs). Where rank 0 cannot make the id (no GPU visible
// there, an NCCL error), it broadcasts that instead, so that every rank throws, naming rank 0 and
// its error, rather than waiting in MPI_Bcast for ever; rank 0 rethrows its own error.
#pragma once

#include "communicator.cuh"

#include <mpi.h>

#include <cstdio>
#include <exception>
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
  auto no_gpu = [&] {
    return std::runtime_error("cohort::bootstrap_from_mpi: no GPU is visible to rank " +
                              std::to_string(rank) +
                              "; check CUDA_VISIBLE_DEVICES and the launcher's GPU binding.");
  };
  // Every rank reaches the broadcast, rank 0 with the id or with why it has none.
  struct id_or_error {
    ncclUniqueId id;
    int made;
    char error[480];
  } sent{};
  std::exception_ptr failed;
  if (rank == 0) {
    try {
      if (device_count() == 0) throw no_gpu();
      sent.id = unique_id::create().native();
      sent.made = 1;
    } catch (const std::exception& e) {
      failed = std::current_exception();
      std::snprintf(sent.error, sizeof sent.error, "%s", e.what());
    } catch (...) {
      failed = std::current_exception();
      std::snprintf(sent.error, sizeof sent.error, "an exception of no standard type");
    }
  }
  detail::check_mpi(MPI_Bcast(&sent, sizeof sent, MPI_BYTE, 0, mpi), "MPI_Bcast");
  if (failed) std::rethrow_exception(failed);
  if (sent.made == 0)
    throw std::runtime_error("cohort::bootstrap_from_mpi: rank 0 could not make the NCCL id, so "
                             "rank " +
                             std::to_string(rank) + " cannot join: " + sent.error);
  const int visible = device_count();
  if (visible == 0) throw no_gpu();
  return communicator::create(unique_id::from_native(sent.id), size, rank,
                              device_ref{local_rank % visible}, timeout, calls);
}

} // namespace cohort
