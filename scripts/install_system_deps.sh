#!/usr/bin/env bash
# System packages some tests need, installed when missing (idempotent):
#   - Debian's chromium + chromium-driver: the HTML report is opened in headless Chromium;
#   - the real agent harnesses (scripts/install_harnesses.sh): from npm Claude Code, Codex, Qwen Code,
#     opencode, Gemini CLI, OpenClaw (+ Node 24); from PyPI, each in its own venv, mini-swe-agent and
#     the OpenHands SDK (Python >= 3.12, e.g. pyenv's);
#   - bubblewrap (+ util-linux's prlimit/setpriv): the jail every harness process runs in.
# Outside CI a failed install is a warning and those tests skip, saying why. Under CI=true it is an
# error (exit 1), and tests/ci_skips.py fails any test that skips for want of them: CI cannot pass by
# skipping. COWORKENV_NO_SYSTEM_DEPS=1 skips this step (not honoured under CI=true).
set -uo pipefail
ci=0
case "${CI:-}" in true|TRUE|True|1|yes) ci=1 ;; esac
if [ "${COWORKENV_NO_SYSTEM_DEPS:-}" = "1" ]; then
  if [ "$ci" = 1 ]; then
    echo "install_system_deps: COWORKENV_NO_SYSTEM_DEPS=1 is ignored under CI=true" >&2
  else
    exit 0
  fi
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
failed=()
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"
  if { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver; } >/tmp/coworkenv-apt.log 2>&1; then
    echo "install_system_deps: chromium installed"
  else
    echo "install_system_deps: could not install chromium (see /tmp/coworkenv-apt.log); report tests will skip" >&2
    failed+=(chromium)
  fi
fi
if ! command -v bwrap >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"
  if { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap util-linux; } >/tmp/coworkenv-apt-bwrap.log 2>&1; then
    echo "install_system_deps: bubblewrap installed"
  else
    echo "install_system_deps: could not install bubblewrap (see /tmp/coworkenv-apt-bwrap.log)" >&2
  fi
fi
if ! bwrap --unshare-pid --ro-bind / / --proc /proc --dev /dev true >/dev/null 2>&1 \
   && ! bwrap --unshare-user --unshare-pid --ro-bind / / --proc /proc --dev /dev true >/dev/null 2>&1; then
  echo "install_system_deps: bubblewrap cannot start a jail here (missing, or the kernel refuses user namespaces)" >&2
  failed+=(bubblewrap)
fi
if command -v npm >/dev/null 2>&1; then
  if ! bash scripts/install_harnesses.sh; then
    echo "install_system_deps: harness install failed; harness tests will skip" >&2
    failed+=(harnesses)
  fi
else
  echo "install_system_deps: npm not found; harness tests will skip" >&2
  failed+=(npm)
fi
if [ "${#failed[@]}" -gt 0 ] && [ "$ci" = 1 ]; then
  echo "install_system_deps: under CI=true these must install: ${failed[*]}" >&2
  exit 1
fi
exit 0
