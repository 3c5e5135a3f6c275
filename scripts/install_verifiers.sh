#!/usr/bin/env bash
# Set up verifiers (coworkenv[verifiers]) in its own venv (idempotent), for
# tests/test_integrations_verifiers.py and anyone running `vf-eval coworkenv-verifiers`.
# Its own venv because verifiers 0.4 pins openai<3 and mcp==2.0.0, while Inspect AI's OpenAI
# provider (in .venv) needs openai>=3.4: the two cannot share one environment.
# Outside CI a failed install is a warning (exit 0) and the verifiers tests skip saying why; under
# CI=true it is an error (exit 1). Prints the venv's path on its last line when ready.
#   COWORKENV_VERIFIERS_VENV  default ~/.cache/coworkenv/verifiers-venv
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ci=0
case "${CI:-}" in true|TRUE|True|1|yes) ci=1 ;; esac
VENV="${COWORKENV_VERIFIERS_VENV:-$HOME/.cache/coworkenv/verifiers-venv}"
fail() {
  echo "install_verifiers: $*" >&2
  if [ "$ci" = 1 ]; then exit 1; fi
  exit 0
}
ready() { "$VENV/bin/python" -c "import verifiers.v1, coworkenv_verifiers" 2>/dev/null && [ -x "$VENV/bin/uv" ]; }
if ! ready; then
  [ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV" || fail "could not create $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1
  "$VENV/bin/python" -m pip install -q -e ".[verifiers]" || fail "pip install -e .[verifiers] into $VENV failed"
  ready || fail "verifiers or coworkenv_verifiers does not import in $VENV"
fi
echo "$VENV"
