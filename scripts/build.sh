#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds jaxpp-sim in Release mode under build/,
# then optionally runs something:
#   scripts/build.sh          install missing packages, configure, build
#   scripts/build.sh demo     ... then run `jaxpp-sim demo`
#   scripts/build.sh test     ... then run the whole test suite (ctest)
#   scripts/build.sh bench    ... then run the benchmarks
#   scripts/build.sh package  ... then make the Debian package build/jaxpp-sim_<version>_<arch>.deb
#                             (CPack; install it with apt-get install ./build/jaxpp-sim_*.deb)
# Hardening (docs/hardening.md; these do not touch build/):
#   scripts/build.sh sanitize the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#                             (build-asan/), then the threaded runtime tests under
#                             ThreadSanitizer (build-tsan/); fails on any sanitizer report
#   scripts/build.sh fuzz     builds the libFuzzer targets (in build-asan/) and runs each for
#                             FUZZ_SECONDS on a copy of its seed corpus (tests/fuzz/corpus/)
#   scripts/build.sh gpu      the GPU suite (scripts/gpu.sh, docs/cuda.md): exit 77 and
#                             "skipped: no GPU" on a machine without one, never a pass
# Idempotent: packages already installed are not touched, the build is incremental.
# Environment: BUILD_DIR (default build), JOBS (default nproc), JAXPP_WITH_CUDA (AUTO|ON|OFF),
#   JAXPP_WITH_PYTHON (AUTO|ON|OFF, the Python module; off in the sanitizer and fuzz builds),
#   SAN_CXX (compiler for sanitize, default clang++), SANITIZERS (default "asan tsan"),
#   FUZZ_SECONDS (default 12 per target), JAXPP_TEST_COMPILE_OPTIONS (default -O0: the test
#   sources' optimisation; set it empty for the build type's),
#   FUZZ_TARGETS (default: all), FUZZ_ARTIFACTS (where crashing inputs go, default
#   build-asan/artifacts), UNITY (ON|OFF, default ON: unity builds, see below).
# ccache is used for every build when installed. Unity builds (CMAKE_UNITY_BUILD) compile the
# sources of a target in batches of UNITY_BATCH (default 16) files: the heavy headers (gtest,
# nlohmann/json, cxxopts, the standard library) are parsed once per batch, which cuts the CPU
# time of a clean build to about 40 % (measured on costmodel/: 40 s -> 16 s). The price is that
# file-local names must be unique within a target (no two `namespace { ... data() }` helpers).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
action=${1:-build}

# dpkg-dev: dpkg-shlibdeps computes the Debian package's Depends (package, and its ctest).
# python3-*, pybind11-dev: the Python module jaxpp_sim (build/python), its pytest suite and the
# example's plots (docs/python.md); Debian's packages, no PyPI.
packages=(g++ cmake make pkg-config libboost-graph-dev nlohmann-json3-dev libcxxopts-dev
          libgraphviz-dev libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
          libopenmpi-dev openmpi-bin dpkg-dev ninja-build
          python3-dev pybind11-dev python3-pytest python3-numpy python3-pandas python3-matplotlib)
case "$action" in
  # clang with its sanitizer and libFuzzer runtimes; llvm for llvm-symbolizer (readable reports).
  sanitize | fuzz) packages+=(clang libclang-rt-14-dev llvm) ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# OpenMPI refuses to run as root without these; the tests launch mpirun.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

build_args=()
command -v ccache > /dev/null && build_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
build_args+=(-DCMAKE_UNITY_BUILD="${UNITY:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE="${UNITY_BATCH:-16}")

# configure <dir> <cmake args...>: configure quietly, show the log only on failure. New build
# directories use Ninja: with Make a target's objects wait until every target it depends on is
# built, so on 2 cores the chain graph -> simulator -> runtime -> cli (one unity batch each) and
# every test executable behind jaxpp-sim compile one at a time; Ninja compiles all objects as soon
# as generated headers exist and orders only the links (docs/hardening.md has the figures). A
# directory configured earlier keeps its generator (CMake refuses to switch).
configure() {
  local dir=$1 generator=()
  shift
  echo "== configuring $dir"
  mkdir -p "$dir"
  if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja > /dev/null; then generator=(-G Ninja); fi
  cmake -S "$root" -B "$dir" "${generator[@]}" "$@" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
}

# Sanitizer reports of every process (tests and the jaxpp-sim processes they start) go to files
# under $report_dir instead of stderr, so a report in a child whose exit code a test tolerates
# still fails the stage.
check_reports() {
  local report_dir=$1 name=$2
  if compgen -G "$report_dir/*" > /dev/null; then
    echo "== $name: sanitizer reports:" >&2
    for f in "$report_dir"/*; do echo "--- $f" >&2; cat "$f" >&2; done
    return 1
  fi
  echo "== $name: no sanitizer reports"
}

# Flags shared by the sanitizer builds: Debug (assertions on), -O1, no CUDA, no benchmarks, and
# line tables only for debug information (-gline-tables-only: a report's frames still name
# function, file and line; full -g doubles the objects and slows compiling and linking). The
# tests' own sources compile at -O0 (JAXPP_TEST_COMPILE_OPTIONS): half the compile time of a
# gtest file, while the libraries under test, where the tests spend their time, stay at -O1.
san_common() {
  local cxx=${SAN_CXX:-clang++}
  local cc=${cxx/clang++/clang}
  [ "$cc" = "$cxx" ] && cc=${cxx/g++/gcc}
  san_args=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc"
            -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -DCMAKE_C_FLAGS_DEBUG=-gline-tables-only
            -DJAXPP_TEST_COMPILE_OPTIONS=-O0
            -DJAXPP_WITH_CUDA=OFF -DJAXPP_WITH_PYTHON=OFF -DJAXPP_BUILD_BENCHMARKS=OFF "${build_args[@]}")
  san_flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fno-sanitize-recover=all"
}

# configure_asan: build-asan/, the ASan+UBSan build, which also holds the libFuzzer targets: the
# parser libraries they link carry libFuzzer's coverage instrumentation there (tests/fuzz/
# CMakeLists.txt; outside a fuzz target the sanitizer runtime's callbacks do nothing), so the fuzz
# stage links its targets against the libraries the sanitize stage compiled instead of compiling
# them a third time (the separate build-fuzz/ took 234 s of the 1969-s clean-clone CI of
# 2026-11-29).
configure_asan() {
  configure "$root/build-asan" "${san_args[@]}" -DJAXPP_BUILD_FUZZERS=ON \
            -DCMAKE_CXX_FLAGS="$san_flags -fsanitize=address,undefined" \
            -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
}

# AddressSanitizer + UndefinedBehaviorSanitizer: the whole suite.
run_asan() {
  local dir=$root/build-asan supp=$root/tests/sanitizers status=0 start
  configure_asan
  echo "== building $dir with $jobs jobs"
  start=$SECONDS
  cmake --build "$dir" -j "$jobs"
  echo "== ASan+UBSan build: $((SECONDS - start)) s"
  local reports=$dir/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  echo "== ctest under ASan+UBSan"
  start=$SECONDS
  local options="log_path=$reports/asan:detect_leaks=1:strict_string_checks=1"
  options+=":detect_stack_use_after_return=1:check_initialization_order=1"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
  # Tests that launch mpirun carry "Mpi" in their names. OpenMPI allocates its leaks in
  # components it unloads at MPI_Finalize, so only the slow unwinder reaches the libmpi /
  # libopen-pal frames that lsan.supp names; it is used for those tests only.
  # Not the `install` tests either: installing and packaging instrumented binaries checks nothing
  # more than the Release build's run of them does. Nor the constant fits (validation.fit*): each
  # reruns `validate-model` on the same corpus some 75 times, a path the corpus tests already run
  # instrumented, and together they would take longer than the rest of the suite does.
  # The corpus tests (CorpusValidation.*) share one scored corpus per process (a static report):
  # as one process each ctest entry rescored it, about 10 s apiece instrumented (25 tests, 240 s
  # of test time), so they run here as one process of their executable, every test still
  # reported by name.
  # Four searches over large spaces run in the Release suite only (instrumented they took 234 s
  # of the ASan stage's test time): the budget searches of the Zero Bubble paper's settings, the
  # heterogeneous Qwen 32B target and the explorer's bound pruning over the MoE space. Smaller
  # tests of the same functions run here (Synthesize.*, SynthesizeCli.*, HeteroCliTest.*,
  # ExplorerMoe.*, Explorer.*). Likewise (115 s of instrumented test time on 2026-11-27, when the
  # clean-clone CI took 1942 s): the property grids of the built-in schedules and of the
  # synthesizer against them, one of the two calibrate CLI tests that run the threads
  # microbenchmark suite (TablePrintsEveryFitAndItsResiduals stays; the tests of what reads a
  # calibrated cluster read a checked-in one and run here too), the cuda suite's memory test
  # on the host device, the 39B heterogeneous target, the explorer's bound over every schedule and
  # the sharded plan's check run (the other ShardParamsCli tests stay); and (8.6 s) the
  # microbenchmark suite with rounds (the single-pass suite tests stay).
  local heavy='^(ZeroBubblePaper\.BudgetOf|HeteroCliTest\.TargetQwen32B|ExplorerMoe\.BoundPruning'
  heavy+='|SchedulesProperty\.EveryBuiltinValidatesAndLowersOverTheGrid'
  heavy+='|Synthesize\.NeverSlowerThanTheBestBuiltInScheduleThatFitsTheBudgetOverAGrid'
  heavy+='|CalibrateCli\.ThreadsWrites'
  heavy+='|Microbench\.CudaSuiteGivesTheClusterTheGpusMemory|HeteroCliTest\.TargetMegatron39B'
  heavy+='|Explorer\.BoundIsBelowTheStepTimeOfEverySchedule|ShardParamsCli\.ThePlanCarriesIt'
  heavy+='|Microbench\.SuiteWithRoundsHasTheSinglePassPoints)'
  (cd "$dir" && ASAN_OPTIONS="$options" ctest --output-on-failure -j "$jobs" --timeout 900 \
     -E "(Mpi|^validation\\.fit|^CorpusValidation\\.|$heavy)" \
     -LE '^(timing|install|cli)$') ||
    status=1
  # The CLI tests (label cli, about 790, 460 of them the bad-input catalogue) run as $jobs
  # processes of their executable, each a gtest shard, instead of one process per test: each is
  # short (it starts jaxpp-sim once or twice), and an instrumented cli_tests takes 0.3 s of CPU
  # to start and exit (its leak check included), about as much as an average case. Every test is
  # still reported by name; the same exclusions as above apply, taken from the executable's list.
  ASAN_OPTIONS="$options" run_gtest_shards "$dir" cli_tests "(Mpi|$heavy)" || status=1
  (cd "$dir" && ASAN_OPTIONS="$options" OPENBLAS_NUM_THREADS=1 \
     timeout 900 bin/validation_tests --gtest_filter='CorpusValidation.*' --gtest_brief=1) ||
    status=1
  # Under mpirun: every test but the schedule-by-schedule family, of which five schedules run
  # here (one per kind: plain, interleaved, split backward, bidirectional, a CSV schedule) and
  # all in the Release suite; the MPI backend's code is the same for each (about 7 s apiece with
  # the slow unwinder).
  local mpi_schedules='RunMpiTest\.PassesTheCheckUnderMpirunWithDp2/(Std1F1B|Interleaved1F1B|ZeroBubble|DualPipeV|CustomCsv) '
  # Two expert-parallel runs under mpirun stay in the Release suite (45 s of instrumented test
  # time in the clean-clone CI of 2026-11-27, 1773 s in all): ExpertGradients... (threads and
  # mpirun) and the Zero Bubble plan with dp 2 · ep 2. The same MPI code runs here in the 1F1B
  # dp 2 · ep 2 plan, the expert-swap fault and the killed EP peer.
  local mpi_release_only='MoeRunCli\.(ExpertGradientsAreReducedOverTheirGroupOnThreadsAndUnderMpirun'
  mpi_release_only+='|ZeroBubblePlanPassesTheCheckUnderMpirunWithDp2Ep2)'
  # Also Release-only since the clean-clone CI of 2026-11-27 evening (1873 s, 73 s over the
  # 30-minute target): the sharded plan's run under mpirun (18 s instrumented; the sharded plan's
  # other CLI tests and the MPI backend's plan runs stay here) and calibrate's mpi backend (11 s;
  # the threads-backend calibrate test stays).
  mpi_release_only+='|ShardParamsCli\.RunningThePlanUnderMpirunMatchesTheReference'
  mpi_release_only+='|CalibrateCli\.MpiRankZeroWritesTheClusterOfAllRanks'
  (cd "$dir" && ASAN_OPTIONS="$options:fast_unwind_on_malloc=0" \
     ctest --output-on-failure -j "$jobs" --timeout 900 -R Mpi \
       -E "(RunMpiTest\.|$mpi_release_only)") || status=1
  (cd "$dir" && ASAN_OPTIONS="$options:fast_unwind_on_malloc=0" \
     ctest --output-on-failure -j "$jobs" --timeout 900 -R "$mpi_schedules") || status=1
  unset LSAN_OPTIONS UBSAN_OPTIONS
  echo "== ASan+UBSan tests: $((SECONDS - start)) s"
  check_reports "$reports" "ASan+UBSan" || status=1
  return $status
}

# run_gtest_shards <build dir> <test executable> <ERE of tests to leave out>: the executable's
# tests, but those the ERE matches, as $jobs gtest shards run side by side from the directory
# ctest runs them in, with ctest's environment (JAXPP_TEST_ENVIRONMENT) and a time limit; each
# shard's log is printed for a failed shard, its failed tests' names otherwise at the end.
run_gtest_shards() {
  local dir=$1 exe=$2 skip_ere=$3 status=0 skip pids=() shard
  skip=$("$dir/bin/$exe" --gtest_list_tests |
           awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}' | grep -E "$skip_ere" | paste -sd: -)
  echo "== $exe as $jobs shards, leaving out $(tr -cd : <<< "$skip:" | wc -c) tests"
  for ((shard = 0; shard < jobs; shard++)); do
    (cd "$dir/tests" && OPENBLAS_NUM_THREADS=1 GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard \
       timeout 1800 "$dir/bin/$exe" --gtest_filter="-$skip" --gtest_brief=1) \
      > "$dir/$exe.shard$shard.log" 2>&1 &
    pids+=($!)
  done
  for ((shard = 0; shard < jobs; shard++)); do
    if wait "${pids[$shard]}"; then
      grep -E "^\[  PASSED  \]" "$dir/$exe.shard$shard.log" | sed "s/^/$exe shard $shard: /"
    else
      status=1
      echo "== $exe shard $shard failed:"
      grep -E "\[  FAILED  \]|Failure|error" "$dir/$exe.shard$shard.log" | head -40
      tail -5 "$dir/$exe.shard$shard.log"
    fi
  done
  return $status
}

# ThreadSanitizer: the threaded runtime (runtime tests, `jaxpp-sim run` on the threads backend).
# mpirun-driven tests are not run here (OpenMPI's progress threads are not instrumented); they
# run under ASan+UBSan.
run_tsan() {
  local dir=$root/build-tsan supp=$root/tests/sanitizers status=0 start
  configure "$dir" "${san_args[@]}" -DCMAKE_CXX_FLAGS="$san_flags -fsanitize=thread" \
            -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
  echo "== building $dir (runtime_tests, run_tests) with $jobs jobs"
  start=$SECONDS
  cmake --build "$dir" -j "$jobs" --target runtime_tests run_tests
  echo "== TSan build: $((SECONDS - start)) s"
  local reports=$dir/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  echo "== ctest under TSan: runtime tests and the threads-backend run tests"
  start=$SECONDS
  export TSAN_OPTIONS="log_path=$reports/tsan:suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900 -L '^runtime$') || status=1
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900 -L '^run$' -R '^RunCli\.' \
     -E Mpi) || status=1
  unset TSAN_OPTIONS
  echo "== TSan tests: $((SECONDS - start)) s"
  check_reports "$reports" "TSan" || status=1
  return $status
}

run_sanitize() {
  local which=" ${SANITIZERS:-asan tsan} " status=0
  san_common
  if [[ $which == *" asan "* ]]; then run_asan || status=1; fi
  if [[ $which == *" tsan "* ]]; then run_tsan || status=1; fi
  return $status
}

# fuzz_one <target> <seconds> <build dir> <artifacts dir>: one libFuzzer run on a temporary copy
# of the target's seed corpus; prints one summary line, returns non-zero on a finding.
fuzz_one() {
  local t=$1 seconds=$2 fuzz=$3 artifacts=$4
  local work log=$fuzz/$t.log dict=() status=0
  work=$(mktemp -d "${TMPDIR:-/tmp}/jaxpp-fuzz-$t.XXXXXX")
  cp "$root/tests/fuzz/corpus/$t"/* "$work/"
  [[ $t == *_json ]] && dict=(-dict="$root/tests/fuzz/json.dict")
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$fuzz/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
    -max_len=20480 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "${dict[@]}" "$work" > "$log" 2>&1 ||
    status=1
  local runs
  runs=$(grep -o "stat::number_of_executed_units: [0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
  printf "%-18s %10s executions %6s corpus files  %s\n" "$t" "$runs" "$(ls "$work" | wc -l)" \
    "$([ $status -eq 0 ] && echo ok || echo "FINDING: see $log and $artifacts/")"
  if [ $status -ne 0 ]; then
    grep -E "ERROR|runtime error|SUMMARY|uncaught|Test unit written" "$log" | head -20 >&2 || true
  fi
  rm -rf "$work"
  return $status
}

run_fuzz() {
  local fuzz=$root/build-asan
  local seconds=${FUZZ_SECONDS:-12}
  local start=$SECONDS
  san_common
  configure_asan
  echo "== building the fuzz targets with $jobs jobs"
  cmake --build "$fuzz" -j "$jobs" --target fuzzers
  echo "== fuzz build: $((SECONDS - start)) s"
  local artifacts=${FUZZ_ARTIFACTS:-$fuzz/artifacts}
  mkdir -p "$artifacts"
  local targets=${FUZZ_TARGETS:-$(cd "$root/tests/fuzz/corpus" && ls)}
  echo "== fuzzing each target for $seconds s, $jobs at a time"
  start=$SECONDS
  local status=0 pids=()
  for t in $targets; do
    fuzz_one "$t" "$seconds" "$fuzz" "$artifacts" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || status=1
      pids=("${pids[@]:1}")
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  echo "== fuzz runs: $((SECONDS - start)) s"
  return $status
}

case "$action" in
  sanitize) run_sanitize; exit ;;
  fuzz) run_fuzz; exit ;;
  gpu) exec "$root/scripts/gpu.sh" ;;
esac

# The tests' own sources compile at -O0 here too (JAXPP_TEST_COMPILE_OPTIONS; the libraries and
# jaxpp-sim stay Release): they were 527 of the 959 s of compiler time of a clean build, and the
# suite spends its time in the code under test.
configure "$build_dir" -DCMAKE_BUILD_TYPE=Release -DJAXPP_WITH_CUDA="${JAXPP_WITH_CUDA:-AUTO}" \
          -DJAXPP_WITH_PYTHON="${JAXPP_WITH_PYTHON:-AUTO}" \
          -DJAXPP_TEST_COMPILE_OPTIONS="${JAXPP_TEST_COMPILE_OPTIONS--O0}" \
          "${build_args[@]}"
grep -E "CUDA backend|Python module" "$build_dir.configure.log" || true
echo "== building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"

case "$action" in
  build) ;;
  demo) shift || true; exec "$build_dir/bin/jaxpp-sim" demo "$@" ;;
  # A test that fails is run once more (--repeat until-pass:2) and fails the suite only when it
  # fails twice: on a shared 2-core machine a test that starts processes (mpirun, cpack, the
  # consumer's build) can miss a deadline once under load; a real defect fails both times. The
  # first failure's output is still printed.
  test) cd "$build_dir" && exec ctest --output-on-failure -j "$jobs" --timeout 600 --repeat until-pass:2 ;;
  bench)
    for b in "$build_dir"/benchmarks/*_bench; do echo "== $b"; "$b"; done ;;
  package)
    cd "$build_dir" && cpack -G DEB > "$build_dir/cpack.log" 2>&1 || { cat "$build_dir/cpack.log"; exit 1; }
    grep -E "Depends:|generated" "$build_dir/cpack.log" ;;
  *) echo "unknown action '$action' (expected build, demo, test, bench, package, sanitize, fuzz or gpu)" >&2; exit 2 ;;
esac
