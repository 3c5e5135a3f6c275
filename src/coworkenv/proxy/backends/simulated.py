"""A latency-simulating engine: a real turn, real token ids and logprobs, an engine's timing.

For load tests of the proxy, capture, services and runner (``benchmarks/bench_scale.py``), where the
2 cores must measure our overhead and not a model. Contract of :class:`SimulatedBackend`:

* the turn comes from ``inner`` (by default the task's reference solution,
  :meth:`ScriptedBackend.from_reference`), so rollouts call real task tools and end graded;
* the call takes ``ttft_s + tpot_s * len(output_ids)`` of wall time (``asyncio.sleep``: it holds no
  CPU, as a remote engine would not), measured from when the call starts; meanwhile it holds the
  prompt's ids as an ``array`` (no work for Python's cyclic collector, as an engine's tensor is not);
* ``logprobs[i]`` is a deterministic function of the token id and its position, in ``[-2, 0)``, so
  the capture path stores and checks real floats (the scripted inner backend's are all 0.0);
* ``timings`` keeps the last ``keep_timings`` (start, simulated seconds) pairs, for a benchmark that
  subtracts the engine's own time from what its clients saw;
* with ``slots`` (:class:`EngineSlots`, shared by the backends of one engine), at most that many
  calls generate at once — an engine's batch limit — and the rest wait in its queue, counted
  (``waiting``, ``peak_waiting``, ``waited_s``): the engine slower than arrivals, measurably.

Spec strings (``--backend``): ``simulated?ttft_ms=200&tpot_ms=5&slots=64`` — each task's reference
solution at that pace (a per-rollout backend, like ``reference``; ``slots`` 0 = no batch limit);
``simulated:TASK_ID[,MORE]`` — those tasks.
"""

from __future__ import annotations

import array
import asyncio
import time
from collections import deque
from typing import Any

from coworkenv.errors import CoworkError
from coworkenv.proxy.backends.base import Backend, Completion
from coworkenv.proxy.messages import ChatRequest
from coworkenv.spec import TaskSpec

OPTIONS = ("ttft_ms", "tpot_ms", "slots")
DEFAULT_TTFT_MS = 200.0
DEFAULT_TPOT_MS = 5.0


def simulated_logprob(token_id: int, position: int) -> float:
    """A deterministic logprob in ``[-2, 0)`` for ``token_id`` at ``position`` of a turn."""
    h = (token_id * 2_654_435_761 + position * 40_503 + 1) % 2_000
    return -(h + 1) / 1_000.0


class EngineSlots:
    """An engine's batch limit: ``size`` calls generate at once, the rest queue (counted)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise CoworkError(f"simulated backend: slots must be >= 1, got {size}")
        self.size = size
        self.waiting = 0
        self.peak_waiting = 0
        self.waited_s = 0.0
        self._sem: asyncio.Semaphore | None = None

    def __getstate__(self) -> dict[str, Any]:  # a Ray worker gets its own engine, counts from 0
        return {"size": self.size, "waiting": 0, "peak_waiting": 0, "waited_s": 0.0, "_sem": None}

    async def acquire(self) -> None:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.size)
        self.waiting += 1
        self.peak_waiting = max(self.peak_waiting, self.waiting)
        t0 = time.perf_counter()
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
            self.waited_s += time.perf_counter() - t0

    def release(self) -> None:
        assert self._sem is not None
        self._sem.release()


class SimulatedBackend:
    """``inner``'s turns, delivered at an engine's pace (see the module docstring)."""

    def __init__(
        self,
        inner: Backend,
        *,
        ttft_s: float = DEFAULT_TTFT_MS / 1e3,
        tpot_s: float = DEFAULT_TPOT_MS / 1e3,
        keep_timings: int = 100_000,
        slots: EngineSlots | None = None,
    ) -> None:
        if ttft_s < 0 or tpot_s < 0:
            raise CoworkError(f"simulated backend: ttft_s and tpot_s must be >= 0, got {ttft_s}, {tpot_s}")
        self.inner = inner
        self.name = f"simulated({inner.name})"
        self.ttft_s = ttft_s
        self.tpot_s = tpot_s
        self.timings: deque[tuple[float, float]] = deque(maxlen=keep_timings)
        self.slots = slots

    @property
    def policy_version(self) -> str:
        return self.inner.policy_version

    async def complete(self, request: ChatRequest) -> Completion:
        if self.slots is None:
            return await self._generate(request)
        await self.slots.acquire()
        try:
            return await self._generate(request)
        finally:
            self.slots.release()

    async def _generate(self, request: ChatRequest) -> Completion:
        start = time.perf_counter()
        made = await self.inner.complete(request)
        delay = self.ttft_s + self.tpot_s * len(made.output_ids)
        left = delay - (time.perf_counter() - start)
        prompt_ids: tuple[int, ...] | array.array[int] = made.prompt_ids
        if left > 0:
            # While it "generates", the prompt's ids wait as an engine keeps them (a tensor, another
            # process), out of the cyclic collector's reach: a tuple of thousands of ints held by
            # every call in flight was ~90% of each young collection's work at 1,000 live calls.
            prompt_ids = array.array("q", made.prompt_ids)
            made = made.model_copy(update={"prompt_ids": ()})
            await asyncio.sleep(left)
        self.timings.append((start, delay))
        logprobs = tuple(simulated_logprob(t, i) for i, t in enumerate(made.output_ids))
        return made.model_copy(update={"prompt_ids": tuple(prompt_ids), "logprobs": logprobs})


def pace(options: dict[str, Any], spec: str) -> tuple[float, float, int]:
    """(ttft_s, tpot_s, slots) from a spec's options (milliseconds; slots 0 = no batch limit);
    unknown options are errors."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise CoworkError(f"backend {spec!r}: unknown option(s) {unknown}; allowed: {', '.join(OPTIONS)}")
    try:
        ttft = float(options.get("ttft_ms", DEFAULT_TTFT_MS)) / 1e3
        tpot = float(options.get("tpot_ms", DEFAULT_TPOT_MS)) / 1e3
    except ValueError:
        raise CoworkError(f"backend {spec!r}: ttft_ms and tpot_ms are numbers of milliseconds") from None
    try:
        slots = int(options.get("slots", 0))
    except ValueError:
        raise CoworkError(f"backend {spec!r}: slots is a whole number (0: no batch limit)") from None
    return ttft, tpot, slots


def per_task(ttft_s: float, tpot_s: float, slots: int = 0) -> PerTask:
    """A ``TaskSpec -> SimulatedBackend`` factory over each task's reference solution, all sharing
    one engine (its ``slots``); picklable for Ray workers (each worker gets its own engine)."""
    return PerTask(ttft_s, tpot_s, slots)


class PerTask:
    """See :func:`per_task`; ``engine`` is the shared :class:`EngineSlots` (``None``: no limit)."""

    def __init__(self, ttft_s: float, tpot_s: float, slots: int = 0) -> None:
        self.ttft_s, self.tpot_s = ttft_s, tpot_s
        self.engine = EngineSlots(slots) if slots else None
        self.__name__ = f"simulated?ttft_ms={ttft_s * 1e3:g}&tpot_ms={tpot_s * 1e3:g}" + (
            f"&slots={slots}" if slots else ""
        )

    def __call__(self, spec: TaskSpec) -> SimulatedBackend:
        from coworkenv.proxy.backends.scripted import ScriptedBackend

        inner = ScriptedBackend.from_reference(spec)
        return SimulatedBackend(inner, ttft_s=self.ttft_s, tpot_s=self.tpot_s, slots=self.engine)
