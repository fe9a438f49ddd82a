#!/usr/bin/env bash
# One command for a GPU machine: configure and build, run the whole ctest suite (GPU tests
# included), the tour, the benchmarks, then compute-sanitizer's memcheck, racecheck and synccheck
# over the GPU test program. Logs go to $OUT when set (the device tool's folder), else ./gpu-logs.
# Exit status: non-zero if any step failed.
#
# Usage: scripts/gpu_check.sh [--no-sanitizer] [--no-bench] [--sanitizer-timeout SECONDS]
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # never use NVLink multicast on shared machines
sanitize=1 bench=1 sanitizer_timeout=180
while (($#)); do
  case $1 in
    --no-sanitizer) sanitize=0 ;;
    --no-bench) bench=0 ;;
    --sanitizer-timeout) sanitizer_timeout=$2; shift ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done
status=0
step() { # step NAME COMMAND...: runs COMMAND, appends to $out/NAME.log, records failure
  local name=$1; shift
  echo "== $name: $*"
  if ! "$@" >>"$out/$name.log" 2>&1; then
    echo "!! $name failed; its log ends:"; tail -n 40 "$out/$name.log"; status=1; return 1
  fi
  tail -n 3 "$out/$name.log"
}

{ date -u; nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$out/env.log" 2>&1
grep -E "Driver Version|NVIDIA H|release" "$out/env.log" | head -5

step build cmake --preset default || exit 1
step build cmake --build --preset default -j "$(nproc)" || exit 1
step ctest ctest --preset test -j 8
grep -E "tests passed|tests failed|Skipped|\(Failed\)|Not Run" "$out/ctest.log" | tail -20
step examples build/examples/tour

if ((bench)); then
  step bench build/benchmarks/for_each_bench
  [[ -x build/benchmarks/nccl_bench ]] && step bench build/benchmarks/nccl_bench
  cat "$out/bench.log"
fi

if ((sanitize)); then
  # API errors the tests provoke on purpose (an allocation too large) are not defects. The case
  # past 2^31 elements is left out: under the sanitizers it would outlast the lease.
  for tool in memcheck racecheck synccheck; do
    step sanitizer timeout "$sanitizer_timeout" compute-sanitizer --tool "$tool" --error-exitcode 99 \
      --report-api-errors no build/tests/gpu/gpu_tests --test-case-exclude='*past 2^31*'
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases:" "$out/sanitizer.log"
fi
echo "== gpu_check: $([[ $status == 0 ]] && echo all steps passed || echo some step FAILED)"
exit $status
