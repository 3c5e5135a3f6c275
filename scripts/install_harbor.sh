#!/usr/bin/env bash
# Set up what `coworkenv package --format harbor` tasks need to run under Harbor (idempotent):
#   1. Docker: Debian's docker.io + debootstrap; `dockerd` started (log /var/log/coworkenv-dockerd.log)
#      when `docker info` does not answer;
#   2. `docker compose` v2 (Harbor needs it; bookworm lacks it): Debian trixie's docker-compose
#      package, downloaded alone with apt pointed at trixie, installed with dpkg -i;
#   3. the offline base image local/debian:bookworm (debootstrap minbase + python3, imported: no image
#      is pulled from a hub);
#   4. Harbor (PyPI harbor==$HARBOR_VERSION) in its own Python >= 3.12 venv ($COWORKENV_HARBOR_VENV).
# The runtime image the tasks build FROM (coworkenv installed from this checkout) is built on demand
# by `coworkenv.harbor.images.ensure_runtime_image` (tests and `scripts/harbor_library.sh` call it).
#
# Outside CI a failed step is a warning (exit 0) and the Harbor tests skip saying why; under CI=true
# it is an error (exit 1), and tests/ci_skips.py fails any Harbor test that skips. Prints the Harbor
# venv's path on its last line when everything is ready.
#   COWORKENV_HARBOR_VENV  default ~/.cache/coworkenv/harbor-venv
#   HARBOR_VERSION         default 0.25.0
#   PYTHON312              the interpreter that creates the venv (default: python3.12 on PATH, else pyenv's)
set -uo pipefail
ci=0
case "${CI:-}" in true|TRUE|True|1|yes) ci=1 ;; esac
VENV="${COWORKENV_HARBOR_VENV:-$HOME/.cache/coworkenv/harbor-venv}"
HARBOR_VERSION="${HARBOR_VERSION:-0.25.0}"
BASE_IMAGE="local/debian:bookworm"
LOG_DIR="${TMPDIR:-/tmp}"
SUDO=""
[ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"

fail() {
  echo "install_harbor: $*" >&2
  if [ "$ci" = 1 ]; then exit 1; fi
  exit 0
}

# The Debian mirror apt uses (deb822 `URIs:` or one-line `deb URL suite`), for debootstrap.
debian_mirror() {
  local f url
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    url="$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit} /^deb / && $2 ~ /debian\/?$/ {print $2; exit}' "$f")"
    [ -n "$url" ] && { echo "$url"; return 0; }
  done
  echo "http://deb.debian.org/debian"
}

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then $SUDO apt-get update -qq >>"$LOG_DIR/coworkenv-harbor-apt.log" 2>&1; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >>"$LOG_DIR/coworkenv-harbor-apt.log" 2>&1
}

# 1. Docker
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  apt_install docker.io debootstrap || fail "apt-get install docker.io debootstrap failed (see $LOG_DIR/coworkenv-harbor-apt.log)"
fi
if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" = "0" ] || fail "dockerd is not running and only root can start it here"
  setsid nohup dockerd >/var/log/coworkenv-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || fail "dockerd did not start (see /var/log/coworkenv-dockerd.log)"
  echo "install_harbor: dockerd started" >&2
fi

# 2. docker compose v2
if ! docker compose version >/dev/null 2>&1; then
  tmp="$(mktemp -d)"
  echo "Types: deb
URIs: $(debian_mirror)
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >"$tmp/trixie.sources"
  mkdir -p "$tmp/lists/partial" "$tmp/archives/partial"
  opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$tmp" -o "Dir::State::Lists=$tmp/lists"
        -o "Dir::Cache::Archives=$tmp/archives" -o "APT::Sandbox::User=root")
  if { apt-get "${opts[@]}" update -qq && (cd "$tmp" && apt-get "${opts[@]}" download docker-compose) \
       && $SUDO dpkg -i "$tmp"/docker-compose_*.deb; } >>"$LOG_DIR/coworkenv-harbor-apt.log" 2>&1; then
    echo "install_harbor: docker compose $(docker compose version --short 2>/dev/null) installed" >&2
  fi
  rm -rf "$tmp"
  docker compose version >/dev/null 2>&1 || fail "could not install docker compose v2 from trixie (see $LOG_DIR/coworkenv-harbor-apt.log)"
fi

# 3. the offline base image
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  rootfs="$(mktemp -d)"
  if $SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
       bookworm "$rootfs" "$(debian_mirror)" >"$LOG_DIR/coworkenv-debootstrap.log" 2>&1 \
     && $SUDO tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null; then
    echo "install_harbor: $BASE_IMAGE imported" >&2
  fi
  $SUDO rm -rf "$rootfs"
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || fail "could not build $BASE_IMAGE (see $LOG_DIR/coworkenv-debootstrap.log)"
fi

# 4. Harbor in its own venv
if ! { [ -x "$VENV/bin/harbor" ] && "$VENV/bin/python" -c "from importlib.metadata import version; assert version('harbor') == '$HARBOR_VERSION'" 2>/dev/null; }; then
  py=""
  # (a pyenv shim on PATH may exist yet refuse to run: each candidate must actually start)
  for cand in ${PYTHON312:-} "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
              "$(command -v python3.13 || true)"; do
    [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null \
      && { py="$cand"; break; }
  done
  [ -n "$py" ] || fail "Harbor needs Python >= 3.12 and none was found (set PYTHON312)"
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VENV/bin/python" ] || "$py" -m venv "$VENV" || fail "cannot create $VENV"
  "$VENV/bin/python" -m pip install -q "harbor==$HARBOR_VERSION" >"$LOG_DIR/coworkenv-harbor-pip.log" 2>&1 \
    || fail "pip install harbor==$HARBOR_VERSION failed (see $LOG_DIR/coworkenv-harbor-pip.log)"
  echo "install_harbor: harbor $HARBOR_VERSION installed in $VENV" >&2
fi
# untagged images of ours that a rebuild replaced (each harness image is ~0.5 GB); nothing builds now
docker image prune -f --filter label=org.coworkenv.hash >/dev/null 2>&1 || true
echo "$VENV"
