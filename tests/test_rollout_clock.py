"""A rollout's time limit on the wall clock or on the clock of its own work (coworkenv.rollout.clock).

On a loaded shared engine every model call waits for the other rollouts' compute; on the wall clock
that time becomes the policy's timeout. The ``work`` clock leaves it out, and still ends a rollout
whose engine stalls (its wall cap)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from coworkenv.proxy.backends.scripted import ScriptedBackend, script_from_reference
from coworkenv.rollout.clock import RolloutClock
from coworkenv.rollout.harnesses.loop import LoopHarness
from coworkenv.rollout.runner import run_rollouts
from coworkenv.spec import TaskSpec
from coworkenv.tasks.builtin import builtin_task


def test_the_work_clock_leaves_out_model_time_and_keeps_a_wall_cap() -> None:
    waited = [0.0]
    wall = RolloutClock(10.0, "wall", lambda: waited[0], start=time.monotonic() - 6.0)
    work = RolloutClock(10.0, "work", lambda: waited[0], start=time.monotonic() - 6.0)
    waited[0] = 5.0
    assert 3.9 < wall.left() < 4.1  # every second counted
    assert 8.9 < work.left() < 9.1  # 6 s elapsed, 5 of them on the model
    stalled = RolloutClock(10.0, "work", lambda: 39.0, start=time.monotonic() - 40.0, wall_cap=4.0)
    assert stalled.left() <= 0.0  # 40 s of wall time is the cap, however little of it was work
    assert stalled.expired()


class _Slow:
    """A backend whose every answer takes ``delay_s`` (a busy shared engine)."""

    def __init__(self, inner: ScriptedBackend, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: Any) -> Any:
        await asyncio.sleep(self.delay_s)
        return await self.inner.complete(request)


def _run(tmp_path: Path, spec: TaskSpec, clock: str) -> Any:
    backend = _Slow(ScriptedBackend(script_from_reference(spec)), 0.6)
    summary = run_rollouts(
        [spec],
        ["loop"],
        1,
        backend,
        tmp_path / clock,
        1,
        progress=False,
        harness_objects={"loop": LoopHarness()},
        timeout_cap_s=2.0,
        timeout_clock=clock,
    )
    (rec,) = summary.records
    return rec


def test_a_slow_engine_times_the_rollout_out_on_the_wall_clock_but_not_on_the_work_clock(
    tmp_path: Path,
) -> None:
    """M1003's reference takes 6 model calls (5 tool calls, then the answer); at 0.6 s each they
    alone are over the 2 s limit. On the wall clock the rollout is cut off and graded as the
    policy's timeout; on the work clock it finishes with the reference's reward, and its record
    says how long it waited on the model."""
    spec = builtin_task("M1003_ticket_kb_resolution")
    assert len(spec.reference.steps) + 1 >= 4
    cut = _run(tmp_path, spec, "wall")
    assert cut.status == "ok"
    assert cut.timed_out
    assert cut.rewards is not None
    assert cut.rewards.reward < 1.0
    assert cut.meta["clock"] == "wall"
    done = _run(tmp_path, spec, "work")
    assert done.status == "ok"
    assert not done.timed_out
    assert done.rewards is not None
    assert done.rewards.reward == 1.0
    assert done.meta["clock"] == "work"
    assert done.meta["model_s"] >= 0.6 * (len(spec.reference.steps) + 1) * 0.9
    assert done.meta["work_s"] < 2.0 < done.wall_s
