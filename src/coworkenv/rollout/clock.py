"""A rollout's time limit, on the wall clock or on the clock of its own work.

On a shared local engine a model call waits for every other rollout's prefill and decode: with 16
rollouts on two CPU cores one call can take minutes. On the wall clock that time counts against the
rollout, so a busy machine turns the policy's calls into its timeouts (graded as the policy's) or
into ``timeout_before_call`` infra failures — scores that depend on the machine and the concurrency,
not on the policy. The ``work`` clock does not count the seconds the rollout had a model call in
flight at the proxy (:meth:`coworkenv.proxy.server.ProxyServer.model_seconds`); its tool calls,
shell commands and harness overhead still count. The policy's own generation is bounded anyway by
``max_turns`` and the backend's ``max_new_tokens``.

Contract:

* ``RolloutClock(limit_s, mode, model_s)``: :meth:`used` is the elapsed wall time, less
  ``model_s()`` on the ``work`` clock; :meth:`left` is ``limit_s - used()``, and never more than
  what is left of ``wall_cap × limit_s`` of wall time (a stalled engine still ends the rollout);
* :meth:`expired` is ``left() <= 0``; :meth:`wait` sleeps until the clock expires (polling, since
  model time stops it) and returns — the sandbox's watchdog.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CLOCKS", "ClockMode", "RolloutClock"]

ClockMode = Literal["wall", "work"]
CLOCKS: tuple[ClockMode, ...] = ("wall", "work")
WALL_CAP = 4.0
"""On the ``work`` clock, the wall time a rollout may take at most, in multiples of its limit."""


@dataclass
class RolloutClock:
    limit_s: float
    mode: ClockMode = "wall"
    model_s: Callable[[], float] = lambda: 0.0
    wall_cap: float = WALL_CAP
    start: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def used(self) -> float:
        wall = self.elapsed()
        return wall - self.model_s() if self.mode == "work" else wall

    def left(self) -> float:
        wall_left = self.limit_s * (self.wall_cap if self.mode == "work" else 1.0) - self.elapsed()
        return min(self.limit_s - self.used(), wall_left)

    def expired(self) -> bool:
        return self.left() <= 0

    async def wait(self, poll_s: float = 0.5) -> None:
        while (left := self.left()) > 0:
            await asyncio.sleep(min(poll_s, left) if self.mode == "work" else left)
