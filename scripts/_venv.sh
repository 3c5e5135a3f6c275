# Sourced by the scripts here: create .venv if missing and install the project (extras in $1).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# torch first, pinned: this version's CPU wheel is on the machine; a looser spec pulls a CUDA build.
.venv/bin/python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
.venv/bin/python -m pip install -q -e ".${1:-}"
