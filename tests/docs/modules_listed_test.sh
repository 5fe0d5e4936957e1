#!/usr/bin/env bash
# docs/modules.md lists every source file of the libraries and the binary, and nothing else:
# fails naming each .h/.cc/.cu under the module folders that it does not list, and each file it
# lists that does not exist.
# Usage: modules_listed_test.sh <source root>
set -euo pipefail
root=${1:?usage: modules_listed_test.sh <source root>}
doc=$root/docs/modules.md
folders=(graph schedules costmodel trace simulator runtime handoff cli)
status=0
[ -f "$doc" ] || { echo "missing: $doc" >&2; exit 1; }
listed=$(grep -o '`[A-Za-z0-9_/.-]*\.\(h\|cc\|cu\)`' "$doc" | tr -d '`' | sort -u)
actual=$(cd "$root" && find -L "${folders[@]}" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) | sort -u)
[ -n "$actual" ] || { echo "no source files found under $root" >&2; exit 1; }
while read -r f; do
  [ -n "$f" ] || continue
  grep -qxF "$f" <<< "$listed" || { echo "not listed in docs/modules.md: $f" >&2; status=1; }
done <<< "$actual"
while read -r f; do
  [ -n "$f" ] || continue
  [ -f "$root/$f" ] || { echo "listed in docs/modules.md but missing: $f" >&2; status=1; }
done <<< "$listed"
[ $status -eq 0 ] && echo "docs/modules.md lists all $(wc -l <<< "$actual") files"
exit $status
