# What the cohort target needs: the CUDA runtime, CCCL (Thrust, CUB, libcu++) and, unless
# COHORT_WITH_NCCL is off, NCCL. Shared by the build tree and the installed package config.
find_package(CUDAToolkit 12.0 REQUIRED)

if(NOT TARGET CCCL::CCCL)
  # The toolkit ships CCCL's CMake package in lib64/cmake (lib/cmake on some layouts).
  find_package(CCCL CONFIG REQUIRED
    HINTS "${CUDAToolkit_LIBRARY_DIR}/cmake" "${CUDAToolkit_LIBRARY_ROOT}/lib64/cmake"
          "${CUDAToolkit_LIBRARY_ROOT}/lib/cmake")
endif()

if(COHORT_WITH_NCCL AND NOT TARGET NCCL::nccl)
  find_package(NCCL 2.18)
  if(NOT NCCL_FOUND)
    message(FATAL_ERROR
      "cohort: NCCL was not found. Set NCCL_ROOT to its install prefix (the folder holding "
      "include/nccl.h and lib/libnccl.so), or configure with -DCOHORT_WITH_NCCL=OFF to build "
      "without the NCCL layer (the peer-to-peer engine needs no NCCL).")
  endif()
endif()
