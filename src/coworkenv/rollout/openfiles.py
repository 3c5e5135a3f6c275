"""How many rollouts one process can hold live before it runs out of open files.

Contract: :func:`bounded_concurrency` takes the concurrency a run asked for and returns what this
process can sustain — the open-file limit (``RLIMIT_NOFILE``, first raised to its hard limit, as
servers do), less the files already open and :data:`RESERVED`, over :data:`PER_ROLLOUT` — with a
:class:`Bound` saying what was asked, what runs and why when it had to cut. A run over the bound
keeps its rollouts queued behind the lower concurrency instead of failing them: before this, the
scale rig's 10,000 rollouts in two processes (5,000 live in each, ~19,700 of 20,000 files open)
lost 3,026 to ``EMFILE`` as labelled ``http_error`` infra failures.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

PER_ROLLOUT = 5
"""Files one live rollout holds open in the runner's process at its peak: the scale rig measured
19,683 open at 5,000 live in-process rollouts (each one's HTTP connections to the proxy and the
services, both ends in this process) — about 3.9 each; 5 leaves a margin."""
RESERVED = 512
"""Files kept free for everything else: logs, records, captures, the engine, the services."""


@dataclass(frozen=True)
class Bound:
    asked: int
    running: int
    open_files_limit: int
    open_now: int

    @property
    def limited(self) -> bool:
        return self.running < self.asked

    def message(self) -> str:
        need = self.open_now + RESERVED + self.asked * PER_ROLLOUT
        return (
            f"{self.asked} rollouts at once would need about {need} open files, and this process may "
            f"open {self.open_files_limit} (RLIMIT_NOFILE): running {self.running} at once, the rest "
            "queued behind them (raise the limit with `ulimit -n`, or spread the run over processes)"
        )


def open_files_limit() -> int:
    """This process's open-file limit, raised to the hard limit first where it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
        return hard
    return soft


def open_now() -> int:
    """Files this process has open (0 where ``/proc/self/fd`` cannot be read)."""
    try:
        return len(os.listdir(Path("/proc/self/fd")))
    except OSError:
        return 0


def bounded_concurrency(asked: int, *, limit: int | None = None, opened: int | None = None) -> Bound:
    """The concurrency this process can hold for a run that asked for ``asked`` (``limit`` and
    ``opened`` default to this process's own figures)."""
    limit = open_files_limit() if limit is None else limit
    opened = open_now() if opened is None else opened
    if limit == resource.RLIM_INFINITY or limit < 0:
        return Bound(asked, asked, limit, opened)
    room = max(1, (limit - opened - RESERVED) // PER_ROLLOUT)
    return Bound(asked, min(asked, room), limit, opened)
