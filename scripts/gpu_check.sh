#!/usr/bin/env bash
# The check for a GPU machine: build, the ctest suite, the examples, the benchmarks' report, and
# compute-sanitizer over the GPU test program. Exit status: non-zero if any step failed.
#
# Usage: scripts/gpu_check.sh [--no-build] [--no-tests] [--benchmarks "NAME..."] [--tools "TOOL..."]
#          [--cases DOCTEST-OPTIONS] [--pieces FILE] [--sanitizer-timeout SECONDS] [--ncu]
#   --no-build          reuse build/ from an earlier call on the same machine
#   --no-tests          skip ctest and the examples (a call for the benchmarks or the sanitizers)
#   --benchmarks        the benchmarks to run into a report (default: all; "" runs none)
#   --tools             compute-sanitizer tools (default: memcheck racecheck synccheck initcheck;
#                       "" runs none)
#   --cases             doctest options for the sanitized runs instead of the pieces, e.g.
#                       '--source-file=*sort_test*' or '--first=40'
#   --pieces            one sanitized process per line of FILE, one after another (default:
#                       scripts/sanitizer_pieces.txt; "" runs the whole program in one process)
#   --sanitizer-timeout seconds per sanitized process (default 540)
#   --ncu               Nsight Compute over two NVTX ranges (that ncu sees cohort's ranges)
# Logs: $OUT (or ./gpu-logs) gets gpu_check.log (this run's lines), ctest.log, examples.log,
# sanitizer.log, summary.md (the benchmark report's) and logs.tar.gz (everything, report included).
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-logs}
work=$(mktemp -d)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on shared machines
# A p2p barrier waits a minute for a peer, not five: a defect costs the run a minute.
export COHORT_P2P_PATIENCE_MS=${COHORT_P2P_PATIENCE_MS:-60000}
export COHORT_TEST_BACKTRACE=1 # a test program that crashes prints its stack
build=1 tests=1 benchmarks="for_each_bench copy_bench nccl_bench p2p_bench fused_bench scan_sort_bench managed_bench"
tools="memcheck racecheck synccheck initcheck" cases="" pieces=scripts/sanitizer_pieces.txt
timeout_s=540 ncu=0
while (($#)); do
  case $1 in
    --no-build) build=0 ;;
    --no-tests) tests=0 ;;
    --benchmarks) benchmarks=$2; shift ;;
    --tools) tools=$2; shift ;;
    --cases) cases=$2; shift ;;
    --pieces) pieces=$2; shift ;;
    --sanitizer-timeout) timeout_s=$2; shift ;;
    --ncu) ncu=1 ;;
    *) echo "unknown option $1 (see the usage at the top of $0)"; exit 2 ;;
  esac
  shift
done
exec > >(tee -a "$out/gpu_check.log") 2>&1
status=0
# ctest's log goes straight to $out: a call cut off at the device's time limit still returns it.
logfile() { [[ $1 == ctest ]] && echo "$out/ctest.log" || echo "$work/$1.log"; }
step() { # step LOG COMMAND...: runs COMMAND into its log; a failure is recorded, not fatal
  local log=$1 rc=0 file; shift
  file=$(logfile "$log")
  echo "== $log: $*"
  "$@" >>"$file" 2>&1 || rc=$?
  if ((rc)); then # 128 + n: killed by signal n (137: the OOM killer)
    echo "!! $log failed (exit status $rc); its log ends:"; tail -n 30 "$file"
    status=1; return 1
  fi
}
finish() {
  for f in examples_run sanitizer; do [[ -f $work/$f.log ]] && cp "$work/$f.log" "$out/"; done
  [[ -f $out/examples_run.log ]] && mv "$out/examples_run.log" "$out/examples.log"
  [[ -f $work/report/summary.md ]] && cp "$work/report/summary.md" "$out/summary.md"
  tar -czf "$out/logs.tar.gz" -C "$work" . && rm -rf "$work"
  echo "== done: $([[ $status == 0 ]] && echo ok || echo FAILED); logs in $out"
  exit $status
}

{ date -u; nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$work/env.log" 2>&1
grep -E "Driver Version|NVIDIA H|release" "$work/env.log" | head -5

if ((build)); then
  step build cmake --preset default || finish
  step build cmake --build --preset default -j "$(nproc)" -- -k 0 # a failed target stops no other
elif [[ ! -x build/tests/gpu/gpu_tests ]]; then
  echo "!! --no-build: build/tests/gpu/gpu_tests is missing"; status=1; finish
fi

if ((tests)); then # everything but the examples in parallel, then the examples one at a time
  step ctest ctest --preset test -j 8 -LE example
  grep -E "tests passed|tests failed|\(Failed\)|Not Run|Timeout" "$out/ctest.log" | tail -12
  step examples env OUT="$work" scripts/run_examples.sh
  tail -n 3 "$work/examples.log"
fi

if [[ -n $benchmarks ]]; then
  # shellcheck disable=SC2086
  step bench benchmarks/run --no-build --out "$work/report" --only $benchmarks
  grep -E "\| (met|missed|—) \|$" "$work/report/summary.md" 2>/dev/null
fi

if ((ncu)); then # ncu runs one kernel at a time: -c keeps it to one call's ranks
  step ncu timeout 120 ncu --nvtx --nvtx-include "regex:cohort@multi_device_for_each.*/" -c 4 \
    build/tests/gpu/gpu_tests --source-file='*for_each_test*'
  step ncu timeout 120 ncu --nvtx --nvtx-include "regex:cohort@all_reduce p2p.*/" -c 2 \
    build/examples/user_type_all_reduce
fi

# Left out under every tool: the load cases (millions of launches) and the two-thread clique
# cases (the tools serialize CUDA calls across threads, so one thread's wait holds the other
# between its ranks' launches; natively they pass). Graph-replay cases make a tenth of their
# rounds. NCCL's own kernels are not instrumented (the tools flag NCCL's internals, and a kernel
# they stop loses the context for every later case).
exclude='*000 back-to-back*,*(a load case)*,*two threads*each with its own group*'
sanitize() { # sanitize TOOL DOCTEST-OPTIONS...: one sanitized process into sanitizer.log
  local tool=$1 shares=0 cut=$exclude; shift
  local args=("$@")
  # racecheck does not run the clique's release kernel beside the rank it releases.
  [[ $tool == racecheck ]] && cut+=',*launch that fails part-way*'
  if [[ $tool == initcheck ]]; then
    # initcheck (CUDA 13.0) cannot follow green contexts: emulated groups on plain streams. It
    # cannot see NCCL's uninstrumented writes (nccl_test left out), the released ranks of a
    # part-way launch read scratch never written by design, and a reduction's call returns only
    # after the delay queued ahead of it.
    shares=1 cut+=',*launch that fails part-way*,*a reduction returns before the GPU is done*'
    if [[ "${args[*]}" == *--source-file-exclude=* ]]; then
      args=("${args[@]/#--source-file-exclude=/--source-file-exclude=*nccl_test*,}")
    elif [[ "${args[*]}" != *--source-file=* ]]; then
      args+=(--source-file-exclude='*nccl_test*')
    fi
  fi
  echo "## $tool ${args[*]}" >>"$work/sanitizer.log"
  step sanitizer env COHORT_NO_SM_PARTITIONING=$shares COHORT_TEST_ROUNDS_DIVISOR=10 \
    timeout "$timeout_s" compute-sanitizer --tool "$tool" --error-exitcode 99 \
    --report-api-errors no --kernel-name-exclude kns=ncclDevKernel \
    build/tests/gpu/gpu_tests --duration=true --test-case-exclude="$cut" "${args[@]}"
}
for tool in $tools; do # one process at a time: sanitized processes side by side disturb each other
  if [[ -n $cases ]]; then
    readarray -t opts < <(printf '%s' "$cases" | sed 's/ --/\n--/g') # options split at " --"
    sanitize "$tool" "${opts[@]}"
  elif [[ -n $pieces ]]; then
    while read -r piece; do
      [[ -z $piece || $piece == \#* ]] || sanitize "$tool" "$piece"
    done <"$pieces"
  else
    sanitize "$tool"
  fi
done
[[ -f $work/sanitizer.log ]] &&
  grep -E "^## |ERROR SUMMARY|RACECHECK SUMMARY|test cases:" "$work/sanitizer.log"
finish
