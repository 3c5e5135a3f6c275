#!/usr/bin/env bash
# Install Claw-Eval's own package (claw_eval: trace models, grader base, judge) from a Claw-Eval
# checkout into .venv: the reference its tasks' grader.py files import. Default checkout:
# ../shared/claw-eval/upstream; override with COWORKENV_CLAW_EVAL_CHECKOUT. Its dependencies
# (pydantic, pyyaml, openai, httpx) are already ours, so nothing is re-pinned. Built from a copy, so
# the checkout is never written to. Without a checkout: a no-op (the parity tests then skip, or fail
# under CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."
src="${COWORKENV_CLAW_EVAL_CHECKOUT:-../shared/claw-eval/upstream}"
if [ ! -f "$src/pyproject.toml" ] || [ ! -d "$src/src/claw_eval" ]; then
  echo "install_claw_eval: no Claw-Eval checkout at $src; skipped" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/pyproject.toml" "$src/src" "$tmp"/
.venv/bin/python -m pip install -q "$tmp"
