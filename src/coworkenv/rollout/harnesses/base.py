"""The harness interface: what a sandbox hands a harness, and what the harness hands back.

Contract: :meth:`Harness.run` drives one agent episode to its end inside the sandbox described by
a :class:`HarnessContext` (fresh workspace and HOME, the task's trial, the rollout's proxy base
URL, the trial's MCP endpoint, a wall-clock budget) and returns a :class:`HarnessResult`. It talks
to the model **only** through ``ctx.proxy_url`` (so every call is captured), and to the services
only through the task's tools (MCP for black-box CLIs, :meth:`Trial.call` for the white-box loop);
every process it starts runs in ``ctx.jail``, which sees the workspace, HOME and the harness
installation but nothing that grades the rollout.

A harness raises :class:`HarnessNotInstalled` when its binary is missing (a start failure, with
the fix in the message) and :class:`HarnessInfraError` for failures that are not the policy's
(HTTP errors from the proxy, a crashed process); the sandbox turns both into infrastructure
failure labels. It never grades: grading is the sandbox's job, from the trial's audit events.

A harness that starts no process and writes no file (an in-process agent speaking HTTP, such as the
load rig's dialect agents) sets ``starts_processes = False``: its sandbox is then plain directories,
with no filesystem of its own to make and mount (mkfs + loop mount: ~50 ms of wall and ~47 ms of
CPU per rollout on a quiet machine, ``benchmarks/results/scale-sandbox-fs-2026-12-06.json``; far more
with thousands mounted) and no process scan when it ends. Absent, it is taken to be True.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from coworkenv.errors import CoworkError
from coworkenv.proxy.messages import Message
from coworkenv.rollout.clock import RolloutClock
from coworkenv.rollout.isolation import Jail
from coworkenv.rollout.record import FailureKind
from coworkenv.services.trial import Trial
from coworkenv.spec import TaskSpec


class HarnessNotInstalled(CoworkError):
    """The harness's binary is missing; the message says how to install it."""


class HarnessInfraError(CoworkError):
    """A failure that is not the policy's (HTTP error, crash); becomes an infra-failure label."""

    def __init__(self, kind: FailureKind, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind: FailureKind = kind
        self.detail = detail


@dataclass(frozen=True)
class HarnessContext:
    """Everything one rollout's harness may use."""

    spec: TaskSpec
    rollout_id: str
    trial: Trial
    workspace: Path
    home: Path
    proxy_url: str
    """Base URL of this rollout's proxy prefix, e.g. ``http://127.0.0.1:P/r/<rid>/<secret>``."""
    mcp_url: str | None
    """The trial's streamable-HTTP MCP endpoint (``.../t/<trial>/mcp``), when a server runs."""
    timeout_s: float
    max_turns: int
    env: Mapping[str, str] = field(default_factory=dict)
    """Base environment for child processes (HOME, PATH, the sandbox marker, ...)."""
    log_dir: Path | None = None
    """Where a harness may leave stdout/stderr logs (inside the sandbox)."""
    jail: Jail | None = None
    """The rollout's jail: every child process a harness starts runs inside it
    (:func:`coworkenv.rollout.sandbox.run_process` with ``jail=ctx.jail``)."""
    clock: RolloutClock | None = None
    """The rollout's time limit (:mod:`coworkenv.rollout.clock`); ``None``: ``timeout_s`` of wall
    time from the context's creation."""

    def __post_init__(self) -> None:
        if self.clock is None:
            object.__setattr__(self, "clock", RolloutClock(self.timeout_s))

    @property
    def _clock(self) -> RolloutClock:
        assert self.clock is not None  # set in __post_init__
        return self.clock

    def time_left(self) -> float:
        """Seconds of the rollout's limit left on its clock."""
        return self._clock.left()

    def wall_left(self) -> float:
        """Wall seconds one wait (a model call, a process) may take at most: what is left of the
        limit on the wall clock; on the ``work`` clock, of its wall cap (model time does not count)."""
        c = self._clock
        return c.limit_s * c.wall_cap - c.elapsed() if c.mode == "work" else c.left()

    @property
    def openai_base_url(self) -> str:
        return f"{self.proxy_url}/v1"


@dataclass
class HarnessResult:
    """What a harness reports; the sandbox adds the evidence (audit, capture) and the grade."""

    final_answer: str = ""
    messages: tuple[Message, ...] = ()
    """The conversation, when the harness knows it (white-box); black-box ones leave it empty."""
    exit_code: int | None = None
    timed_out: bool = False
    failure: tuple[FailureKind, str] | None = None
    """Set when the harness itself detected a failure that is not the policy's."""
    stderr_tail: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def starts_processes(harness: object) -> bool:
    """Whether ``harness`` may start processes (see the module docstring; True unless it says not)."""
    return bool(getattr(harness, "starts_processes", True))


@runtime_checkable
class Harness(Protocol):
    """One agent harness. ``name`` is its id in records and on the command line."""

    name: str

    @property
    def version(self) -> str: ...

    def check_installed(self) -> None:
        """Raise :class:`HarnessNotInstalled` when the harness cannot start here."""
        ...

    async def run(self, ctx: HarnessContext) -> HarnessResult: ...
