"""What every benchmark reports about the machine it ran on (imported by the scripts beside it):
the library's own :mod:`coworkenv.machine`, so benchmarks and the main job describe a CPU alike."""

from __future__ import annotations

import subprocess
from pathlib import Path

from coworkenv.machine import cpu_flags, cpu_model, machine_info, native_bf16

__all__ = ["commit", "cpu_flags", "cpu_model", "machine_info", "native_bf16"]
ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The checkout's short commit, with `` (src modified)`` when the library's sources differ from it
    (documentation and results files do not count); "unknown" without git."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], check=True, capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()

    try:
        return git("rev-parse", "--short", "HEAD") + (
            " (src modified)" if git("status", "--porcelain", "src") else ""
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
