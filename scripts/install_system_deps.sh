#!/usr/bin/env bash
# System packages some tests need, installed when missing (idempotent):
#   - Debian's chromium + chromium-driver: the HTML report is opened in headless Chromium;
#   - the real agent harness CLIs (npm): Claude Code, Codex, Qwen Code, opencode (scripts/install_harnesses.sh);
#   - bubblewrap (+ util-linux's prlimit/setpriv): the jail every harness process runs in. Under CI=true
#     a missing or refused jail fails this script (the reward-integrity tests need it).
# Without them those tests skip and say why; set COWORKENV_NO_SYSTEM_DEPS=1 to skip this step.
set -uo pipefail
[ "${COWORKENV_NO_SYSTEM_DEPS:-}" = "1" ] && exit 0
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"
  if { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver; } >/tmp/coworkenv-apt.log 2>&1; then
    echo "install_system_deps: chromium installed"
  else
    echo "install_system_deps: could not install chromium (see /tmp/coworkenv-apt.log); report tests will skip" >&2
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
  if [ "${CI:-}" = "true" ]; then
    echo "install_system_deps: CI needs the jail (rollout isolation); failing" >&2
    exit 1
  fi
fi
if command -v npm >/dev/null 2>&1; then
  bash scripts/install_harnesses.sh || echo "install_system_deps: harness install failed; harness tests will skip" >&2
else
  echo "install_system_deps: npm not found; harness tests will skip" >&2
fi
exit 0
