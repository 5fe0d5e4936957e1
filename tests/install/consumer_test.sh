#!/usr/bin/env bash
# ctest install.consumer: installs this build into a fresh prefix inside the build directory,
# then configures, builds and runs examples/consumer against that installed tree only
# (find_package(jaxpp_sim CONFIG) through CMAKE_PREFIX_PATH = the prefix), and checks that the
# program predicts what the installed jaxpp-sim predicts for the same plan.
# Usage: consumer_test.sh <build dir> <source dir> <C++ compiler>
set -euo pipefail
build=$1 source=$2 cxx=$3
work=$build/install-test/consumer
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/jaxpp-sim include/jaxpp-sim/simulator/plan_builder.h lib/cmake/jaxpp_sim/jaxpp_simConfig.cmake \
         lib/cmake/jaxpp_sim/jaxpp_simConfigVersion.cmake; do
  [ -f "$prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done

# Only the prefix is visible to the consumer: no path into the source or build tree.
cmake -S "$source/examples/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
      > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
commands=$(cat "$work/build/compile_commands.json")
grep -q -- "$prefix/include/jaxpp-sim" <<< "$commands" ||
  { echo "FAIL: the consumer did not compile against $prefix/include/jaxpp-sim"; exit 1; }
if grep -qE -- "(-I|-isystem )$source/? " <<< "$commands"; then
  echo "FAIL: the consumer saw the source tree"; exit 1
fi

out=$("$work/build/plan_and_simulate" zb-h1)
echo "$out"
grep -q "^schedule zb-h1: 32 microbatches, [0-9]* instructions$" <<< "$out" ||
  { echo "FAIL: unexpected consumer output"; exit 1; }

# The same plan through the installed binary: the same step time.
json=$("$prefix/bin/jaxpp-sim" simulate --model gpt3-13b --cluster h100-sxm --gpus 64 --pp 4 --tp 8 \
       --dp 2 --global-batch 64 --schedule zb-h1 --json)
cli_step=$(grep -o '"step_time_s": [0-9.e+-]*' <<< "$json" | head -1 | awk '{printf "%.3f", $2}')
consumer_step=$(sed -n 's/^step time \([0-9.]*\) s.*/\1/p' <<< "$out")
[ -n "$cli_step" ] && [ "$cli_step" = "$consumer_step" ] ||
  { echo "FAIL: consumer step time '$consumer_step' s, jaxpp-sim simulate '$cli_step' s"; exit 1; }

# A bad schedule name is the library's InputError, exit 2.
if "$work/build/plan_and_simulate" no-such-schedule 2> "$work/err"; then
  echo "FAIL: an unknown schedule was accepted"; exit 1
fi
grep -q "^plan_and_simulate: error: .*no-such-schedule" "$work/err" ||
  { echo "FAIL: unexpected error text: $(cat "$work/err")"; exit 1; }
echo "install.consumer: ok (step time $consumer_step s from the installed package and binary)"
rm -rf "$work"
