// cohort/version.cuh — the library's version, and whether it was built with NCCL.
#pragma once

#define COHORT_VERSION_MAJOR 0
#define COHORT_VERSION_MINOR 1
#define COHORT_VERSION_PATCH 0

// Set by the cohort::cohort CMake target when NCCL was found; 0 means the NCCL-free build.
#ifndef COHORT_WITH_NCCL
#define COHORT_WITH_NCCL 0
#endif
