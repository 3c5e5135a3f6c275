"""The images exported Harbor tasks build FROM, built offline from this installation of coworkenv.

Contract:

* :data:`BASE_IMAGE` (``local/debian:bookworm``) is Debian minbase + python3, imported by
  ``scripts/install_harbor.sh`` (debootstrap; nothing is pulled from an image hub).
* :func:`ensure_runtime_image` builds :data:`RUNTIME_IMAGE` on top of it: a venv at
  ``/opt/coworkenv/venv`` with coworkenv's runtime dependencies (from PyPI, which containers reach)
  and the ``coworkenv`` package of *this* process at ``/opt/coworkenv/lib`` — without the built-in
  task library (``tasks/library``: specs, references, checks), since the agent's container is built
  from the same image — and the unprivileged user :data:`AGENT_USER` the agent runs as.
  Idempotent: the image carries a label with the hash of what went in, and a
  matching image is reused. Task Dockerfiles say ``FROM ${COWORKENV_IMAGE}`` (default
  :data:`RUNTIME_IMAGE`, see :mod:`coworkenv.synth.packaging.harbor`).
* :func:`docker_ready` says why Docker cannot be used, or ``None`` when it can.

A failed step raises :class:`~coworkenv.harbor.HarborError` naming the step and the last lines
of Docker's output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from coworkenv.harbor import HarborError

BASE_IMAGE = "local/debian:bookworm"
RUNTIME_IMAGE = "local/coworkenv:runtime"
HASH_LABEL = "org.coworkenv.hash"
AGENT_USER = "agent"
"""The unprivileged user the agent runs as (``[agent] user`` in the exported task.toml)."""
EXCLUDED = ("tasks/library",)
"""Package subpaths left out of the image: what an agent in the container must not read."""

FALLBACK_REQUIREMENTS = (
    "pydantic>=2.10",
    "pyyaml>=6",
    "fastapi>=0.115",
    "uvicorn[standard]>=0.30",
    "mcp>=2.3,<3",
    "orjson>=3.10",
    "httpx>=0.27",
    "aiohttp>=3.10",
    "typer>=0.15",
    "rich>=13",
)


def tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def docker_ready(docker: str = "docker") -> str | None:
    """``None`` when ``docker info`` answers and ``docker compose`` v2 exists, else the reason."""
    if shutil.which(docker) is None:
        return f"{docker} is not installed (run scripts/install_harbor.sh)"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60, check=False)
    if info.returncode != 0:
        return f"the Docker daemon does not answer (run scripts/install_harbor.sh): {tail(info.stderr, 3)}"
    compose = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=60, check=False
    )
    if compose.returncode != 0:
        return "docker compose v2 is missing (run scripts/install_harbor.sh)"
    return None


def runtime_requirements() -> list[str]:
    """coworkenv's runtime dependencies (no extras), as pip requirement lines."""
    try:
        reqs = requires("coworkenv") or []
    except PackageNotFoundError:
        return list(FALLBACK_REQUIREMENTS)
    return [r for r in reqs if "extra ==" not in r] or list(FALLBACK_REQUIREMENTS)


def package_dir() -> Path:
    import coworkenv

    return Path(coworkenv.__file__).resolve().parent


def _copy_package(dest: Path) -> None:
    src = package_dir()
    skip = {src / e for e in EXCLUDED}

    def ignore(directory: str, names: list[str]) -> set[str]:
        d = Path(directory)
        return {n for n in names if n == "__pycache__" or n.endswith(".pyc") or d / n in skip}

    shutil.copytree(src, dest, ignore=ignore)


def _tree_hash(root: Path, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def host_ca_bundle() -> Path:
    """The CA bundle this host trusts (``$SSL_CERT_FILE``, else Debian's), copied into the image."""
    for cand in (os.environ.get("SSL_CERT_FILE", ""), "/etc/ssl/certs/ca-certificates.crt"):
        if cand and Path(cand).is_file():
            return Path(cand)
    raise HarborError("building the runtime image: no CA bundle on this host (install ca-certificates)")


def runtime_dockerfile(base: str, digest: str) -> str:
    return "\n".join(
        [
            f"FROM {base}",
            # the host's CA bundle: containers reach the registries through whatever the host trusts
            "COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
            "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt"
            " REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt"
            " NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt",
            "COPY requirements.txt /opt/coworkenv/requirements.txt",
            "RUN python3 -m venv /opt/coworkenv/venv && /opt/coworkenv/venv/bin/pip install -q"
            " --no-cache-dir --disable-pip-version-check -r /opt/coworkenv/requirements.txt",
            "COPY coworkenv /opt/coworkenv/lib/coworkenv",
            # the agent's user: it cannot rewrite the verifier's interpreter, its package or its
            # processes (the verifier runs as root in the same container)
            f"RUN useradd -m -u 1000 -s /bin/bash {AGENT_USER}",
            "ENV PATH=/opt/coworkenv/venv/bin:$PATH PYTHONPATH=/opt/coworkenv/lib PYTHONDONTWRITEBYTECODE=1",
            f'LABEL {HASH_LABEL}="{digest}"',
            "",
        ]
    )


def image_label(image: str, docker: str = "docker") -> str | None:
    """The :data:`HASH_LABEL` of ``image``, or ``None`` when the image does not exist."""
    r = subprocess.run(
        [docker, "image", "inspect", "--format", f'{{{{index .Config.Labels "{HASH_LABEL}"}}}}', image],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return r.stdout.strip() if r.returncode == 0 else None


def ensure_runtime_image(
    tag: str = RUNTIME_IMAGE, *, base: str = BASE_IMAGE, docker: str = "docker", timeout_s: float = 900
) -> str:
    """Build ``tag`` from this coworkenv unless an image with the same content hash exists."""
    if image_label(base, docker) is None:
        raise HarborError(
            f"building the runtime image: base image {base} is missing (run scripts/install_harbor.sh)"
        )
    with tempfile.TemporaryDirectory(prefix="coworkenv-runtime-") as tmp:
        ctx = Path(tmp)
        _copy_package(ctx / "coworkenv")
        reqs = "\n".join(runtime_requirements()) + "\n"
        (ctx / "requirements.txt").write_text(reqs, encoding="utf-8")
        ca = host_ca_bundle()
        shutil.copyfile(ca, ctx / "ca-certificates.crt")
        digest = _tree_hash(ctx / "coworkenv", reqs + base + ca.read_text(encoding="utf-8", errors="replace"))
        if image_label(tag, docker) == digest:
            return tag
        (ctx / "Dockerfile").write_text(runtime_dockerfile(base, digest), encoding="utf-8")
        try:
            r = subprocess.run(
                [docker, "build", "-q", "-t", tag, str(ctx)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HarborError(
                f"building the runtime image {tag}: timed out after {timeout_s:.0f} s"
            ) from None
        if r.returncode != 0:
            raise HarborError(f"building the runtime image {tag} failed:\n{tail(r.stderr or r.stdout)}")
    return tag


def prune_replaced(docker: str = "docker") -> None:
    """Remove our images that a rebuild left untagged (each harness image is ~0.5 GB of layers).

    Never while a build runs: the legacy builder's intermediate images are untagged and carry the
    label too. ``scripts/install_harbor.sh`` prunes the same way before any test builds.
    """
    subprocess.run(
        [docker, "image", "prune", "-f", "--filter", f"label={HASH_LABEL}"],
        capture_output=True,
        timeout=300,
        check=False,
    )


__all__ = [
    "BASE_IMAGE",
    "RUNTIME_IMAGE",
    "docker_ready",
    "ensure_runtime_image",
    "image_label",
    "runtime_requirements",
]
