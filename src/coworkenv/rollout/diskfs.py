"""A size-limited filesystem per rollout: file data, directories and preallocation all count.

A quota polled from outside counts too late and too little: 30,000 directories put 118 MiB past a
48 MiB quota (only regular files' blocks were counted), and a burst of ``fallocate`` landed 2.3x
the quota before the poller acted. A filesystem of the quota's size refuses the write itself
(``ENOSPC``), whatever made it.

Contract:

* :func:`disk_problem` says why no such filesystem can be made here (``None``: it can): it needs
  root, ``mkfs.ext4``, ``mount`` and a loop device.
* :meth:`RolloutDisk.mount` makes a sparse image of ``size_bytes`` beside ``root``
  (``<root>.img``; only written blocks take disk), formats it ext4 (no journal, no reserved
  blocks, one inode per 16 KiB) and mounts it on ``root`` (``nosuid,nodev``); the sandbox's
  workspace, HOME, TMPDIR and logs live in it.
* :meth:`RolloutDisk.unmount` unmounts it (lazily when a process still holds it) and deletes the
  image; with ``keep`` the contents are first copied to a plain directory at ``root``. Idempotent.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

INODE_RATIO = 16384


@functools.cache
def disk_problem() -> str | None:
    """Why a per-rollout filesystem cannot be made here (None: it can). Probed once."""
    if os.geteuid() != 0:
        return "not root: mounting a per-rollout filesystem needs root"
    missing = [t for t in ("mkfs.ext4", "mount", "umount") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not found (apt-get install e2fsprogs mount)"
    with tempfile.TemporaryDirectory(prefix="coworkenv-disk-probe-") as tmp:
        try:
            disk = RolloutDisk.mount(Path(tmp) / "probe", 4 << 20)
        except OSError as exc:
            return f"a loop-mounted filesystem cannot be made here: {exc}"
        disk.unmount()
    return None


@dataclass
class RolloutDisk:
    """One rollout's filesystem (see the module docstring)."""

    root: Path
    image: Path
    size_bytes: int
    mounted: bool = True

    @classmethod
    def mount(cls, root: Path, size_bytes: int) -> RolloutDisk:
        """Make, format and mount the filesystem on ``root`` (created; must not exist or be empty).
        Raises ``OSError`` with the tool's message when the kernel or a tool refuses."""
        image = root.with_name(root.name + ".img")
        root.mkdir(parents=True, exist_ok=True)
        with image.open("wb") as fh:
            fh.truncate(size_bytes)
        try:
            _run(
                "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-i", str(INODE_RATIO),
                "-E", "lazy_itable_init=1,nodiscard", str(image),
            )  # fmt: skip
            _run("mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(root))
        except OSError:
            image.unlink(missing_ok=True)
            raise
        (root / "lost+found").rmdir()  # one inode back, and nothing of ours is lost there
        return cls(root, image, size_bytes)

    def used_bytes(self) -> int:
        st = os.statvfs(self.root)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def full(self) -> bool:
        """Whether the filesystem is full: writes fail (``ENOSPC``) once its free space is down to
        what ext4 keeps for its own metadata (2% of it, at most 4,096 blocks), or its inodes ran out."""
        st = os.statvfs(self.root)
        kept = min(self.size_bytes // 50, 4096 * st.f_frsize) + (1 << 20)
        return st.f_bavail * st.f_frsize < kept or st.f_favail < max(1, st.f_files // 100)

    def unmount(self, *, keep: bool = False) -> None:
        """Unmount and delete the image; ``keep`` copies the contents to a plain ``root`` first."""
        if not self.mounted:
            return
        copy: Path | None = None
        if keep:
            copy = Path(tempfile.mkdtemp(prefix=self.root.name + ".", dir=self.root.parent))
            shutil.copytree(self.root, copy, symlinks=True, dirs_exist_ok=True)
        try:
            _run("umount", str(self.root))
        except OSError:
            _run("umount", "-l", str(self.root))  # a straggler holds it: detach now, freed when it dies
        self.mounted = False
        self.image.unlink(missing_ok=True)
        if copy is not None:
            self.root.rmdir()
            copy.rename(self.root)


def _run(*argv: str) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OSError(f"{argv[0]}: {exc}") from None
    if proc.returncode != 0:
        raise OSError(f"{' '.join(argv[:2])}… exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
