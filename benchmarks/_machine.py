"""What every benchmark reports about the machine it ran on (imported by the scripts beside it):
the library's own :mod:`coworkenv.machine`, so benchmarks and the main job describe a CPU alike."""

from __future__ import annotations

import subprocess
from pathlib import Path

from coworkenv.machine import cpu_flags, cpu_model, machine_info, native_bf16

__all__ = ["commit", "cpu_flags", "cpu_model", "machine_info", "native_bf16"]
HERE = Path(__file__).resolve().parent


def commit() -> str:
    """The checkout's commit, ``+dirty`` when tracked files differ from it ("unknown" without git)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], check=True, capture_output=True, text=True, cwd=HERE
        ).stdout.strip()

    try:
        return git("rev-parse", "--short", "HEAD") + (
            "+dirty" if git("status", "--porcelain", "-uno") else ""
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
