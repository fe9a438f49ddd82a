# Default CUDA architectures for cohort's own build (tests, examples, benchmarks).
#
# `native` builds exactly for the GPUs of this machine, but CMake fails with it where no GPU is
# visible (CI). So: `native` when nvidia-smi reports a GPU, else 90 (sm_90 machine code and
# compute_90 PTX, which the driver JIT-compiles for any newer GPU).
function(cohort_default_architectures)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
    return()
  endif()
  set(_arch 90)
  find_program(_cohort_nvidia_smi nvidia-smi)
  if(_cohort_nvidia_smi)
    execute_process(COMMAND ${_cohort_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _caps RESULT_VARIABLE _rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 20)
    if(_rc EQUAL 0 AND _caps MATCHES "^[0-9]")
      set(_arch native)
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES ${_arch} CACHE STRING "CUDA architectures cohort's own targets build for")
  message(STATUS "cohort: CUDA architectures ${_arch} (set CMAKE_CUDA_ARCHITECTURES to choose)")
endfunction()
