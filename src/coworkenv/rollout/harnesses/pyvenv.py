"""Black-box harnesses installed from PyPI, each in a virtual environment of its own.

Contract: a :class:`VenvHarness` is an :class:`~coworkenv.rollout.harnesses.npm.NpmCliHarness`
whose installation is a venv at ``$COWORKENV_HARNESS_DIR/<package>@<version>/`` (filled by
``scripts/install_harnesses.sh``, which writes ``.installed`` last) with its binary at
``bin/<binary_name>``. In the jail it sees, read-only, the venv and the base interpreter the venv
was made from (a venv's ``bin/python`` is a link to it). :func:`driver` copies one of our driver
scripts (:mod:`coworkenv.rollout.harnesses.drivers`: small programs that call the unmodified SDK)
into the sandbox HOME, where the jailed interpreter can read it.
"""

from __future__ import annotations

import os
from pathlib import Path

from coworkenv.rollout.harnesses.base import HarnessNotInstalled
from coworkenv.rollout.harnesses.npm import INSTALL_HINT, NpmCliHarness

DRIVERS = Path(__file__).resolve().parent / "drivers"


class VenvHarness(NpmCliHarness):
    install_name = ""
    """The harness's name for ``scripts/install_harnesses.sh`` (default: :attr:`name`)."""

    def binary(self) -> Path:
        return self.install_dir() / "bin" / self.binary_name

    def python(self) -> Path:
        return self.install_dir() / "bin" / "python"

    def runtime_paths(self) -> list[Path]:
        """The venv and the base interpreter's prefix (``<prefix>/bin/python3.X``)."""
        paths = [self.install_dir()]
        python = self.python()
        if python.exists():
            paths.append(Path(os.path.realpath(python)).parent.parent)
        return paths

    def check_installed(self) -> None:
        marker = self.install_dir() / ".installed"
        if not self.binary().exists() or not marker.exists():
            raise HarnessNotInstalled(
                f"harness {self.name!r} is not installed ({self.package}=={self.pinned} expected as a venv "
                f"at {self.install_dir()}); run {INSTALL_HINT} {self.install_name or self.name}"
            )


def driver(name: str, home: Path) -> Path:
    """Copy the driver script ``drivers/<name>`` into ``home``; returns the copy's path."""
    dest = home / ".coworkenv" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text((DRIVERS / name).read_text(encoding="utf-8"), encoding="utf-8")
    return dest
