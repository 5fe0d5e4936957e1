#!/usr/bin/env bash
# The GPU suite (docs/cuda.md): builds jaxpp-sim and the GPU tests with the CUDA backend (Release,
# under build-gpu/), then on a machine with a GPU runs
#   1. a one-GPU smoke run: run --backend cuda --pp 1 --check (this also detects the GPU)
#   2. ctest -L gpu (tests/gpu: device-vs-host kernels, checked runs on 1, 2, 4 and 8 GPUs,
#      20 repetitions of the pp 2 check, fault paths; a test needing more GPUs than the machine
#      has is reported Skipped with the count)
#   3. smoke runs on 2 and 8 GPUs when there are that many, and a quick calibrate --backend cuda
# Exit status: 0 when everything ran and passed, 1 on any failure, 77 with "skipped: no GPU" on a
# machine without a GPU (after the build, which still checks that the CUDA code compiles): a
# machine without a GPU never reports a pass.
# Environment: BUILD_DIR (default build-gpu), JOBS (default nproc).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

echo "== configuring $build_dir (Release, JAXPP_WITH_CUDA=ON)"
mkdir -p "$build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DJAXPP_WITH_CUDA=ON \
  -DJAXPP_BUILD_BENCHMARKS=OFF "${launcher[@]}" > "$build_dir.configure.log" 2>&1 ||
  { cat "$build_dir.configure.log"; exit 1; }
echo "== building jaxpp-sim and gpu_tests"
cmake --build "$build_dir" --target jaxpp-sim gpu_tests -j "$jobs"

sim=$build_dir/bin/jaxpp-sim
small=(--hidden 48 --ffn 80 --seq 24 --layers-per-stage 2 --steps 2)

# 1. One GPU, one stage: the cheapest run that touches every part of the backend (device, kernels,
#    cuBLAS, warm-up, NCCL set-up and teardown). Its "no device" answer is the skip.
echo "== smoke: run --backend cuda --schedule 1F1B --pp 1 --check"
set +e
smoke=$("$sim" run --backend cuda --check --schedule 1F1B --pp 1 --microbatches 4 "${small[@]}" 2>&1)
status=$?
set -e
echo "$smoke"
if [ $status -ne 0 ] && grep -q "no CUDA device visible" <<< "$smoke"; then
  echo "== skipped: no GPU (the CUDA build compiled; nothing was run on a GPU)"
  exit 77
fi
failed=0
[ $status -eq 0 ] || { echo "== FAILED: one-GPU smoke run (exit $status)"; failed=1; }

gpus=1
if command -v nvidia-smi > /dev/null; then
  gpus=$(nvidia-smi -L | grep -c '^GPU' || true)
  [ -z "${CUDA_VISIBLE_DEVICES:-}" ] ||
    gpus=$(tr ',' '\n' <<< "$CUDA_VISIBLE_DEVICES" | grep -c . || true)
fi
echo "== $gpus GPU(s) visible"

# 2. The GPU tests.
echo "== ctest -L gpu"
(cd "$build_dir" && ctest -L gpu --output-on-failure) || { echo "== FAILED: ctest -L gpu"; failed=1; }

# 3. Smoke runs at the sizes of the machine.
run_smoke() {
  echo "== smoke: $*"
  "$@" || { echo "== FAILED: $*"; failed=1; }
}
if [ "$gpus" -ge 2 ]; then
  run_smoke "$sim" run --backend cuda --check --compare --schedule 1F1B --pp 2 --microbatches 4 \
    "${small[@]}"
fi
if [ "$gpus" -ge 8 ]; then
  run_smoke mpirun --oversubscribe --allow-run-as-root -n 8 "$sim" run --backend cuda --check \
    --schedule Interleaved1F1B --pp 4 --virtual 2 --dp 2 --microbatches 8 --optimizer adam \
    "${small[@]}"
fi
run_smoke "$sim" calibrate --backend cuda --quick -o "$build_dir/cluster-cuda.json"

if [ $failed -ne 0 ]; then
  echo "== GPU suite: FAILED"
  exit 1
fi
echo "== GPU suite: passed on $gpus GPU(s)"
