#!/usr/bin/env bash
# Runs a fixed set of simulate / explore / show commands with two jaxpp-sim binaries and checks
# that their outputs (stdout, --json) are byte-identical: the check for changes that must not
# alter results (performance work).
#   scripts/check_identical_output.sh OLD_BINARY NEW_BINARY
# Timing lines ("configurations/s") are left out; files a command writes (@FILE@: --trace,
# --timeline) are compared too. Exit 0 when every output matches; otherwise the differing commands are listed and it exits 1.
set -uo pipefail
old=$1 new=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/jaxpp-identical.XXXXXX")
trap 'rm -rf "$work"' EXIT
commands=(
  "simulate --schedule ZeroBubble --pp 64 --microbatches 1024 --t-f 1 --t-b 1 --t-w 1"
  "simulate --schedule ZeroBubble --pp 64 --microbatches 1024 --t-f 1 --t-b 1 --t-w 1 --json"
  "simulate --schedule Interleaved1F1B --pp 64 --virtual 4 --microbatches 1024 --t-f 1 --t-b 1 --t-comm 0.05 --json"
  "simulate --model gpt3-1.3b --cluster a100-80g --gpus 32 --pp 16 --dp 2 --global-batch 512 --schedule ZeroBubble --json"
  "simulate --schedule ZeroBubble --pp 8 --microbatches 32 --t-f 1.3 --t-b 1.1 --t-w 0.7 --t-comm 0.05 --json"
  "simulate --schedule Std1F1B --pp 4 --microbatches 8 --t-f 1 --t-b 2 --json"
  "simulate --schedule GPipe --pp 4 --microbatches 16 --t-f 1 --t-b 2 --t-comm 0.1 --json"
  "simulate --schedule Eager1F1B --pp 6 --microbatches 12 --t-f 1 --t-b 2 --json"
  "simulate --schedule Interleaved1F1B --pp 8 --virtual 4 --microbatches 64 --t-f 0.5 --t-b 1 --json"
  "simulate --schedule Interleaved1F1B --pp 4 --virtual 2 --microbatches 8 --t-f 1 --t-b 2 --fuse-steady-state --json"
  "simulate --schedule DualPipeV --pp 4 --microbatches 16 --t-f 1 --t-b 1 --t-w 1 --t-comm 0.2 --json"
  "simulate --schedule ZB-H2 --pp 4 --microbatches 12 --t-f 1 --t-b 1 --t-w 1 --json"
  "simulate --schedule ZB-V --pp 4 --microbatches 8 --t-f 1 --t-b 1 --t-w 1 --json"
  "simulate --schedule KimiK2 --pp 4 --virtual 2 --microbatches 8 --t-f 1 --t-b 2 --json"
  "simulate --schedule InterleavedGPipe --pp 4 --virtual 2 --microbatches 8 --t-f 1 --t-b 2 --json"
  "simulate --model gpt3-1.3b --cluster a100-80g --gpus 8 --pp 4 --tp 2 --global-batch 64 --schedule Std1F1B --json"
  "simulate --model gpt3-1.3b --cluster h100-sxm --gpus 16 --pp 4 --tp 2 --dp 2 --global-batch 64 --schedule ZeroBubble --json"
  "simulate --model gpt3-1.3b --cluster h100-sxm --gpus 16 --pp 4 --tp 2 --dp 2 --virtual 2 --global-batch 64 --schedule Interleaved1F1B --zero1 --overlap-grad-reduce --json"
  "simulate --model gpt3-1.3b --cluster h100-sxm --gpus 16 --pp 4 --dp 4 --global-batch 64 --schedule Std1F1B --zero1 --shard-params --json"
  "simulate --model gpt3-1.3b --cluster a100-80g --gpus 8 --pp 4 --tp 2 --global-batch 64 --schedule Std1F1B --breakdown --json"
  "simulate --model gpt3-1.3b --cluster a100-80g --gpus 8 --pp 4 --tp 2 --global-batch 32 --schedule ZeroBubble"
  "explore --model gpt3-1.3b --cluster a100-80g --gpus 8 --global-batch 64 --json"
  "explore --model gpt3-1.3b --cluster a100-80g --gpus 8 --global-batch 64"
  "show --schedule ZeroBubble --pp 4 --microbatches 8"
  "show --schedule Interleaved1F1B --pp 4 --stages 8 --microbatches 8"
  "simulate --schedule ZeroBubble --pp 16 --microbatches 64 --t-f 1 --t-b 1 --t-w 1 --t-comm 0.1 --trace @FILE@.json"
  "simulate --schedule DualPipeV --pp 4 --microbatches 16 --t-f 1 --t-b 1 --t-w 1 --t-a2a-f 0.3 --t-a2a-b 0.3 --moe-overlap dualpipe --trace @FILE@.json --json"
  "simulate --model gpt3-1.3b --cluster h100-sxm --gpus 16 --pp 4 --tp 2 --dp 2 --global-batch 64 --schedule ZeroBubble --trace @FILE@.json"
  "simulate --model gpt3-1.3b --cluster a100-80g --gpus 8 --pp 4 --tp 2 --global-batch 64 --schedule Std1F1B --timeline @FILE@.txt"
  "show --schedule DualPipeV --pp 4 --microbatches 8"
)
status=0 n=0
for c in "${commands[@]}"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  "$old" ${c//@FILE@/$work/old.$n.out} 2>&1 | grep -v "configurations/s" > "$work/old.$n"
  rc_old=${PIPESTATUS[0]}
  # shellcheck disable=SC2086
  "$new" ${c//@FILE@/$work/new.$n.out} 2>&1 | grep -v "configurations/s" > "$work/new.$n"
  rc_new=${PIPESTATUS[0]}
  files_differ=0
  for f in "$work"/old.$n.out*; do
    [ -e "$f" ] || continue
    # Outputs that name their own file: compare with the path made the same.
    sed "s|$work/old|WORK|g" "$f" > "$f.cmp"
    g=${f/old.$n.out/new.$n.out}
    sed "s|$work/new|WORK|g" "$g" > "$g.cmp" 2>/dev/null || files_differ=1
    cmp -s "$f.cmp" "$g.cmp" || files_differ=1
  done
  sed -i "s|$work/old|WORK|g" "$work/old.$n"
  sed -i "s|$work/new|WORK|g" "$work/new.$n"
  if [ $rc_old -ne $rc_new ] || [ $files_differ -ne 0 ] || ! cmp -s "$work/old.$n" "$work/new.$n"; then
    echo "DIFFERENT (exit $rc_old vs $rc_new): jaxpp-sim $c"
    diff "$work/old.$n" "$work/new.$n" | head -5
    status=1
  else
    echo "identical ($(wc -c < "$work/new.$n") bytes, exit $rc_new): jaxpp-sim $c"
  fi
done
[ $status -eq 0 ] && echo "all $n outputs identical"
exit $status
