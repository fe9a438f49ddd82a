#!/usr/bin/env bash
# Runs one doctest selection of build/tests/gpu/gpu_tests under compute-sanitizer TOOL, COPIES
# processes at once, with COHORT_TEST_BACKTRACE set (tests/support/main.cu), and resolves the
# program's frames of any crash's stack with addr2line: whether a crash under a sanitizer is in
# cohort's code, the test's or the tool's. Logs: $OUT/crash-N.log.
#   scripts/crash_backtrace.sh TOOL COPIES TIMEOUT_S DOCTEST_OPTIONS...
set -u
tool=$1 copies=$2 limit=$3
shift 3
program=build/tests/gpu/gpu_tests
out=${OUT:-.}
export NCCL_NVLS_ENABLE=0 COHORT_TEST_BACKTRACE=1 COHORT_TEST_ROUNDS_DIVISOR=10
export COHORT_P2P_PATIENCE_MS=300000
for ((i = 1; i <= copies; ++i)); do
  (
    # The odd copies with the SM shares that the sanitizer runs use, the even ones without.
    COHORT_NO_SM_PARTITIONING=$((1 - i % 2)) timeout "$limit" compute-sanitizer --tool "$tool" \
      --error-exitcode 99 --report-api-errors no --kernel-name-exclude kns=ncclDevKernel \
      "$program" --duration=true "$@" >"$out/crash-$i.log" 2>&1
    echo "== exit status $?" >>"$out/crash-$i.log"
  ) &
done
wait
for ((i = 1; i <= copies; ++i)); do
  log=$out/crash-$i.log
  echo "== copy $i: $(tail -1 "$log")"
  grep -E 'CRASHED|Status:|SUMMARY' "$log"
  grep -oE 'gpu_tests\(\+0x[0-9a-f]+\)' "$log" | grep -oE '0x[0-9a-f]+' |
    xargs -r addr2line -C -f -p -e "$program" | tee -a "$log"
done
