#!/usr/bin/env bash
# ctest install.completion: the generated bash completion (scripts/bash_completion.sh) completes
# commands, each command's flags, enumerated values and schedule names.
# Usage: completion_test.sh <completion file>
set -uo pipefail
# shellcheck disable=SC1090
source "$1" || { echo "FAIL: $1 does not load"; exit 1; }
failed=0
# expect "<words of the command line, the last one being completed>" "<expected candidates>"
expect() {
  local line=$1 want=$2
  read -r -a COMP_WORDS <<< "$line"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _jaxpp_sim
  local got="${COMPREPLY[*]}"
  if [ "$got" != "$want" ]; then
    echo "FAIL: '$line' -> '$got', expected '$want'"
    failed=1
  fi
}
expect "jaxpp-sim sche" "schedules"
expect "jaxpp-sim validate" "validate validate-model"
expect "jaxpp-sim --v" "--version"
expect "jaxpp-sim schedules --" "--json --help"
expect "jaxpp-sim run --back" "--backend"
expect "jaxpp-sim run --backend " "threads mpi cuda"
expect "jaxpp-sim run --backend c" "cuda"
expect "jaxpp-sim run --compute e" "emulated"
expect "jaxpp-sim show --schedule Zero" \
  "ZeroBubble ZeroBubbleH1 ZeroBubbleH2ZeroTxLatency ZeroBubbleH2HalfTxLatency ZeroBubbleH2FullTxLatency"
expect "jaxpp-sim show --schedule GPipeB" "GPipeBut1F1BForLastMesh"
expect "jaxpp-sim synth" "synthesize"
expect "jaxpp-sim export --format t" "text torchtitan"
expect "jaxpp-sim export --format s" "svg"
expect "jaxpp-sim simulate --micro" "--microbatch-size --microbatches"
expect "jaxpp-sim no-such-command --" ""
exit $failed
