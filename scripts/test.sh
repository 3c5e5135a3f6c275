#!/usr/bin/env bash
# Set up (idempotent: venv, model extras, chromium, harness CLIs) and run every check:
# ruff, mypy --strict, pytest.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" "[dev,model,ray]"
bash scripts/install_system_deps.sh
bash scripts/install_claw_eval.sh
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/pytest "$@"
