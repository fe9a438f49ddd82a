#!/usr/bin/env bash
# Builds the examples and runs each once, with a time limit, logging what each printed to
# $OUT/examples_run.log (or ./gpu-logs). Pass --one-gpu to show them only GPU 0, so that those
# that need several GPUs run on an emulated group. Exit status: non-zero if any example failed.
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
[[ ${1:-} == --one-gpu ]] && export CUDA_VISIBLE_DEVICES=0
cmake --preset default >"$out/examples_build.log" 2>&1 ||
  { tail -n 30 "$out/examples_build.log"; exit 1; }
# The examples are those examples/CMakeLists.txt defines; configuring wrote their names here.
[[ -s build/examples/examples.txt ]] || { echo "no examples configured (COHORT_BUILD_EXAMPLES?)"; exit 1; }
mapfile -t examples <build/examples/examples.txt
cmake --build --preset default -j "$(nproc)" --target "${examples[@]}" >>"$out/examples_build.log" 2>&1 ||
  { tail -n 30 "$out/examples_build.log"; exit 1; }
status=0
for e in "${examples[@]}"; do
  echo "== $e (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-all})" | tee -a "$out/examples_run.log"
  if timeout 120 "build/examples/$e" >>"$out/examples_run.log" 2>&1 &&
     grep -q "^$e ok" "$out/examples_run.log"; then
    echo "   ok"
  else
    echo "   FAILED"; status=1
  fi
done
exit $status
