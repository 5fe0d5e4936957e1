#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds jaxpp-sim in Release mode under build/,
# then optionally runs something:
#   scripts/build.sh          install missing packages, configure, build
#   scripts/build.sh demo     ... then run `jaxpp-sim demo`
#   scripts/build.sh test     ... then run the whole test suite (ctest)
#   scripts/build.sh bench    ... then run the benchmarks
# Hardening (docs/hardening.md; these do not touch build/):
#   scripts/build.sh sanitize the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#                             (build-asan/), then the threaded runtime tests under
#                             ThreadSanitizer (build-tsan/); fails on any sanitizer report
#   scripts/build.sh fuzz     builds the libFuzzer targets (build-fuzz/) and runs each for
#                             FUZZ_SECONDS on a copy of its seed corpus (tests/fuzz/corpus/)
# Idempotent: packages already installed are not touched, the build is incremental.
# Environment: BUILD_DIR (default build), JOBS (default nproc), JAXPP_WITH_CUDA (AUTO|ON|OFF),
#   SAN_CXX (compiler for sanitize, default clang++), FUZZ_SECONDS (default 30 per target),
#   FUZZ_TARGETS (default: all), FUZZ_ARTIFACTS (where crashing inputs go, default
#   build-fuzz/artifacts). ccache is used for the sanitizer and fuzz builds when installed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
action=${1:-build}

packages=(g++ cmake make pkg-config libboost-graph-dev nlohmann-json3-dev libcxxopts-dev
          libgraphviz-dev libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
          libopenmpi-dev openmpi-bin)
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

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# configure <dir> <cmake args...>: configure quietly, show the log only on failure.
configure() {
  local dir=$1
  shift
  echo "== configuring $dir"
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
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

run_sanitize() {
  local cxx=${SAN_CXX:-clang++}
  local cc=${cxx/clang++/clang}
  [ "$cc" = "$cxx" ] && cc=${cxx/g++/gcc}
  local common=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc"
                -DJAXPP_WITH_CUDA=OFF -DJAXPP_BUILD_BENCHMARKS=OFF "${launcher[@]}")
  local flags="-O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all"
  local supp=$root/tests/sanitizers
  local status=0

  # --- AddressSanitizer + UndefinedBehaviorSanitizer: the whole suite. -----------------------
  local asan=$root/build-asan
  configure "$asan" "${common[@]}" -DCMAKE_CXX_FLAGS="$flags -fsanitize=address,undefined" \
            -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
  echo "== building $asan with $jobs jobs"
  cmake --build "$asan" -j "$jobs"
  local reports=$asan/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  echo "== ctest under ASan+UBSan"
  (
    cd "$asan"
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
    ctest --output-on-failure -j "$jobs" --timeout 900
  ) || status=1
  check_reports "$reports" "ASan+UBSan" || status=1

  # --- ThreadSanitizer: the threaded runtime (runtime tests, `jaxpp-sim run` on threads). ----
  local tsan=$root/build-tsan
  configure "$tsan" "${common[@]}" -DCMAKE_CXX_FLAGS="$flags -fsanitize=thread" \
            -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
  echo "== building $tsan (runtime_tests, cli_tests) with $jobs jobs"
  cmake --build "$tsan" -j "$jobs" --target runtime_tests cli_tests
  reports=$tsan/sanitizer-reports
  rm -rf "$reports" && mkdir -p "$reports"
  echo "== ctest under TSan: runtime tests and the threads-backend run tests"
  (
    cd "$tsan"
    export TSAN_OPTIONS="log_path=$reports/tsan:suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
    # mpirun-driven tests are not run under TSan (OpenMPI's progress threads are not
    # instrumented); they run under ASan+UBSan above.
    ctest --output-on-failure -j "$jobs" --timeout 900 -L '^runtime$' &&
      ctest --output-on-failure -j "$jobs" --timeout 900 -L '^cli$' -R '^RunCli\.' -E 'Mpi'
  ) || status=1
  check_reports "$reports" "TSan" || status=1
  return $status
}

run_fuzz() {
  local fuzz=$root/build-fuzz
  local seconds=${FUZZ_SECONDS:-30}
  local flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
  configure "$fuzz" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
            -DJAXPP_WITH_CUDA=OFF -DJAXPP_BUILD_BENCHMARKS=OFF -DJAXPP_BUILD_TESTS=OFF \
            -DJAXPP_BUILD_FUZZERS=ON -DCMAKE_CXX_FLAGS="$flags" \
            -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" "${launcher[@]}"
  echo "== building the fuzz targets with $jobs jobs"
  cmake --build "$fuzz" -j "$jobs" --target fuzzers
  local artifacts=${FUZZ_ARTIFACTS:-$fuzz/artifacts}
  mkdir -p "$artifacts"
  local targets=${FUZZ_TARGETS:-$(cd "$root/tests/fuzz/corpus" && ls)}
  local status=0 summary=""
  for t in $targets; do
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/jaxpp-fuzz-$t.XXXXXX")
    cp "$root/tests/fuzz/corpus/$t"/* "$work/"
    echo "== fuzzing $t for $seconds s"
    local log=$fuzz/$t.log
    local dict=()
    [[ $t == *_json ]] && dict=(-dict="$root/tests/fuzz/json.dict")
    if ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        "$fuzz/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "${dict[@]}" "$work" > "$log" 2>&1; then
      :
    else
      status=1
      echo "== $t: FINDING (log: $log, input under $artifacts/)" >&2
      grep -E "ERROR|runtime error|SUMMARY|uncaught|Test unit written" "$log" | head -20 >&2 || true
    fi
    local runs corpus
    runs=$(grep -o "stat::number_of_executed_units: [0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
    corpus=$(ls "$work" | wc -l)
    summary+=$(printf "%-18s %12s executions  %5s corpus files" "$t" "$runs" "$corpus")$'\n'
    rm -rf "$work"
  done
  echo "== fuzz summary ($seconds s per target)"
  printf "%s" "$summary"
  return $status
}

case "$action" in
  sanitize) run_sanitize; exit ;;
  fuzz) run_fuzz; exit ;;
esac

configure "$build_dir" -DCMAKE_BUILD_TYPE=Release -DJAXPP_WITH_CUDA="${JAXPP_WITH_CUDA:-AUTO}"
grep -E "CUDA backend" "$build_dir.configure.log" || true
echo "== building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"

case "$action" in
  build) ;;
  demo) shift || true; exec "$build_dir/bin/jaxpp-sim" demo "$@" ;;
  test) cd "$build_dir" && exec ctest --output-on-failure -j "$jobs" --timeout 600 ;;
  bench)
    for b in "$build_dir"/benchmarks/*_bench; do echo "== $b"; "$b"; done ;;
  *) echo "unknown action '$action' (expected build, demo, test, bench, sanitize or fuzz)" >&2; exit 2 ;;
esac
