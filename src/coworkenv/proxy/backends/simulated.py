"""A latency-simulating engine: a real turn, real token ids and logprobs, an engine's timing.

For load tests of the proxy, capture, services and runner (``benchmarks/bench_scale.py``), where the
2 cores must measure our overhead and not a model. Contract of :class:`SimulatedBackend`:

* the turn comes from ``inner`` (by default the task's reference solution,
  :meth:`ScriptedBackend.from_reference`), so rollouts call real task tools and end graded;
* the call takes ``ttft_s + tpot_s * len(output_ids)`` of wall time (``asyncio.sleep``: it holds no
  CPU, as a remote engine would not), measured from when the call starts;
* ``logprobs[i]`` is a deterministic function of the token id and its position, in ``[-2, 0)``, so
  the capture path stores and checks real floats (the scripted inner backend's are all 0.0);
* ``timings`` keeps the last ``keep_timings`` (start, simulated seconds) pairs, for a benchmark that
  subtracts the engine's own time from what its clients saw.

Spec strings (``--backend``): ``simulated?ttft_ms=200&tpot_ms=5`` — each task's reference solution
at that pace (a per-rollout backend, like ``reference``); ``simulated:TASK_ID[,MORE]`` — those tasks.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from coworkenv.errors import CoworkError
from coworkenv.proxy.backends.base import Backend, Completion
from coworkenv.proxy.messages import ChatRequest
from coworkenv.spec import TaskSpec

OPTIONS = ("ttft_ms", "tpot_ms")
DEFAULT_TTFT_MS = 200.0
DEFAULT_TPOT_MS = 5.0


def simulated_logprob(token_id: int, position: int) -> float:
    """A deterministic logprob in ``[-2, 0)`` for ``token_id`` at ``position`` of a turn."""
    h = (token_id * 2_654_435_761 + position * 40_503 + 1) % 2_000
    return -(h + 1) / 1_000.0


class SimulatedBackend:
    """``inner``'s turns, delivered at an engine's pace (see the module docstring)."""

    def __init__(
        self,
        inner: Backend,
        *,
        ttft_s: float = DEFAULT_TTFT_MS / 1e3,
        tpot_s: float = DEFAULT_TPOT_MS / 1e3,
        keep_timings: int = 100_000,
    ) -> None:
        if ttft_s < 0 or tpot_s < 0:
            raise CoworkError(f"simulated backend: ttft_s and tpot_s must be >= 0, got {ttft_s}, {tpot_s}")
        self.inner = inner
        self.name = f"simulated({inner.name})"
        self.ttft_s = ttft_s
        self.tpot_s = tpot_s
        self.timings: deque[tuple[float, float]] = deque(maxlen=keep_timings)

    @property
    def policy_version(self) -> str:
        return self.inner.policy_version

    async def complete(self, request: ChatRequest) -> Completion:
        start = time.perf_counter()
        made = await self.inner.complete(request)
        delay = self.ttft_s + self.tpot_s * len(made.output_ids)
        left = delay - (time.perf_counter() - start)
        if left > 0:
            await asyncio.sleep(left)
        self.timings.append((start, delay))
        logprobs = tuple(simulated_logprob(t, i) for i, t in enumerate(made.output_ids))
        return made.model_copy(update={"logprobs": logprobs})


def pace(options: dict[str, Any], spec: str) -> tuple[float, float]:
    """(ttft_s, tpot_s) from a spec's options (milliseconds); unknown options are errors."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise CoworkError(f"backend {spec!r}: unknown option(s) {unknown}; allowed: {', '.join(OPTIONS)}")
    try:
        ttft = float(options.get("ttft_ms", DEFAULT_TTFT_MS)) / 1e3
        tpot = float(options.get("tpot_ms", DEFAULT_TPOT_MS)) / 1e3
    except ValueError:
        raise CoworkError(f"backend {spec!r}: ttft_ms and tpot_ms are numbers of milliseconds") from None
    return ttft, tpot


def per_task(ttft_s: float, tpot_s: float) -> Any:
    """A ``TaskSpec -> SimulatedBackend`` factory over each task's reference solution (picklable
    for Ray workers: a module-level class instance)."""
    return _PerTask(ttft_s, tpot_s)


class _PerTask:
    def __init__(self, ttft_s: float, tpot_s: float) -> None:
        self.ttft_s, self.tpot_s = ttft_s, tpot_s
        self.__name__ = f"simulated?ttft_ms={ttft_s * 1e3:g}&tpot_ms={tpot_s * 1e3:g}"

    def __call__(self, spec: TaskSpec) -> SimulatedBackend:
        from coworkenv.proxy.backends.scripted import ScriptedBackend

        return SimulatedBackend(ScriptedBackend.from_reference(spec), ttft_s=self.ttft_s, tpot_s=self.tpot_s)
