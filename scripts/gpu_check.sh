#!/usr/bin/env bash
# One command for a GPU machine: configure and build, run the whole ctest suite (GPU tests
# included), the examples, the benchmarks, then compute-sanitizer's memcheck, racecheck, synccheck
# and initcheck over the GPU test program. Logs go to $OUT when set (the device tool's folder), else ./gpu-logs.
# Exit status: non-zero if any step failed.
#
# Usage: scripts/gpu_check.sh [--no-sanitizer] [--no-bench] [--sanitizer-timeout SECONDS]
#          [--benchmarks "NAME..."] [--tools "memcheck racecheck synccheck initcheck"] [--cases DOCTEST-FILTER]
#          [--exclude TEST-CASE-PATTERNS] [--one-gpu-pass] [--sanitizers-only] [--ncu] [--no-build]
#          [--nccl-sockets] [--diagnose-two-threads] [--diagnose-one-shot] [--split-cases FILE [--jobs N]]
# --one-gpu-pass also runs the GPU test program and p2p_bench (to 64 MiB) with only GPU 0 visible,
# so that multi-GPU tests run on emulated groups (onegpu.log).
# --benchmarks picks programs of build/benchmarks; --tools picks sanitizer tools; --cases passes a
# doctest filter (e.g. --source-file='*nccl_test*') to the sanitized run, for a shorter check, or
# a range of its cases (`--cases --first=113`: doctest counts the cases its filters pass); several
# options go in one string, split where a blank precedes "--" ('--source-file=*sort_test* --first=7').
# --sanitizers-only skips ctest, the examples and the benchmarks (a second call on a warm machine).
# --nccl-sockets runs the GPU program's NCCL cases again, single-process, with NCCL kept off its
# peer-to-peer and shared-memory transports (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: the socket
# path used between nodes), into nccl_sockets.log; the mpirun variants do the same under ctest.
# --diagnose-two-threads runs the two-thread clique case alone, with a 30 s patience, before any
# sanitizer pass (diagnose.log): natively with CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream on one
# hardware queue) and =2 (few queues, so two threads' calls share them: the launch-order lock must
# keep it going), 60 s each, then under memcheck with green contexts and, only if that fails,
# without them, then its form without read-backs between calls, 150 s each.
# --diagnose-one-shot looks for what makes p2p_test's first case hang under memcheck in one
# process over the whole program (session 23; racecheck too), with a 60 s patience, into
# one_shot.log: the [serial] cases then that case, natively and under memcheck; then under memcheck
# the part-way-launch cases then that case, and every case up to it (doctest's --last).
# --no-build skips configuring and building: a later call on a warm machine reuses the build/ of
# the call before (the working tree copied again may look newer to ninja and rebuild everything).
# --ncu runs Nsight Compute with NVTX filtering over the for_each tests and an example
# (multi_device_for_each's and p2p all_reduce's ranges), each limited to 120 s: that ncu sees
# cohort's ranges (domain `cohort`) and profiles only the kernels inside them (ncu.log).
# --quick DOCTEST-FILTER builds only the GPU test program and the --benchmarks, and runs that
# program with the filter (e.g. --source-file='*graph_test*') instead of the whole ctest suite and
# the examples: a short check of one area. --bench-args passes arguments to every benchmark.
# --labels REGEX runs only the ctest tests with those labels (e.g. gpu), besides the examples.
# --targets "NAME..." builds only those targets (with the GPU test program and the --benchmarks;
# --targets "" builds just those two) and skips ctest and the examples: for a call that runs
# benchmarks, ncu or the sanitizers only.
# --build "NAME..." also builds only those targets (with the GPU test program), but still runs
# ctest and the examples, each limited by --ctest-regex REGEX and --examples REGEX (ctest -R):
# a short call that checks a few changed areas where device time is short.
# --parallel-sanitizers runs every --tools tool at once, each in two processes (sort_test apart),
# over every case but the [serial] ones (which take much of the GPU's memory); run those in a
# second call: --sanitizers-only --no-build --cases '--test-case=*[serial]*'. Prefer one process
# at a time, for every tool: with two or more sanitized processes on one GPU, initcheck reported
# CUB's sort reading unwritten keys (sessions 15, 20), and one rank of an emulated one-shot
# all-reduce did not run beside its waiting peer, under racecheck (session 20) and under memcheck
# (session 21); none of these came with one process (docs/testing.md, session 21).
# --split-cases FILE runs each --tools tool once per line of FILE, each line the doctest options of
# one process (as --cases takes them; blank lines and # comments skipped), --jobs N at a time
# (default 4: a racecheck process sorting 2^20+3 staged keys grew to about 24 GiB of host memory,
# and 9 at once on the 128 GiB host lost 3 with no output, session 13; memory.log samples it).
# scripts/sanitizer_pieces.txt splits the program in three, for memcheck and racecheck one process
# after another (--jobs 1): over the whole program in one process both stopped running an emulated
# member's kernel beside its peer's after enough earlier cases (session 23).
# scripts/racecheck_staged_sorts.txt lists the largest comparator sorts, each too slow under
# racecheck for one process with the rest: --sanitizers-only --no-build --tools racecheck
# --split-cases scripts/racecheck_staged_sorts.txt --sanitizer-timeout 540.
# --larger-sort GiB runs scan_sort_bench's one sort of GiB GiB of uint64 keys over every GPU
# (staged through host memory where the devices cannot hold its scratch; issue 20's "larger than
# one H200", e.g. 150 on two H200s), after the benchmarks; list scan_sort_bench in --benchmarks
# (or build it) so that it exists.
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # never use NVLink multicast on shared machines
# A p2p barrier that waits a minute for a peer stops its kernel: a defect costs the run a minute,
# not the default five (cliques made with their own patience keep it).
export COHORT_P2P_PATIENCE_MS=${COHORT_P2P_PATIENCE_MS:-60000}
# A test program that crashes on the host prints the crash's stack (tests/support/main.cu): one
# SIGSEGV under racecheck in session 14 left no trace and did not come again in 7 reruns.
export COHORT_TEST_BACKTRACE=1
sanitize=1 bench=1 sanitizer_timeout=300 # per tool: memcheck took 199 s alone (session 6)
benchmarks="for_each_bench nccl_bench p2p_bench" tools="memcheck racecheck synccheck initcheck" cases=""
# The load cases ("10,000 ..." and "100,000 back-to-back ...") hold thousands of launches each,
# and those named "(a load case)" trillions of calls;
# the two-thread clique cases cannot run under the tools (see the sanitizer step below).
exclude='*000 back-to-back*,*(a load case)*,*two threads*each with its own group*' one_gpu=0 tests=1 quick="" bench_args="" labels="" ncu=0
targets="" build_only=0 no_build=0 nccl_sockets=0 diagnose=0 one_shot=0 build_targets="" ctest_regex="" examples=""
larger_sort="" parallel="" split_cases="" jobs=4

while (($#)); do
  case $1 in
    --no-sanitizer) sanitize=0 ;;
    --no-bench) bench=0 ;;
    --sanitizer-timeout) sanitizer_timeout=$2; shift ;;
    --benchmarks) benchmarks=$2; shift ;;
    --tools) tools=$2; shift ;;
    --cases) cases=$2; shift ;;
    --exclude) exclude=$2; shift ;;
    --one-gpu-pass) one_gpu=1 ;;
    --sanitizers-only) tests=0 bench=0 one_gpu=0 sanitize=1 ;;
    --quick) quick=$2; tests=0; shift ;;
    --bench-args) bench_args=$2; shift ;;
    --labels) labels=$2; shift ;;
    --ncu) ncu=1 ;;
    --targets) targets=$2; build_only=1; tests=0; shift ;;
    --no-build) no_build=1 ;;
    --nccl-sockets) nccl_sockets=1 ;;
    --diagnose-two-threads) diagnose=1 ;;
    --diagnose-one-shot) one_shot=1 ;;
    --build) build_targets=$2; shift ;;
    --ctest-regex) ctest_regex=$2; shift ;;
    --examples) examples=$2; shift ;;
    --larger-sort) larger_sort=$2; shift ;;
    --parallel-sanitizers) parallel=1 ;;
    --split-cases) split_cases=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done
status=0
step() { # step NAME COMMAND...: runs COMMAND, appends to $out/NAME.log, records failure
  local name=$1 rc=0; shift
  echo "== $name: $*"
  "$@" >>"$out/$name.log" 2>&1 || rc=$?
  if ((rc)); then
    # The exit status tells a signal (128 + its number: 137 is SIGKILL, the kernel's OOM killer)
    # from a failure the program reported (a killed program's buffered output is lost).
    echo "!! $name failed (exit status $rc); its log ends:"; tail -n 40 "$out/$name.log"
    status=1; return 1
  fi
  tail -n 3 "$out/$name.log"
}

{ date -u; nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version; } >"$out/env.log" 2>&1
grep -E "Driver Version|NVIDIA H|release" "$out/env.log" | head -5

if ((no_build)); then
  [[ -x build/tests/gpu/gpu_tests ]] || { echo "!! --no-build: build/tests/gpu/gpu_tests is missing"; exit 1; }
  echo "== build: skipped (--no-build)"
else
  step build cmake --preset default || exit 1
  if [[ -n $quick ]] || ((build_only)); then
    step build cmake --build --preset default -j "$(nproc)" --target gpu_tests $benchmarks $targets || exit 1
  elif [[ -n $build_targets ]]; then
    step build cmake --build --preset default -j "$(nproc)" --target gpu_tests $build_targets || exit 1
  else
    # -k 0: a target that fails does not stop the others (their tests still run; the step fails).
    step build cmake --build --preset default -j "$(nproc)" -- -k 0
  fi
fi
if [[ -n $quick ]]; then
  step quick build/tests/gpu/gpu_tests "$quick"
  grep -E "test cases:|assertions:" "$out/quick.log" | tail -2
fi
# Everything but the examples, then the examples (serially, verbosely: what each printed is kept
# in examples.log), so that each test runs once.
if ((tests)); then
  step ctest ctest --preset test -j 8 -LE example ${labels:+-L "$labels"} ${ctest_regex:+-R "$ctest_regex"}
  grep -E "tests passed|tests failed|Skipped|\(Failed\)|Not Run" "$out/ctest.log" | tail -20
  step examples ctest --test-dir build -L example -V ${examples:+-R "$examples"}
  grep -E "tests passed|tests failed" "$out/examples.log" | tail -1
fi

if ((bench)); then
  for b in $benchmarks; do
    [[ -x build/benchmarks/$b ]] && step bench "build/benchmarks/$b" $bench_args
  done
  cat "$out/bench.log"
fi
# One sort of more than one GPU holds (issue 20), timed once and checked, into larger_sort.log.
if [[ -n $larger_sort ]]; then
  step larger_sort build/benchmarks/scan_sort_bench 20 --larger "$larger_sort"
  grep -E "^\| [0-9]" "$out/larger_sort.log" | tail -1
fi

if ((one_gpu)); then
  step onegpu env CUDA_VISIBLE_DEVICES=0 build/tests/gpu/gpu_tests --test-case-exclude='*past 2^31*'
  grep -E "test cases:" "$out/onegpu.log" | tail -1
  ((bench)) && step onegpu env CUDA_VISIBLE_DEVICES=0 build/benchmarks/p2p_bench 67108864
fi

if ((nccl_sockets)); then
  step nccl_sockets env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 build/tests/gpu/gpu_tests \
    --source-file='*nccl_test*'
  grep -E "test cases:|assertions:" "$out/nccl_sockets.log" | tail -2
fi

if ((diagnose)); then
  two_threads=(build/tests/gpu/gpu_tests --duration=true --test-case='two threads*2000 calls each')
  for connections in 1 2; do
    echo "-- natively, CUDA_DEVICE_MAX_CONNECTIONS=$connections" >>"$out/diagnose.log"
    step diagnose env COHORT_P2P_PATIENCE_MS=30000 CUDA_DEVICE_MAX_CONNECTIONS=$connections timeout 60 \
      "${two_threads[@]}"
  done
  for no_shares in 0 1; do
    echo "-- memcheck, COHORT_NO_SM_PARTITIONING=$no_shares" >>"$out/diagnose.log"
    step diagnose env COHORT_P2P_PATIENCE_MS=30000 COHORT_NO_SM_PARTITIONING=$no_shares timeout 150 \
      compute-sanitizer --tool memcheck --error-exitcode 99 --report-api-errors no \
      --kernel-name-exclude kns=ncclDevKernel "${two_threads[@]}" && break
  done
  # The same calls without read-backs between them: if this passes where the case above hangs,
  # the hang needs a thread that waits for the GPU while the other is between its ranks' launches.
  echo "-- memcheck, read back only after each size's last call" >>"$out/diagnose.log"
  step diagnose env COHORT_P2P_PATIENCE_MS=30000 timeout 150 compute-sanitizer --tool memcheck \
    --error-exitcode 99 --report-api-errors no --kernel-name-exclude kns=ncclDevKernel \
    build/tests/gpu/gpu_tests --duration=true --test-case='two threads*read back only after*'
  grep -E "^-- |test cases:|waited|s: two threads|ERROR SUMMARY" "$out/diagnose.log"
fi

if ((one_shot)); then
  first_p2p='p2p all_reduce sums float*'
  memcheck=(compute-sanitizer --tool memcheck --error-exitcode 99 --report-api-errors no
            --kernel-name-exclude kns=ncclDevKernel)
  # one_shot_pass NAME TIMEOUT [memcheck] DOCTEST-OPTIONS...: one process into one_shot.log.
  one_shot_pass() {
    local name=$1 seconds=$2 tool=(); shift 2
    [[ $1 == memcheck ]] && { tool=("${memcheck[@]}"); shift; }
    echo "-- $name" >>"$out/one_shot.log"
    step one_shot env COHORT_P2P_PATIENCE_MS=60000 COHORT_TEST_ROUNDS_DIVISOR=10 \
      timeout "$seconds" ${tool[@]+"${tool[@]}"} build/tests/gpu/gpu_tests --duration=true "$@"
  }
  one_shot_pass "natively: [serial] cases, then the first p2p case" 120 \
    --source-file-exclude='*sort_test*' --test-case-exclude='*(a load case)*' \
    --test-case="*[serial]*,$first_p2p"
  one_shot_pass "memcheck: [serial] cases, then the first p2p case" 150 memcheck \
    --source-file-exclude='*sort_test*' --test-case-exclude='*(a load case)*' \
    --test-case="*[serial]*,$first_p2p"
  one_shot_pass "memcheck: the part-way launches, then the first p2p case" 120 memcheck \
    --test-case="*launch that fails part-way*,$first_p2p"
  one_shot_pass "memcheck: every case up to the first p2p case, as the whole pass" 200 memcheck \
    --test-case-exclude="$exclude" --last=184
  grep -E "^-- |test cases:|s: |never|ERROR SUMMARY|exit status" "$out/one_shot.log" | grep -vE "^0\.0"
fi

if ((ncu)); then
  # Green contexts (emulated groups on one GPU) are left out: ncu is not asked to follow them.
  # The ranges' names carry sizes, so they are matched by regex; the trailing '/' marks push/pop.
  # ncu runs one kernel at a time, so a p2p collective over an emulated group cannot finish under
  # it past the kernels it profiles (a rank's barrier waits for a peer whose kernel cannot run):
  # -c 2 profiles the first call's two ranks, then lets the program run.
  [[ -x build/tests/gpu/gpu_tests && -x build/examples/user_type_all_reduce ]] ||
    step build cmake --build --preset default --target user_type_all_reduce gpu_tests
  step ncu env COHORT_NO_SM_PARTITIONING=1 timeout 120 ncu --nvtx -c 4 \
    --nvtx-include "regex:cohort@multi_device_for_each.*/" build/tests/gpu/gpu_tests \
    --source-file='*for_each_test*'
  step ncu env COHORT_NO_SM_PARTITIONING=1 timeout 120 ncu --nvtx -c 2 \
    --nvtx-include "regex:cohort@all_reduce p2p.*/" build/examples/user_type_all_reduce
  # The sorts and scans opened no range before session 20: ncu profiled nothing under these.
  step ncu env COHORT_NO_SM_PARTITIONING=1 timeout 120 ncu --nvtx -c 2 \
    --nvtx-include "regex:cohort@multi_device_sort.*/" build/tests/gpu/gpu_tests \
    --test-case='uint32 keys sort ascending'
  step ncu env COHORT_NO_SM_PARTITIONING=1 timeout 120 ncu --nvtx -c 2 \
    --nvtx-include "regex:cohort@multi_device_inclusive_scan.*/" build/tests/gpu/gpu_tests \
    --test-case='inclusive and exclusive scans of integers*' # (doctest splits filters at commas)
  grep -E "==PROF==|==WARNING==|==ERROR==|<0,|ok$" "$out/ncu.log" | head -30
fi

if ((sanitize)); then
  # API errors the tests provoke on purpose (an allocation too large) are not defects. The
  # back-to-back load cases (thousands of launches) are left out: under the sanitizers they would
  # outlast the lease. So are the two cases "two threads, each with its own group and clique on
  # the same GPUs": the tools serialise CUDA calls across host threads, so a call of one thread
  # that waits for the GPU (a read-back, a free) holds the other thread between its two ranks'
  # launches while the rank already launched spins for the other; natively no such lock exists
  # and both pass.
  # The form without read-backs between calls passed under memcheck alone (--diagnose-two-threads
  # runs it), but under initcheck it ran past 88 s and was cut (session 8, docs/testing.md).
  # --duration=true prints each case's time, so that a pass cut off by its
  # time-out still shows how far it got. NCCL's own
  # kernels are not instrumented: synccheck flags their named barriers (NCCL 2.28.3,
  # ncclDevFunc_AllReduce_Sum_f32_RING_SIMPLE) and memcheck their LL protocol reading a whole
  # 4-byte word of a 2-byte buffer; both are NCCL's, and a flagged kernel loses the context for
  # every later test. cohort's kernels and every other kernel stay checked.
  # initcheck (CUDA 13.0) crashes the program at the first launch into a green context: under it,
  # emulated groups run on plain streams (COHORT_NO_SM_PARTITIONING=1), and the tests that need SM
  # shares report themselves skipped; the other tools check them. initcheck also leaves out the
  # NCCL cases: NCCL's kernels are not instrumented, so it cannot see what they write and flags
  # every read of a collective's output (and it outlasts the lease on the clique cases). On one
  # GPU, where NCCL's one-rank collectives are copies it does see, nccl_test alone (--cases
  # '--source-file=*nccl_test*') is clean since its cases stopped reading unwritten inputs
  # (session 16: 1,276 reports before, 0 after).
  # --cases may hold several doctest options, split where a blank precedes "--" (so that a
  # pattern keeps its blanks; never glob-expanded).
  readarray -t case_args < <(printf '%s' "$cases" | sed 's/ --/\n--/g')
  # sanitize TOOL LOG [DOCTEST-OPTIONS...]: one pass of TOOL over the GPU test program into LOG.log.
  sanitize() {
    local tool=$1 log=$2; shift 2
    local no_shares=0 tool_exclude=$exclude${parallel:+,*[serial]*} files_out=""
    if [[ $tool == initcheck ]]; then
      no_shares=1
      # A --cases filter is the caller's choice (doctest keeps the last of a repeated option).
      [[ -z $cases ]] && files_out='*nccl_test*'
      # Under initcheck the reduction's call returned only after the 500 ms delay queued ahead of
      # it had run (session 7), so the case that asserts a reduction returns first cannot pass
      # there; natively it passes with and without SM shares.
      # The part-failed launch case releases the ranks that launched, which then read the scratch
      # of the rank that never ran: uninitialized by design (their output is unspecified and the
      # clique broken). That was every one of initcheck's 3,073 reports (sessions 7 and 8).
      tool_exclude+=',*a reduction returns before the GPU is done*,*launch that fails part-way*'
    fi
    # racecheck does not run the clique's release kernel beside the rank kernel it would release
    # (as ncu does not): the part-failed launch case waits out its patience and loses the context
    # for every later case (session 7). memcheck, synccheck and initcheck run it.
    [[ $tool == racecheck ]] && tool_exclude+=',*launch that fails part-way*'
    # A shard's own source-file filter ("+FILES": only those; "-FILES": all but those) joins
    # initcheck's exclusion of the NCCL cases.
    local files=()
    case ${1:-} in
      +*) files=(--source-file="${1#+}"); shift ;;
      -*) files=(--source-file-exclude="${1#-}${files_out:+,$files_out}"); files_out=""; shift ;;
    esac
    [[ -n $files_out ]] && files+=(--source-file-exclude="$files_out")
    # Instrumented barriers spin many times slower: the tests' cliques wait longer for a peer
    # (tests/support/testing.cuh reads this), so that a slow run is not taken for a hang.
    # The graph-replay cases make a tenth of their rounds (tests/support/testing.cuh: rounds).
    step "$log" env COHORT_NO_SM_PARTITIONING=$no_shares COHORT_TEST_ROUNDS_DIVISOR=10 \
      COHORT_P2P_PATIENCE_MS=${COHORT_SANITIZER_PATIENCE_MS:-300000} \
      timeout "$sanitizer_timeout" compute-sanitizer --tool "$tool" --error-exitcode 99 \
      --report-api-errors no --kernel-name-exclude kns=ncclDevKernel \
      build/tests/gpu/gpu_tests --duration=true --test-case-exclude="$tool_exclude" \
      ${files[@]+"${files[@]}"} ${case_args[@]+"${case_args[@]}"}
  }
  # gather HEADER NAME: appends a background pass's failure (NAME.out) and log (NAME.log) to
  # sanitizer.log under HEADER, and removes both. A crash's stack (COHORT_TEST_BACKTRACE) gets
  # the program's frames resolved: whether the crash is in cohort's code, the test's or the
  # tool's (session 15's racecheck crash was the tool's: no frame of the program).
  gather() {
    { echo "## $1"; grep -A40 "^!!" "$out/$2.out"; cat "$out/$2.log"
      grep -ohE 'gpu_tests\(\+0x[0-9a-f]+\)' "$out/$2.out" "$out/$2.log" | grep -oE '0x[0-9a-f]+' |
        xargs -r addr2line -C -f -p -e build/tests/gpu/gpu_tests | sed 's/^/== frame: /'
    } >>"$out/sanitizer.log"
    rm -f "$out/$2.out" "$out/$2.log"
  }
  if [[ -n $split_cases ]]; then
    # One sanitized process per line of the file (doctest options, as --cases takes them), for
    # each tool, $jobs at a time; each logs on its own, and sanitizer.log gathers them in order.
    readarray -t lines < <(grep -v '^[[:space:]]*\(#\|$\)' "$split_cases")
    # Host and GPU memory every 15 s (memory.log): in session 13 a third of the processes died
    # with no output, which a full host would explain.
    (while sleep 15; do
       echo "$(date -u +%T) host: $(free -m | awk '/^Mem:/ {print $3 " MiB used, " $7 " available"}')" \
         "GPU: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"
     done) >"$out/memory.log" 2>&1 &
    sampler=$!
    for tool in $tools; do
      for i in "${!lines[@]}"; do
        while (($(jobs -rp | wc -l) > jobs)); do wait -n; done # the sampler is one of them
        (readarray -t case_args < <(printf '%s' "${lines[$i]}" | sed 's/ --/\n--/g')
         sanitize "$tool" "split-$tool-$i") >"$out/split-$tool-$i.out" &
      done
    done
    # Every pass but the sampler; a failed step prints "!!" into its .out (read below).
    while (($(jobs -rp | wc -l) > 1)); do wait -n; done
    kill "$sampler"
    for tool in $tools; do
      for i in "${!lines[@]}"; do
        grep -q "^!!" "$out/split-$tool-$i.out" && status=1
        gather "$tool: ${lines[$i]}" "split-$tool-$i"
      done
    done
  elif [[ -n $parallel ]]; then
    # Every tool at once, each in two processes (the sort cases, the longest, apart), leaving out
    # the [serial] cases, which take much of the GPU's memory: a later call runs those with
    # --cases '--test-case=*[serial]*'. Each process logs on its own; sanitizer.log gathers them.
    pids=()
    for tool in $tools; do
      sanitize "$tool" "sanitizer-$tool-sort" '+*sort_test*' >"$out/sanitizer-$tool-sort.out" &
      pids+=($!)
      sanitize "$tool" "sanitizer-$tool-rest" '-*sort_test*' >"$out/sanitizer-$tool-rest.out" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    for tool in $tools; do
      for part in sort rest; do
        gather "$tool, $part (the [serial] cases left out)" "sanitizer-$tool-$part"
      done
    done
  else
    for tool in $tools; do
      echo "## $tool" >>"$out/sanitizer.log"
      sanitize "$tool" sanitizer
    done
  fi
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases:" "$out/sanitizer.log"
fi
echo "== gpu_check: $([[ $status == 0 ]] && echo all steps passed || echo some step FAILED)"
exit $status
