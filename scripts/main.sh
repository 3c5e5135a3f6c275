#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded defaults: no API key, no GPU, no network.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" "[model]"
.venv/bin/coworkenv validate "$(.venv/bin/python -c 'from coworkenv.tasks.builtin import library_dir; print(library_dir())')"
for face in inprocess http mcp; do
  .venv/bin/coworkenv run M1003_ticket_kb_resolution --agent reference --face "$face"
done
