#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded defaults: no API key, no GPU, no network.
# synth → teacher + SmolLM2 student rollouts through the proxy → curate → trees → GRPO update →
# evaluation before/after → runs/main/report.html. Rerunning resumes; pass --fresh to start over,
# --config FILE to change it (see examples/job.toml).
set -euo pipefail
source "$(dirname "$0")/_venv.sh" "[model]"
.venv/bin/coworkenv job "$@"
