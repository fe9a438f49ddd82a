// launcher.cuh — what the one-process-per-GPU examples read of their launcher's environment
// beyond cohort::launch_environment_from(): how many ranks share this node. Every rank needs a
// GPU of its own (NCCL refuses two ranks on one GPU), so a node with more ranks than GPUs skips.
#pragma once

#include <cohort/cohort.cuh>

#include <cstdio>
#include <cstdlib>

// Ranks on this node, as mpirun, srun or torchrun say (0 when none says).
inline int ranks_on_this_node() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE",
                           "LOCAL_WORLD_SIZE"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

// True, having printed "SKIPPED: ...", where this node has more ranks than visible GPUs: every
// rank of the node sees the same counts, so all of them skip alike.
inline bool too_few_gpus_for_ranks() {
  const int ranks = ranks_on_this_node(), visible = cohort::device_count();
  if (ranks <= visible) return false;
  std::printf("SKIPPED: %d ranks on this node need %d GPUs, %d visible\n", ranks, ranks, visible);
  return true;
}
