#!/usr/bin/env bash
# Set up (idempotent) and run every check: ruff, mypy --strict, pytest.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" "[dev,model,ray]"
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/pytest "$@"
