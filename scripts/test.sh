#!/usr/bin/env bash
# Set up (idempotent) and run every check: ruff, mypy --strict, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/pytest "$@"
