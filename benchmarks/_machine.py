"""What every benchmark reports about the machine it ran on (imported by the scripts beside it):
the library's own :mod:`coworkenv.machine`, so benchmarks and the main job describe a CPU alike."""

from __future__ import annotations

import datetime as dt
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from coworkenv.machine import cpu_flags, cpu_model, machine_info, native_bf16

__all__ = ["commit", "cpu_flags", "cpu_model", "machine_info", "native_bf16", "provenance"]
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


def provenance(benchmark: str, started: dt.datetime) -> dict[str, Any]:
    """The head of a results file: the benchmark's name, when it started, the commit and the command
    line as it was typed (``python`` and the script's arguments, shell-quoted)."""
    return {
        "benchmark": benchmark,
        "date": started.isoformat(timespec="seconds"),
        "commit": commit(),
        "command": " ".join(["python", *map(shlex.quote, sys.argv)]),
    }
