# Configures, builds and runs the consumer project one way (-D WAY=...). See CMakeLists.txt.
file(REMOVE_RECURSE "${BINARY}")
set(configure ${CMAKE_COMMAND} -S "${SOURCE}" -B "${BINARY}" -G "${GENERATOR}"
    -D COHORT_CONSUME=${WAY}
    -D COHORT_SOURCE_DIR=${COHORT_SOURCE_DIR}
    -D CMAKE_PREFIX_PATH=${PREFIX}
    -D CMAKE_CUDA_COMPILER=${CUDA_COMPILER}
    "-D CMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"
    -D COHORT_WITH_NCCL=${WITH_NCCL})
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  list(APPEND configure -D NCCL_INCLUDE_DIR=${NCCL_INCLUDE_DIR} -D NCCL_LIBRARY=${NCCL_LIBRARY})
endif()
foreach(step IN ITEMS configure build run)
  if(step STREQUAL "build")
    set(command ${CMAKE_COMMAND} --build "${BINARY}")
  elseif(step STREQUAL "run")
    set(command "${BINARY}/consumer")
  else()
    set(command ${configure})
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${WAY}): ${step} failed (${rc})")
  endif()
endforeach()
# The program checks its own result: it must say so, and (above) exit 0.
if(NOT out MATCHES "consumer ok")
  message(FATAL_ERROR "consumer (${WAY}): the program did not print 'consumer ok'")
endif()
