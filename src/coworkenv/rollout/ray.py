"""The rollout runner spread over Ray workers (same jobs, same records, same resume rules).

Contract of :func:`run_rollouts_ray`: the driver plans the jobs exactly like
:func:`coworkenv.rollout.runner.run_rollouts` (skipping keys already in ``<out>/rollouts.jsonl``),
starts ``workers`` Ray actors — each an asyncio actor running its own proxy + services server
(:func:`open_session`) and up to ``concurrency`` rollouts at once, with its captures in a
worker-local directory — and hands jobs out as workers free up. Each finished rollout comes back
to the driver as (record, calls JSONL); the driver writes the calls file, then appends the
record, so the output directory is the single source of truth and works across machines.
``backend`` must be picklable (a spec string or a module-level factory); harnesses must be
installed on every worker node.

A lost worker (its process or its node died): a fresh actor replaces it, on any node with room
(Ray's own restart would first hand it the calls queued for the dead one), and each rollout the lost
one had in flight — whose trial, sandbox and captures died with it, and whose record never reached
the driver — is run again under a fresh rollout id, up to ``attempts`` times in all; a rollout lost
on every attempt is recorded as ``infra_failure`` / ``worker_lost`` (never graded, never dropped).
So every planned rollout ends with exactly one record. The summary's ``meta`` counts
``worker_losses`` and ``reruns``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coworkenv.rollout.execute import RolloutJob, RunContext, execute_rollout
from coworkenv.rollout.harnesses import Harness, get_harness
from coworkenv.rollout.record import FailureLabel, RolloutRecord, append_record
from coworkenv.rollout.runner import (
    CALLS_DIR,
    RECORDS_FILE,
    BackendArg,
    RunSummary,
    fewer_collections,
    new_rollout_id,
    open_session,
    plan_run,
)
from coworkenv.rollout.scratch import scratch_dir
from coworkenv.spec import TaskSpec


class RolloutWorker:
    """The actor body (wrapped with ``ray.remote`` at run time)."""

    def __init__(self, backend: BackendArg, timeout_cap_s: float | None) -> None:
        self.backend = backend
        self.timeout_cap_s = timeout_cap_s
        self.root = scratch_dir("coworkenv-ray-")
        self._stack: contextlib.AsyncExitStack | None = None
        self._rc: RunContext | None = None
        self._lock = asyncio.Lock()
        self._harnesses: dict[str, Harness] = {}

    async def _session(self) -> RunContext:
        async with self._lock:
            if self._rc is None:
                self._stack = contextlib.AsyncExitStack()
                self._stack.enter_context(fewer_collections())  # a worker holds many live rollouts
                self._rc = await self._stack.enter_async_context(
                    open_session(
                        self.backend, self.root / CALLS_DIR, self.root, timeout_cap_s=self.timeout_cap_s
                    )
                )
            return self._rc

    async def run(self, job: RolloutJob) -> tuple[str, str]:
        rc = await self._session()
        harness = self._harnesses.get(job.harness) or get_harness(job.harness)
        self._harnesses[job.harness] = harness
        record = await execute_rollout(rc, job, harness)
        path = rc.store.path(job.rollout_id)
        calls = path.read_text(encoding="utf-8") if path.exists() else ""
        path.unlink(missing_ok=True)
        return record.model_dump_json(), calls

    async def ready(self) -> bool:
        return True

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        shutil.rmtree(self.root, ignore_errors=True)


def run_rollouts_ray(  # noqa: PLR0917
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str],
    trials: int,
    backend: BackendArg,
    out_dir: Path,
    concurrency: int = 4,
    *,
    address: str | None = None,
    workers: int = 2,
    timeout_cap_s: float | None = None,
    init_kwargs: dict[str, Any] | None = None,
    attempts: int = 2,
) -> RunSummary:
    import ray

    t0 = time.monotonic()
    for name in harnesses:  # fail fast on the driver, with the install command
        get_harness(name).check_installed()
    jobs, summary = plan_run(tasks, harnesses, trials, out_dir)
    if not jobs:
        return summary
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, **(init_kwargs or {}))
    # SPREAD: one worker per node as far as they go (actors that ask for no CPU would all start on
    # the driver's node otherwise)
    actor_cls: Any = ray.remote(num_cpus=0)(RolloutWorker).options(
        max_concurrency=max(1, concurrency), scheduling_strategy="SPREAD"
    )
    actors: list[Any] = [actor_cls.remote(backend, timeout_cap_s) for _ in range(max(1, workers))]
    try:
        _dispatch(
            ray,
            actors,
            lambda: actor_cls.remote(backend, timeout_cap_s),
            jobs,
            concurrency,
            backend,
            attempts,
            summary,
        )
    finally:
        with contextlib.suppress(Exception):
            ray.get([a.close.remote() for a in actors], timeout=30)
        for a in actors:
            with contextlib.suppress(Exception):
                ray.kill(a)
        if started_here:
            ray.shutdown()
    summary.wall_s = time.monotonic() - t0
    return summary


def _dispatch(  # noqa: PLR0917
    ray: Any,
    actors: list[Any],
    make_actor: Any,
    jobs: list[RolloutJob],
    concurrency: int,
    backend: BackendArg,
    attempts: int,
    summary: RunSummary,
) -> None:
    """Hand jobs to free actor slots; write each result as it comes; rerun a lost worker's jobs."""
    out_dir = summary.out_dir
    calls_dir = out_dir / CALLS_DIR
    calls_dir.mkdir(parents=True, exist_ok=True)
    lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)
    tries: dict[tuple[str, str, int], int] = {}
    summary.meta.update(worker_losses=0, reruns=0)
    pending: dict[Any, tuple[int, int, RolloutJob]] = {}
    generation = [0] * len(actors)
    queue = list(jobs)
    slots = [a for a in range(len(actors)) for _ in range(max(1, concurrency))]
    while queue or pending:
        while queue and slots:
            idx, job = slots.pop(), queue.pop(0)
            pending[actors[idx].run.remote(job)] = (idx, generation[idx], job)
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            idx, gen, job = pending.pop(ref)
            slots.append(idx)
            try:
                record_json, calls = ray.get(ref)
            except lost as exc:
                if gen == generation[idx]:  # the first loss seen from this actor: a fresh one replaces it
                    with contextlib.suppress(Exception):
                        ray.kill(actors[idx], no_restart=True)
                    actors[idx] = _replacement(ray, make_actor)
                    generation[idx] += 1
                summary.meta["worker_losses"] += 1
                key = (job.task.id, job.harness, job.trial)
                tries[key] = tries.get(key, 1) + 1
                if tries[key] <= attempts:  # run it again, from scratch, under a fresh id
                    summary.meta["reruns"] += 1
                    queue.append(replace(job, rollout_id=new_rollout_id(*key)))
                    continue
                detail = f"{type(exc).__name__} on each of {attempts} attempts; last: {exc}"
                record, calls = lost_record(job, backend, detail[:2000]), ""
            else:
                record = RolloutRecord.model_validate_json(record_json)
            if calls:
                (calls_dir / f"{record.rollout_id}.calls.jsonl").write_text(calls, encoding="utf-8")
            append_record(out_dir / RECORDS_FILE, record)
            summary.records.append(record)


def _replacement(ray: Any, make_actor: Any, tries: int = 5, wait_s: float = 60.0) -> Any:
    """A fresh worker that has answered once: one placed on a node that is dying (Ray may not know
    yet) fails its first call, and is replaced again, after a pause, up to ``tries`` times."""
    for n in range(tries):
        actor = make_actor()
        try:
            ray.get(actor.ready.remote(), timeout=wait_s)
            return actor
        except Exception:  # any failure to start: try another placement
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            time.sleep(min(2.0 * (n + 1), 10.0))
    return make_actor()  # its calls fail as losses and are labelled; the run still ends


def lost_record(job: RolloutJob, backend: BackendArg, detail: str) -> RolloutRecord:
    """The record of a rollout whose worker died on every attempt (never graded)."""
    spec = job.task
    return RolloutRecord(
        rollout_id=job.rollout_id,
        task_id=spec.id,
        harness=job.harness,
        trial=job.trial,
        category=spec.category,
        difficulty=spec.difficulty,
        seed=job.trial,
        backend=backend if isinstance(backend, str) else getattr(backend, "name", ""),
        started_at=time.time(),
        status="infra_failure",
        failure=FailureLabel(kind="worker_lost", detail=detail),
    )
