#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded defaults: no API key, no GPU, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e .
.venv/bin/coworkenv validate "$(.venv/bin/python -c 'from coworkenv.tasks.builtin import library_dir; print(library_dir())')"
for face in inprocess http mcp; do
  .venv/bin/coworkenv run M1003_ticket_kb_resolution --agent reference --face "$face"
done
