#!/usr/bin/env bash
# Install the real agent harnesses (unmodified CLIs) used by coworkenv's black-box adapters.
#
# Contract: each npm package lands in   $COWORKENV_HARNESS_DIR/<pkg>@<version>/   (default
# ~/.cache/coworkenv/harnesses), with its binary at node_modules/.bin/<bin>. Idempotent: a package
# whose directory already has its binary is skipped. Versions are pinned (see shared/HARNESSES.md).
# Usage: scripts/install_harnesses.sh [claude-code] [codex] [qwen] [opencode]   (default: all)
# Env:   COWORKENV_HARNESS_DIR overrides the cache dir; JOBS (default 2) parallel npm installs.
set -euo pipefail

ROOT="${COWORKENV_HARNESS_DIR:-$HOME/.cache/coworkenv/harnesses}"
mkdir -p "$ROOT"

# name | npm package | version | binary
SPECS=(
  "claude-code|@anthropic-ai/claude-code|2.1.332|claude"
  "codex|@openai/codex|0.171.0|codex"
  "qwen|@qwen-code/qwen-code|0.24.4|qwen"
  "opencode|opencode-ai|1.18.33|opencode"
)

want=("$@")
if ! command -v npm >/dev/null 2>&1; then
  echo "install_harnesses: npm not found (install Node.js >= 20)" >&2
  exit 1
fi

install_one() {
  local pkg="$1" version="$2" bin="$3"
  local dir="$ROOT/${pkg}@${version}"
  if [ -x "$dir/node_modules/.bin/$bin" ]; then
    echo "install_harnesses: $pkg@$version already installed"
    return 0
  fi
  local tmp="$dir.partial.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # Run from the target dir so npm never mistakes the package name for a local folder.
  (cd "$tmp" && npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error \
      --engine-strict=false "${pkg}@${version}" >"$tmp.log" 2>&1) || {
    echo "install_harnesses: npm install ${pkg}@${version} failed; log: $tmp.log" >&2
    tail -20 "$tmp.log" >&2
    return 1
  }
  if [ ! -e "$tmp/node_modules/.bin/$bin" ]; then
    echo "install_harnesses: ${pkg}@${version} installed but binary '$bin' missing" >&2
    return 1
  fi
  rm -rf "$dir"
  mv "$tmp" "$dir"
  rm -f "$tmp.log"
  echo "install_harnesses: installed $pkg@$version -> $dir"
}

pids=()
rc=0
jobs_max="${JOBS:-2}"
for spec in "${SPECS[@]}"; do
  IFS='|' read -r name pkg version bin <<<"$spec"
  if [ "${#want[@]}" -gt 0 ]; then
    match=0
    for w in "${want[@]}"; do [ "$w" = "$name" ] && match=1; done
    [ "$match" = 1 ] || continue
  fi
  install_one "$pkg" "$version" "$bin" &
  pids+=("$!")
  if [ "${#pids[@]}" -ge "$jobs_max" ]; then
    wait "${pids[0]}" || rc=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"
