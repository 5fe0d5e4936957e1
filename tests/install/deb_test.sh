#!/usr/bin/env bash
# ctest install.deb: makes the Debian package with CPack (as `scripts/build.sh package` does) into a
# scratch directory inside the build directory, checks its name, Depends and contents, lets apt-get
# simulate installing it on this machine, extracts it into a scratch root (dpkg -x) and runs
# `jaxpp-sim --version` and `jaxpp-sim demo` from there.
# Usage: deb_test.sh <build dir> <version>
set -euo pipefail
build=$1 version=$2
work=$build/install-test/deb
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$work" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
arch=$(dpkg --print-architecture)
deb=$work/jaxpp-sim_${version}_${arch}.deb
[ -f "$deb" ] || fail "no $deb (made: $(ls "$work"/*.deb 2>/dev/null))"

# Control fields. Depends: the packages that hold the libraries jaxpp-sim links (dpkg-shlibdeps),
# each of them a real package of this machine.
[ "$(dpkg-deb -f "$deb" Package)" = jaxpp-sim ] || fail "Package is not jaxpp-sim"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is not $version"
[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "Architecture is not $arch"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for p in libc6 libstdc++6 libopenmpi3 libgvc6 libcgraph6 libopenblas0; do
  [[ ", $depends," == *", $p "* || ", $depends," == *", $p,"* ]] || fail "Depends lacks $p"
done
if grep -qiE "cuda|cublas|nccl" <<< "$depends"; then fail "Depends names CUDA: $depends"; fi
tr ',' '\n' <<< "$depends" | while read -r alternatives; do
  first=$(awk '{print $1}' <<< "${alternatives%%|*}")
  dpkg-query -W -f='${Status}' "$first" 2>/dev/null | grep -q "install ok installed" ||
    fail "Depends names $first, which is not an installed package here"
done

# Contents: the runtime component only.
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/jaxpp-sim ./usr/share/bash-completion/completions/jaxpp-sim \
         ./usr/share/doc/jaxpp-sim/README.md ./usr/share/doc/jaxpp-sim/docs/cuda.md; do
  grep -qx -- "$f" <<< "$contents" || fail "$f is not in the package"
done
if grep -qE '\.a$|/include/|/cmake/' <<< "$contents"; then fail "development files in the package"; fi

# apt-get's dependency resolution accepts it on this machine (simulation: installs nothing).
if command -v apt-get > /dev/null; then
  apt-get install -s "$deb" > "$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get -s refused it"; }
  grep -q "^Inst jaxpp-sim ($version" "$work/apt.log" || { cat "$work/apt.log"; fail "apt-get -s"; }
fi

# Extracted into a scratch root: it runs from there, finds its own plugin, and the demo works.
root=$work/root
dpkg -x "$deb" "$root"
sim=$root/usr/bin/jaxpp-sim
"$sim" --version > "$work/version.txt"
cat "$work/version.txt"
grep -q "^jaxpp-sim $version$" "$work/version.txt" || fail "--version"
if grep -qx -- "./usr/lib/jaxpp-sim/libjaxpp_cuda.so" <<< "$contents"; then
  grep -qF "cuda plugin: available, $(cd "$root/usr/lib/jaxpp-sim" && pwd -P)/libjaxpp_cuda.so" \
    "$work/version.txt" || fail "the extracted jaxpp-sim does not find its plugin"
fi
(cd "$work" && "$sim" demo --out "$work/demo" > "$work/demo.log" 2>&1) ||
  { cat "$work/demo.log"; fail "jaxpp-sim demo failed"; }
for f in plan.json timeline.svg trace.json; do
  [ -s "$work/demo/$f" ] || fail "demo did not write $f"
done
grep -q -- "-> PASS$" "$work/demo.log" || { cat "$work/demo.log"; fail "the demo's check did not pass"; }
echo "install.deb: ok ($(basename "$deb"), $(du -k "$deb" | cut -f1) KiB)"
rm -rf "$work"
