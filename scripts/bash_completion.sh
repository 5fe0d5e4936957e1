#!/usr/bin/env bash
# Writes the bash completion script of jaxpp-sim to stdout, generated from the binary itself:
# the commands from `jaxpp-sim --help`, each command's flags from `jaxpp-sim <command> --help`,
# the values of flags whose help starts with "a | b | c" (e.g. --backend threads | mpi | cuda),
# and the schedule names from `jaxpp-sim schedules --json`. Other flags that take a value complete
# file names. The build runs it (cli/CMakeLists.txt); the result is installed as
# share/bash-completion/completions/jaxpp-sim.
# Usage: scripts/bash_completion.sh path/to/jaxpp-sim > jaxpp-sim.bash
set -euo pipefail
sim=${1:?usage: bash_completion.sh path/to/jaxpp-sim}

commands=$("$sim" --help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
[ -n "$commands" ] || { echo "bash_completion.sh: no commands in '$sim --help'" >&2; exit 1; }
schedules=$("$sim" schedules --json | sed -n 's/^ *"name": "\([^"]*\)".*/\1/p' | tr '\n' ' ')

cat <<'EOF'
# bash completion for jaxpp-sim. Generated from the binary by scripts/bash_completion.sh; do not
# edit. Install as share/bash-completion/completions/jaxpp-sim (cmake --install does).
_jaxpp_sim() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
EOF
echo "    COMPREPLY=(\$(compgen -W \"$(echo $commands) --help --version\" -- \"\$cur\"))"
cat <<'EOF'
    return
  fi
  local flags="" valued="" values=""
  case ${COMP_WORDS[1]} in
EOF
for c in $commands; do
  help=$("$sim" "$c" --help)
  # "  -h, --help  show this help" / "      --pp arg  pipeline actors p"
  flags=$(sed -n 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9-]*\).*/\2/p' <<< "$help" | awk '!seen[$0]++' | tr '\n' ' ')
  valued=$(sed -n 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9-]*\) arg .*/\2/p' <<< "$help" | awk '!seen[$0]++' | tr '\n' ' ')
  echo "    $c)"
  echo "      flags=\"${flags% }\""
  echo "      valued=\" ${valued}\""
  echo "      case \$prev in"
  # Flags whose description starts with an enumeration "a | b | c"; an enumeration that the help
  # wraps after a "|" is joined with its continuation line first.
  joined=$(awk '{ if (pending != "") { sub(/^ +/, ""); $0 = pending $0; pending = "" }
                  if ($0 ~ /\| *$/) { sub(/ +$/, " "); pending = $0; next } print }' <<< "$help")
  while read -r flag choices; do
    [ -n "$flag" ] || continue
    echo "        $flag) values=\"$choices\" ;;"
  done < <(sed -n 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9-]*\) arg  *\([a-z0-9.-]*\( | [a-z0-9.-]*\)\{1,\}\)\( .*\)\{0,1\}$/\2 \3/p' <<< "$joined" |
             sed 's/ | / /g')
  if grep -q -- '--schedule arg' <<< "$help"; then
    echo "        --schedule) values=\"${schedules% }\" ;;"
  fi
  echo "      esac"
  echo "      ;;"
done
cat <<'EOF'
    *) return ;;
  esac
  if [[ $valued == *" $prev "* ]]; then
    if [ -n "$values" ]; then
      COMPREPLY=($(compgen -W "$values" -- "$cur"))
    else
      compopt -o filenames 2> /dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    compopt -o filenames 2> /dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _jaxpp_sim jaxpp-sim
EOF
