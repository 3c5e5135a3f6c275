"""A run's scratch directory, and reclaiming the ones a dead run left behind.

A run (or a Ray rollout worker) keeps its sandboxes under a scratch directory in the system temp
dir; each sandbox may be a mounted filesystem of its own (:mod:`coworkenv.rollout.diskfs`). A run
that ends normally removes them; one killed with ``kill -9``, or a worker lost with its node, cannot,
and its mounts stay: each one a loop device and a kernel thread, which slow every later ``/proc``
scan (measured: 6,493 left by a killed 10,000-rollout run made each scan take 70 ms).

Contract:

* :func:`scratch_dir` makes ``<tmp>/<prefix><random suffix>`` (``mkdtemp``) and records its owner
  (pid and boot id) in ``.owner``, after first calling :func:`sweep_abandoned`;
* :func:`sweep_abandoned` removes every scratch directory whose owner is gone (its pid no longer
  runs, or the machine has rebooted since): each sandbox's filesystem unmounted (lazily) and its
  image deleted, then the directory. A directory with no owner recorded (one being made, or made by
  an older version) is left alone, as is one whose owner runs. Returns how many it removed.
* :func:`release_scratch` drops the owner record (a run that keeps its sandboxes for the user calls
  it at its end, so no later run sweeps them; a run killed before its end is swept).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from coworkenv.rollout.sandbox import remove_sandbox_dir

log = logging.getLogger(__name__)

OWNER_FILE = ".owner"
PREFIXES = ("coworkenv-run-", "coworkenv-ray-")
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return "unknown"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def scratch_dir(prefix: str, parent: Path | None = None) -> Path:
    """A fresh scratch directory owned by this process (see the module docstring)."""
    if prefix not in PREFIXES:
        raise ValueError(f"scratch prefix {prefix!r}: use one of {PREFIXES} (the sweep looks for those)")
    swept = sweep_abandoned(parent)
    if swept:
        log.warning("reclaimed %d scratch director(ies) of runs that died without cleaning up", swept)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (root / OWNER_FILE).write_text(f"{os.getpid()} {_boot_id()}\n")
    return root


def release_scratch(root: Path) -> None:
    """Leave ``root`` to the user: no sweep will remove it."""
    (root / OWNER_FILE).unlink(missing_ok=True)


def sweep_abandoned(parent: Path | None = None) -> int:
    """Remove the scratch directories of dead owners under ``parent`` (default: the temp dir)."""
    base = Path(parent or tempfile.gettempdir())
    removed = 0
    for prefix in PREFIXES:
        for root in base.glob(prefix + "*"):
            try:
                pid, boot = (root / OWNER_FILE).read_text().split()
                owner = int(pid)
            except (OSError, ValueError):
                continue
            if boot == _boot_id() and _alive(owner):
                continue
            boxes = root / "sandboxes"
            with contextlib.suppress(OSError):  # another run may be sweeping the same directory
                for box in list(boxes.iterdir()) if boxes.is_dir() else ():
                    if box.is_dir():
                        remove_sandbox_dir(box)
            shutil.rmtree(root, ignore_errors=True)
            removed += 1
    return removed
