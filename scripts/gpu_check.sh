#!/usr/bin/env bash
# One command for a GPU machine: configure, build, run the whole ctest suite (GPU tests included),
# then compute-sanitizer's memcheck, racecheck and synccheck over the GPU test program.
# Logs go to $OUT when set (the device tool's folder), else ./gpu-logs. Exit status: non-zero if
# any step failed. Usage: scripts/gpu_check.sh [--no-sanitizer]
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # never use NVLink multicast on shared machines
status=0
step() { # step NAME COMMAND...: runs COMMAND, logs to $out/NAME.log, records failure
  local name=$1; shift
  echo "== $name: $*"
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "!! $name failed; its log ends:"; tail -n 40 "$out/$name.log"; status=1; return 1
  fi
  tail -n 3 "$out/$name.log"
}

{ date -u; nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$out/env.log" 2>&1
grep -E "Driver Version|NVIDIA H|release" "$out/env.log" | head -5

step configure cmake --preset default || exit 1
step build cmake --build --preset default -j "$(nproc)" || exit 1
step ctest ctest --preset test -j 8
grep -E "tests passed|tests failed|Skipped|\(Failed\)|Not Run" "$out/ctest.log" | tail -20

if [[ "${1:-}" != "--no-sanitizer" ]]; then
  for tool in memcheck racecheck synccheck; do
    # API errors the tests provoke on purpose (an allocation too large) are not defects.
    step "sanitizer-$tool" compute-sanitizer --tool "$tool" --error-exitcode 99 \
      --report-api-errors no build/tests/gpu/gpu_tests
  done
fi
echo "== gpu_check: $([[ $status == 0 ]] && echo all steps passed || echo some step FAILED)"
exit $status
