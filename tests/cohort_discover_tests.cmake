# Run after a test program is built: lists its doctest cases and writes one ctest test per case,
# so that each case passes, fails or is *skipped* (exit code 77) on its own.
#
# Inputs (-D): EXECUTABLE, SUITE, OUTPUT, LABELS (;-list), TIMEOUT.
# A case name must not hold ';' (CMake's list separator would cut it in two; the test main fails
# a run in which no case matched, so such a name shows as a failure, not a pass), nor an unbalanced
# '[' or ']': CMake does not split a list inside brackets, so every case listed after it would fold
# into one test. That is refused here, naming the case.
execute_process(COMMAND "${EXECUTABLE}" --list-test-cases --no-version
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing the test cases of ${EXECUTABLE} failed (${rc}):\n${listing}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(script "")
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^\\[doctest\\]" OR line MATCHES "^====")
    continue()
  endif()
  if(line MATCHES ";")
    message(FATAL_ERROR "${EXECUTABLE}: a test case name near \"${line}\" holds an unbalanced "
                        "'[' or ']', which would fold the cases after it into one ctest test: "
                        "rename it.")
  endif()
  # doctest filters: ',' separates names and '\' escapes; '*' and '?' are wildcards.
  string(REPLACE "\\" "\\\\" filter "${line}")
  string(REPLACE "," "\\," filter "${filter}")
  set(name "${SUITE}: ${line}")
  # A case that measures device-wide state (free memory) runs alone: name it "... [serial]".
  set(serial "")
  if(line MATCHES "\\[serial\\]$")
    set(serial " RUN_SERIAL TRUE")
  endif()
  string(APPEND script
    "add_test([==[${name}]==] [==[${EXECUTABLE}]==] [==[--test-case=${filter}]==] --no-version)\n"
    "set_tests_properties([==[${name}]==] PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${TIMEOUT}"
    " LABELS [==[${LABELS}]==]${serial})\n")
endforeach()
file(WRITE "${OUTPUT}" "${script}")
