#!/usr/bin/env bash
# The whole built-in library under Harbor: install Docker/Harbor (scripts/install_harbor.sh), build
# the runtime image, export every task with `coworkenv package --format harbor`'s exporter, run
# Harbor's oracle and nop agents, and write benchmarks/results/harbor-library-<date>.{json,md}.
# Extra arguments go to benchmarks/bench_harbor.py (e.g. --tasks ID..., --concurrency N).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CI=true bash scripts/install_harbor.sh >/dev/null
PY="${PYTHON:-.venv/bin/python}"
COWORKENV_BENCH_COMMAND="bash scripts/harbor_library.sh $*" exec "$PY" benchmarks/bench_harbor.py "$@"
