#!/usr/bin/env bash
# Every test ctest knows runs with OPENBLAS_NUM_THREADS=1 (tests/CMakeLists.txt,
# JAXPP_TEST_ENVIRONMENT): fails naming each test registered without it.
# Usage: ctest_environment_test.sh <ctest> <build dir>
set -euo pipefail
ctest=${1:?usage: ctest_environment_test.sh <ctest> <build dir>}
build=${2:?usage: ctest_environment_test.sh <ctest> <build dir>}
listing=$("$ctest" --test-dir "$build" -N -V)
# "742: Test command: ..." and, under "742: Environment variables:", "742:  OPENBLAS_NUM_THREADS=1".
all=$(grep -oE '^[0-9]+: Test command:' <<< "$listing" | cut -d: -f1 | sort -u)
with=$(grep -oE '^[0-9]+:  OPENBLAS_NUM_THREADS=1$' <<< "$listing" | cut -d: -f1 | sort -u)
[ -n "$all" ] || { echo "ctest lists no tests in $build" >&2; exit 1; }
without=$(comm -23 <(echo "$all") <(echo "$with"))
if [ -n "$without" ]; then
  for n in $without; do
    echo "without OPENBLAS_NUM_THREADS=1: $(grep -m1 -E "^ *Test +#$n: " <<< "$listing" | sed 's/^ *//')" >&2
  done
  exit 1
fi
echo "$(wc -l <<< "$all") tests, all with OPENBLAS_NUM_THREADS=1"
