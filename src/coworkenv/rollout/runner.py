"""The rollout runner: tasks × harnesses × trials, concurrently, resumable.

Contract of :func:`run_rollouts` / :func:`run_rollouts_async`:

* one :class:`~coworkenv.proxy.server.ProxyServer` and one services server (HTTP + MCP) per run,
  both served on 127.0.0.1 in the runner's event loop (:func:`open_session`);
* every (task, harness, trial) runs once in its own sandbox (:func:`execute_rollout`), at most
  ``concurrency`` at a time; each finished rollout is appended to ``<out>/rollouts.jsonl`` at once,
  its captured calls are in ``<out>/calls/<rollout_id>.calls.jsonl``;
* resuming: keys already in ``rollouts.jsonl`` are skipped; a torn last line (crash mid-write) is
  cut off first; calls files of rollouts that never got a record (crashed attempts) are moved to
  ``<out>/calls/orphaned/`` — rollout ids are unique per attempt, so nothing is duplicated and
  no finished rollout is lost;
* ``concurrency`` is cut to what this process's open-file limit can hold
  (:func:`~coworkenv.rollout.openfiles.bounded_concurrency`): the rest queue, a warning says so and
  ``summary.meta["concurrency_limited"]`` records it — no rollout fails for want of a file;
* with ``concurrency`` >= 64 the cyclic garbage collector runs less often for the run's duration
  (:func:`fewer_collections`);
* imported Claw-Eval tasks are rewarded by their own ``grader.py`` in warm grader children shared
  by the run (:class:`~coworkenv.claweval.worker.GraderPool`, at most one per concurrent rollout,
  started on first use, ended with the session); see :mod:`coworkenv.rollout.reward`;
* ``backend``: a :class:`Backend` shared by all rollouts; ``"reference"`` (each task's reference
  solution, :meth:`ScriptedBackend.from_reference`); ``"simulated?ttft_ms=…&tpot_ms=…"`` (the same
  at a simulated engine's pace, :mod:`coworkenv.proxy.backends.simulated`); any other string goes to
  ``make_backend(spec)``; or a callable ``TaskSpec -> Backend`` for a per-rollout backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from coworkenv.claweval.worker import GraderPool
from coworkenv.errors import CoworkError
from coworkenv.grading.judge import judge_from_env
from coworkenv.proxy.backends.base import Backend, BackendError, Completion
from coworkenv.proxy.capture import CaptureStore
from coworkenv.proxy.messages import ChatRequest
from coworkenv.rollout.clock import ClockMode
from coworkenv.rollout.execute import ProxyLike, RolloutJob, RunContext, execute_rollout
from coworkenv.rollout.harnesses import Harness, get_harness
from coworkenv.rollout.isolation import Isolation
from coworkenv.rollout.openfiles import bounded_concurrency
from coworkenv.rollout.record import RolloutRecord, append_record, read_records
from coworkenv.rollout.sandbox import peer_rollout
from coworkenv.rollout.scratch import release_scratch, scratch_dir
from coworkenv.serve.listen import listen_socket
from coworkenv.services.trial import Host
from coworkenv.spec import TaskSpec

log = logging.getLogger(__name__)

BackendArg = Backend | str | Callable[[TaskSpec], Backend]
ProxyFactory = Callable[[Backend, CaptureStore], Any]
"""Builds the proxy: returns an object with ``.app`` (ASGI) and the :class:`ProxyLike` methods."""

RECORDS_FILE = "rollouts.jsonl"
CALLS_DIR = "calls"


# ---------------------------------------------------------------- serving in this loop


class _Server(uvicorn.Server):
    def capture_signals(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        return contextlib.nullcontext()  # leave Ctrl-C to the runner


@asynccontextmanager
async def serve_app(app: ASGIApp, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve an ASGI app on a free port inside the running event loop; yields its base URL."""
    sock = listen_socket(host)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="auto",
        interface="asgi3",
        timeout_keep_alive=30,
        timeout_graceful_shutdown=2,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                with contextlib.suppress(BaseException):
                    task.result()
                raise CoworkError(f"server on {host}:{port} failed to start (see the log above)")
            await asyncio.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, 10)
        sock.close()


# ---------------------------------------------------------------- backends


class UnassignedBackend:
    """The proxy's default when every rollout brings its own backend; answers with an error."""

    name = "unassigned"

    @property
    def policy_version(self) -> str:
        return "0"

    async def complete(self, request: ChatRequest) -> Completion:
        raise BackendError("no_backend", "this rollout has no backend assigned")


def resolve_backend(backend: BackendArg) -> tuple[Backend, Callable[[TaskSpec], Backend | None] | None, str]:
    """(proxy default backend, per-rollout factory or None, display name)."""
    if isinstance(backend, str):
        if backend == "reference":
            from coworkenv.proxy.backends.scripted import ScriptedBackend

            return UnassignedBackend(), ScriptedBackend.from_reference, "reference"
        if backend.startswith("simulated?") or backend == "simulated":
            from coworkenv.proxy.backends import parse_spec
            from coworkenv.proxy.backends.simulated import pace, per_task

            simulated = per_task(*pace(parse_spec(backend)[2], backend))
            return UnassignedBackend(), simulated, simulated.__name__
        try:
            from coworkenv.proxy.backends import make_backend  # type: ignore[attr-defined,unused-ignore]
        except ImportError as exc:
            raise CoworkError(f"backend {backend!r}: make_backend is not available ({exc})") from exc
        made: Backend = make_backend(backend)
        return made, None, backend
    if isinstance(backend, Backend):
        return backend, None, backend.name
    factory = backend
    return UnassignedBackend(), factory, getattr(factory, "__name__", "per-task")


def default_proxy_factory(backend: Backend, store: CaptureStore) -> Any:
    from coworkenv.proxy.server import ProxyServer  # type: ignore[import-not-found,unused-ignore]

    return ProxyServer(backend, store, keepalive_s=2.0)


@asynccontextmanager
async def open_session(
    backend: BackendArg,
    calls_dir: Path,
    run_dir: Path,
    *,
    proxy_factory: ProxyFactory | None = None,
    timeout_cap_s: float | None = None,
    timeout_clock: ClockMode = "wall",
    keep_sandboxes: bool = False,
    isolation: Isolation | None = None,
    graders: int = 1,
) -> AsyncIterator[RunContext]:
    """One proxy + one services server in this event loop, and the shared :class:`RunContext`
    (with up to ``graders`` Claw-Eval grader children, started when first needed).

    The services' operator token stays in this process (the runner grades in-process); harnesses
    get only their trial's capability URL and run in jails made by ``isolation`` (default:
    :meth:`Isolation.from_env`).
    """
    from coworkenv.serve.http import create_app

    default, per_task, name = resolve_backend(backend)
    store = CaptureStore(calls_dir)
    proxy = (proxy_factory or default_proxy_factory)(default, store)
    host = Host()
    host.attribute = peer_rollout  # trial id == rollout id: a refused sandbox peer is named
    pool = GraderPool(size=graders)
    try:
        async with serve_app(proxy.app) as proxy_base, serve_app(create_app(host)) as services_base:
            proxied: ProxyLike = proxy
            yield RunContext(
                host=host,
                proxy=proxied,
                proxy_base=proxy_base,
                store=store,
                run_dir=run_dir,
                services_base=services_base,
                backend_name=name,
                backend_for=per_task,
                timeout_cap_s=timeout_cap_s,
                timeout_clock=timeout_clock,
                keep_sandboxes=keep_sandboxes,
                judge=judge_from_env(),
                isolation=isolation or Isolation.from_env(),
                graders=pool,
            )
    finally:
        await asyncio.to_thread(pool.close)
        shutdown = getattr(proxy, "shutdown", None)
        if callable(shutdown):
            await asyncio.to_thread(shutdown)


# ---------------------------------------------------------------- planning and resuming


Key = tuple[str, str, int]


def new_rollout_id(task_id: str, harness: str, trial: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in f"{task_id}-{harness}")
    return f"{safe[:80]}-t{trial}-{uuid.uuid4().hex[:8]}"


def prepare_out_dir(out_dir: Path) -> tuple[set[Key], list[RolloutRecord]]:
    """Make ``out_dir`` ready to append: cut a torn last line, move orphaned calls files aside.

    Returns the keys already done and their records.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RECORDS_FILE
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with path.open("r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)
    records, _problems = read_records(path)
    known = {r.rollout_id for r in records}
    calls = out_dir / CALLS_DIR
    if calls.is_dir():
        for f in calls.glob("*.calls.jsonl"):
            if f.name.removesuffix(".calls.jsonl") not in known:
                (calls / "orphaned").mkdir(exist_ok=True)
                f.replace(calls / "orphaned" / f.name)
    return {(r.task_id, r.harness, r.trial) for r in records}, records


def plan_jobs(
    tasks: Sequence[TaskSpec], harnesses: Sequence[str], trials: int, done: set[Key]
) -> list[RolloutJob]:
    """Every (task, harness, trial) not yet done, trial-major so early results cover all tasks."""
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CoworkError(f"task ids must be unique in one run; repeated: {dupes}")
    return [
        RolloutJob(task, h, k, new_rollout_id(task.id, h, k))
        for k in range(trials)
        for task in tasks
        for h in harnesses
        if (task.id, h, k) not in done
    ]


# ---------------------------------------------------------------- running


@dataclass
class RunSummary:
    out_dir: Path
    planned: int
    skipped: int
    records: list[RolloutRecord] = field(default_factory=list)
    wall_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    """Runner-specific counts (the Ray runner's ``worker_losses`` and ``reruns``)."""

    @property
    def ok(self) -> int:
        return sum(r.status == "ok" for r in self.records)

    @property
    def infra_failures(self) -> int:
        return sum(r.status == "infra_failure" for r in self.records)

    @property
    def mean_reward(self) -> float | None:
        rs = [r.rewards.reward for r in self.records if r.rewards is not None]
        return sum(rs) / len(rs) if rs else None

    def line(self) -> str:
        mean = "-" if self.mean_reward is None else f"{self.mean_reward:.3f}"
        return (
            f"{len(self.records)} rollouts ({self.ok} ok, {self.infra_failures} infra failures, "
            f"{self.skipped} already done) in {self.wall_s:.1f}s; mean reward {mean}; out: {self.out_dir}"
        )


def plan_run(
    tasks: Sequence[TaskSpec], harnesses: Sequence[str], trials: int, out_dir: Path
) -> tuple[list[RolloutJob], RunSummary]:
    """Ready ``out_dir`` and plan what is left: the jobs not yet done, and the (empty) summary that
    counts them as planned and the rest as skipped."""
    done, _ = prepare_out_dir(out_dir)
    jobs = plan_jobs(tasks, harnesses, trials, done)
    summary = RunSummary(out_dir, planned=len(jobs), skipped=len(tasks) * len(harnesses) * trials - len(jobs))
    return jobs, summary


def check_harnesses(names: Sequence[str]) -> dict[str, Harness]:
    """Build each harness and make sure it can start (raises with the install command)."""
    built = {n: get_harness(n) for n in names}
    for h in built.values():
        h.check_installed()
    return built


async def run_rollouts_async(  # noqa: PLR0917
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str],
    trials: int,
    backend: BackendArg,
    out_dir: Path,
    concurrency: int = 4,
    *,
    progress: bool = True,
    timeout_cap_s: float | None = None,
    timeout_clock: ClockMode = "wall",
    keep_sandboxes: bool = False,
    proxy_factory: ProxyFactory | None = None,
    harness_objects: dict[str, Harness] | None = None,
    isolation: Isolation | None = None,
) -> RunSummary:
    t0 = time.monotonic()
    built = harness_objects or check_harnesses(harnesses)
    jobs, summary = plan_run(tasks, harnesses, trials, out_dir)
    if not jobs:
        return summary
    bound = bounded_concurrency(max(1, concurrency))
    if bound.limited:
        log.warning("%s", bound.message())
        summary.meta["concurrency_limited"] = {
            "asked": bound.asked,
            "running": bound.running,
            "open_files_limit": bound.open_files_limit,
        }
    concurrency = bound.running
    run_dir = scratch_dir("coworkenv-run-")
    sem = asyncio.Semaphore(concurrency)
    stack = contextlib.ExitStack()
    if concurrency >= MANY_ROLLOUTS:
        stack.enter_context(fewer_collections())
    bar = _Progress(len(jobs), enabled=progress)
    try:
        async with open_session(
            backend,
            out_dir / CALLS_DIR,
            run_dir,
            proxy_factory=proxy_factory,
            timeout_cap_s=timeout_cap_s,
            timeout_clock=timeout_clock,
            keep_sandboxes=keep_sandboxes,
            isolation=isolation,
            graders=max(1, concurrency),
        ) as rc:

            async def one(job: RolloutJob) -> None:
                async with sem:
                    record = await execute_rollout(rc, job, built[job.harness])
                append_record(out_dir / RECORDS_FILE, record)
                summary.records.append(record)
                bar.advance(record)

            with bar:
                await _gather_or_cancel([one(j) for j in jobs])
    finally:
        stack.close()
        if not keep_sandboxes:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:  # kept for the user: no later run may sweep it
            release_scratch(run_dir)
    summary.wall_s = time.monotonic() - t0
    return summary


MANY_ROLLOUTS = 64
GC_THRESHOLDS = (50_000, 20, 100)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic GC less often while many rollouts are live (restored after). Each full
    collection walks every live object, and hundreds of live trials are many objects: at 500
    concurrent rollouts the default thresholds spent 17 s of 58 s of CPU in the collector, these
    1.9 s of 45 s (``benchmarks/bench_scale.py``). Reference counting frees almost everything; the
    collector still runs: a young collection after 50,000 net allocations instead of 700, a full one
    after 2,000 young ones instead of 100."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def _gather_or_cancel(coros: Sequence[Any]) -> None:
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def run_rollouts(  # noqa: PLR0917
    tasks: Sequence[TaskSpec],
    harnesses: Sequence[str],
    trials: int,
    backend: BackendArg,
    out_dir: Path,
    concurrency: int = 4,
    **kwargs: Any,
) -> RunSummary:
    """Blocking :func:`run_rollouts_async`."""
    return asyncio.run(run_rollouts_async(tasks, harnesses, trials, backend, out_dir, concurrency, **kwargs))


class _Progress:
    """A rich progress bar (or nothing): done / total, ok, infra failures, mean reward."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and os.environ.get("COWORKENV_NO_PROGRESS") != "1"
        self.ok = self.infra = 0
        self.reward_sum = 0.0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("rollouts"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                transient=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def advance(self, record: RolloutRecord) -> None:
        if record.status == "ok":
            self.ok += 1
            self.reward_sum += record.rewards.reward if record.rewards else 0.0
        else:
            self.infra += 1
        if self._bar is not None:
            mean = self.reward_sum / self.ok if self.ok else 0.0
            self._bar.update(
                self._task, advance=1, description=f"ok {self.ok} · infra {self.infra} · reward {mean:.2f}"
            )
