#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root), builds jaxpp-sim in Release mode under build/,
# then optionally runs something:
#   scripts/build.sh          install missing packages, configure, build
#   scripts/build.sh demo     ... then run `jaxpp-sim demo`
#   scripts/build.sh test     ... then run the whole test suite (ctest)
#   scripts/build.sh bench    ... then run the benchmarks
# Idempotent: packages already installed are not touched, the build is incremental.
# Environment: BUILD_DIR (default build), JOBS (default nproc), JAXPP_WITH_CUDA (AUTO|ON|OFF).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
action=${1:-build}

packages=(g++ cmake make pkg-config libboost-graph-dev nlohmann-json3-dev libcxxopts-dev
          libgraphviz-dev libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
          libopenmpi-dev openmpi-bin)

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

echo "== configuring $build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
      -DJAXPP_WITH_CUDA="${JAXPP_WITH_CUDA:-AUTO}" > "$build_dir.configure.log" 2>&1 \
  || { cat "$build_dir.configure.log"; exit 1; }
grep -E "CUDA backend" "$build_dir.configure.log" || true
echo "== building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"

# OpenMPI refuses to run as root without these; the tests launch mpirun.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

case "$action" in
  build) ;;
  demo) shift || true; exec "$build_dir/bin/jaxpp-sim" demo "$@" ;;
  test) cd "$build_dir" && exec ctest --output-on-failure -j "$jobs" --timeout 600 ;;
  bench)
    for b in "$build_dir"/benchmarks/*_bench; do echo "== $b"; "$b"; done ;;
  *) echo "unknown action '$action' (expected build, demo, test or bench)" >&2; exit 2 ;;
esac
