# Runs a program and passes only if it exits 0 and its output matches EXPECT (a regex), so that a
# program that prints its verdict and then crashes while tearing down fails. ctest alone cannot
# ask for both: PASS_REGULAR_EXPRESSION ignores the exit code.
#   cmake -D "COMMAND=prog;arg1;arg2" -D "EXPECT=regex" [-D SKIP_CODE=77] -P expect_output.cmake
# A program that exits with SKIP_CODE passes here; its output (say "SKIPPED: why") is what the
# test's SKIP_REGULAR_EXPRESSION reports as skipped.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(DEFINED SKIP_CODE AND status STREQUAL "${SKIP_CODE}")
  return()
endif()
if(NOT status STREQUAL "0")
  message(FATAL_ERROR "exited with status '${status}' (it must exit 0)")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "its output does not match '${EXPECT}'")
endif()
