"""Scale-out: N concurrent rollouts through proxy, capture, services and runner, with no model (issue 29).

The load rig: every rollout is a real trial of a built-in task (services, audit, grading), driven by
an in-process dialect agent (``agent-chat`` | ``agent-responses`` | ``agent-messages``,
:mod:`coworkenv.rollout.harnesses.dialect_agent`) that calls the model through the capturing proxy
in that dialect and the task's tools over HTTP on the services server. The model is
:class:`~coworkenv.proxy.backends.simulated.SimulatedBackend`: each task's reference solution,
delivered after ``--ttft-ms`` plus ``--tpot-ms`` per output token (asyncio sleeps: the engine holds
no CPU here, as a remote GPU engine would not), with deterministic token ids and logprobs that the
capture stores. So the 2 cores measure our overhead, not a model. Rollout records and capture files
are written as in a real run.

Per level (``--rollouts 100,1000,10000``; all of a level's rollouts start at once, concurrency = N):

* ``rollouts_per_s`` — graded rollouts / wall seconds of the run (start of the session to the last
  record), and the infra failures by kind (any is counted and named; goal: none);
* ``added_ms`` — per model call, at p50/p90/p99/max: what the agent saw (``model_call_s``) less the
  simulated engine's own time for that call (``ttft + tpot * len(output_ids)``, from the capture) —
  everything between the agent and the engine: HTTP both ways, the proxy's parse, capture and answer,
  and the event loop's delay under load; ``proxy_ms`` the same from the proxy's own timestamps
  (``t_end - t_start`` less the engine time: parse, backend dispatch, record, answer);
* ``cpu_ms_per_call`` — this process's CPU (user + system) over the run / model calls: the whole
  stack of one process (agents, proxy, services, grading, record writing), an upper bound on the
  proxy's share;
* memory — RSS sampled every 0.25 s; ``rss_per_live_rollout_kb`` = (peak RSS - RSS before) / the
  peak number of rollouts open in the proxy at once; ``proxy_kept_rollouts`` how many rollout
  entries the proxy still held at the end (open + closed);
* ``open_fds_peak`` — file descriptors of the process at its peak (sockets both ways, capture files);
* ``capture_kb_per_rollout`` — the capture files' size on disk per rollout; ``..._whole`` what the
  same calls take with every prompt stored whole (schema version 1);
* ``exactly_once`` — the records file holds exactly one record per planned rollout (none lost, none
  twice); ``resumed_skipped`` the rollouts a resumed run found already recorded.

``--procs K`` splits a level over K fresh processes started together, each a whole stack on its
share (throughput against processes, one per core). ``--ray`` runs it over Ray workers, on a local
multi-node cluster with ``--nodes``; ``--kill-node-after S`` removes a node, ``--kill-worker-after S``
SIGKILLs one worker process (its proxy with it). ``--work DIR --resume`` keeps what DIR holds: rerun
after killing the command and the runner resumes there.

Each level runs in a fresh process, after a warm-up level there (``--warmup``, 25 rollouts, not
reported; in-process levels only), so imports, first-use caches and an earlier level's heap are not
counted in a level's memory or latency.

The JSON names the date, commit, machine, load average at start and end, and the command.

    .venv/bin/python benchmarks/bench_scale.py --rollouts 100,1000 --dialect chat
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import multiprocessing
import os
import resource
import shutil
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _machine import cpu_model, provenance  # benchmarks/_machine.py

from coworkenv.proxy.backends.simulated import per_task
from coworkenv.proxy.capture import CaptureStore, read_calls, record_line
from coworkenv.proxy.server import ProxyServer
from coworkenv.rollout.harnesses.dialect_agent import DIALECTS
from coworkenv.rollout.loop import wants_workspace_tools
from coworkenv.rollout.record import read_records
from coworkenv.rollout.runner import RECORDS_FILE, RunSummary, run_rollouts_async
from coworkenv.spec import TaskSpec
from coworkenv.tasks.builtin import builtin_tasks

SAMPLE_S = 0.25


RIG_TASKS = 25


def rig_tasks() -> list[TaskSpec]:
    """The first 25 built-in tasks the dialect agent can finish (no workspace tools: it offers service
    tools only); a level of N rollouts runs each N / 25 times."""
    return [t for t in builtin_tasks() if not wants_workspace_tools(t)][:RIG_TASKS]


def percentiles(values: list[float], qs: tuple[float, ...] = (50, 90, 99)) -> dict[str, float]:
    if not values:
        return {}
    s = sorted(values)
    out = {f"p{q:g}": round(s[min(len(s) - 1, int(len(s) * q / 100))], 3) for q in qs}
    out["max"] = round(s[-1], 3)
    out["mean"] = round(sum(s) / len(s), 3)
    return out


def rss_kb(field: str = "VmRSS") -> int:
    """This process's resident set (``VmRSS``) or its peak since the last :func:`reset_peak_rss`
    (``VmHWM``, kept by the kernel: no sampling thread, no peak missed between samples)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def reset_peak_rss() -> None:
    """Linux: writing 5 to ``clear_refs`` resets ``VmHWM`` to the current RSS."""
    Path("/proc/self/clear_refs").write_text("5")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy so far (all processes: /proc/stat, not idle/iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


@dataclass
class Level:
    """One measured configuration."""

    rollouts: int
    dialect: str
    ttft_ms: float
    tpot_ms: float
    slots: int = 0
    mode: str = "inproc"
    workers: int = 1
    nodes: int = 1
    kill_after_s: float | None = None
    kill_worker_after_s: float | None = None
    procs: int = 1
    pin: bool = False  # in-process levels: each process on a core of its own (process i on CPU i)
    cpu: int | None = None  # the CPU a pinned process runs on

    @property
    def backend(self) -> str:
        slots = f"&slots={self.slots}" if self.slots else ""
        return f"simulated?ttft_ms={self.ttft_ms:g}&tpot_ms={self.tpot_ms:g}{slots}"


class Probe:
    """Samples RSS and open fds (of this process, or of the Ray rollout workers) and the proxy's
    open rollouts while a level runs."""

    def __init__(self, workers: bool = False) -> None:
        self.workers = workers
        self.proxy: ProxyServer | None = None
        self.rss_peak = 0
        self.fds_peak = 0
        self.live_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def factory(self, backend: Any, store: CaptureStore) -> ProxyServer:
        self.proxy = ProxyServer(backend, store, keepalive_s=2.0)
        return self.proxy

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            if self.workers:
                procs = ray_workers()
                rss = sum(_quiet(lambda p: p.memory_info().rss // 1024, p) for p in procs)
                fds = sum(_quiet(lambda p: p.num_fds(), p) for p in procs)
            else:
                rss, fds = rss_kb(), open_fds()
            self.rss_peak = max(self.rss_peak, rss)
            self.fds_peak = max(self.fds_peak, fds)
            if self.proxy is not None:
                self.live_peak = max(self.live_peak, len(self.proxy._open))


def ray_workers() -> list[Any]:
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        if "RolloutWorker" in " ".join(p.info["cmdline"] or ()):
            found.append(p)
    return found


def _quiet(fn: Any, proc: Any) -> int:
    try:
        return int(fn(proc))
    except Exception:  # a process that ended between listing and reading
        return 0


def plan(level: Level) -> tuple[list[TaskSpec], int]:
    tasks = rig_tasks()
    trials, extra = divmod(level.rollouts, len(tasks))
    if extra or not trials:
        raise SystemExit(f"--rollouts {level.rollouts}: use a multiple of {len(tasks)}")
    return tasks, trials


def run_inproc(level: Level, out: Path) -> dict[str, Any]:
    """Runner, proxy, services, grading and agents in this process, one event loop."""
    tasks, trials = plan(level)
    engine = per_task(level.ttft_ms / 1e3, level.tpot_ms / 1e3, level.slots)
    with Probe() as probe:
        rss_before = rss_kb()
        cpu0, busy0 = time.process_time(), machine_busy_s()
        summary = asyncio.run(
            run_rollouts_async(
                tasks,
                [f"agent-{level.dialect}"],
                trials,
                engine,
                out,
                concurrency=level.rollouts,
                progress=False,
                proxy_factory=probe.factory,
            )
        )
        cpu_s, busy_s = time.process_time() - cpu0, machine_busy_s() - busy0
    row = summarize(summary, level, cpu_s=cpu_s, busy_s=busy_s)
    proxy = probe.proxy
    row |= {
        "rss_before_mb": round(rss_before / 1024, 1),
        "rss_peak_mb": round(probe.rss_peak / 1024, 1),
        "live_rollouts_peak": probe.live_peak,
        "rss_per_live_rollout_kb": round((probe.rss_peak - rss_before) / max(1, probe.live_peak), 1),
        "proxy_kept_rollouts": (len(proxy._open) + len(proxy._closed)) if proxy else None,
        "open_fds_peak": probe.fds_peak,
    }
    if engine.engine is not None:
        row["engine_queue"] = {
            "slots": level.slots,
            "peak_waiting": engine.engine.peak_waiting,
            "waited_s_total": round(engine.engine.waited_s, 2),
        }
    return row


def run_ray(level: Level, out: Path) -> dict[str, Any]:
    """Rollouts over Ray workers (a proxy + services + agents each); ``nodes`` > 1 starts a local
    multi-node cluster (``ray.cluster_utils.Cluster``, one CPU per node); ``kill_after_s`` removes
    one non-head node that long after the start, without grace; ``kill_worker_after_s`` SIGKILLs one
    rollout worker process (its proxy with it)."""
    import ray
    from ray.cluster_utils import Cluster

    from coworkenv.rollout.ray import run_rollouts_ray

    tasks, trials = plan(level)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    killed: list[str] = []
    try:
        for _ in range(level.nodes - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        if level.kill_after_s is not None:
            victims = [n for n in cluster.list_all_nodes() if n is not cluster.head_node]

            def kill() -> None:
                time.sleep(level.kill_after_s or 0)
                if victims:
                    cluster.remove_node(victims[-1], allow_graceful=False)
                    killed.append(time.strftime("%H:%M:%S"))

            threading.Thread(target=kill, daemon=True).start()
        worker_killed: list[int] = []
        if level.kill_worker_after_s is not None:

            def kill_worker() -> None:
                time.sleep(level.kill_worker_after_s or 0)
                procs = ray_workers()
                if procs:
                    procs[-1].kill()  # SIGKILL: the worker's proxy, services and agents die with it
                    worker_killed.append(procs[-1].pid)

            threading.Thread(target=kill_worker, daemon=True).start()
        with Probe(workers=True) as probe:
            busy0 = machine_busy_s()
            summary = run_rollouts_ray(
                tasks,
                [f"agent-{level.dialect}"],
                trials,
                level.backend,
                out,
                concurrency=-(-level.rollouts // level.workers),
                workers=level.workers,
            )
            busy_s = machine_busy_s() - busy0
    finally:
        ray.shutdown()
        cluster.shutdown()
    row = summarize(summary, level, cpu_s=None, busy_s=busy_s)
    row |= {
        "workers_rss_peak_mb": round(probe.rss_peak / 1024, 1),
        "workers_open_fds_peak": probe.fds_peak,
        "node_killed": bool(killed),
        "worker_losses": summary.meta.get("worker_losses", 0),
        "reruns": summary.meta.get("reruns", 0),
        "worker_killed": bool(worker_killed),
    }
    return row


def summarize(summary: RunSummary, level: Level, *, cpu_s: float | None, busy_s: float) -> dict[str, Any]:
    records, out = summary.records, summary.out_dir
    added: list[float] = []
    inside: list[float] = []
    tool_ms: list[float] = []
    unreadable = capture_bytes = whole_bytes = 0
    for rec in records:
        calls_file = out / "calls" / f"{rec.rollout_id}.calls.jsonl"
        capture_bytes += calls_file.stat().st_size if calls_file.exists() else 0
        calls, problems = read_calls(calls_file)
        whole_bytes += sum(len(record_line(c)) for c in calls)
        unreadable += len(problems)
        seen = rec.meta.get("model_call_s") or []
        tool_ms += [1e3 * s for s in rec.meta.get("tool_call_s") or []]
        for call, client_s in zip(calls, seen, strict=False):
            engine_ms = level.ttft_ms + level.tpot_ms * len(call.output_ids)
            added.append(1e3 * client_s - engine_ms)
            inside.append(1e3 * (call.t_end - call.t_start) - engine_ms)
    ok = [r for r in records if r.status == "ok"]
    on_file, unreadable_records = read_records(out / RECORDS_FILE)
    tasks, trials = plan(level)
    planned = sorted((t.id, k) for t in tasks for k in range(trials))
    filed = sorted((r.task_id, r.trial) for r in on_file)
    failures = Counter(f"{r.failure.kind}" for r in records if r.failure is not None)
    n_calls = sum(r.n_calls for r in records)
    wall_s = summary.wall_s
    row: dict[str, Any] = {
        "dialect": level.dialect,
        "mode": level.mode,
        "pinned": level.pin,
        "cpus": sorted(os.sched_getaffinity(0)),
        "workers": level.workers,
        "nodes": level.nodes,
        "rollouts": level.rollouts,
        "recorded": len(records),
        "graded": len(ok),
        "infra_failures": dict(failures),
        "mean_reward": round(sum(r.rewards.reward for r in ok if r.rewards) / max(1, len(ok)), 4),
        "wall_s": round(wall_s, 2),
        "rollouts_per_s": round(len(ok) / wall_s, 2) if wall_s else None,
        "model_calls": n_calls,
        "tool_calls": len(tool_ms),
        "added_ms": percentiles(added),
        "proxy_ms": percentiles(inside),
        "tool_call_ms": percentiles(tool_ms),
        "machine_cpu_s": round(busy_s, 2),
        "machine_cpu_ms_per_call": round(1e3 * busy_s / max(1, n_calls), 3),
        "capture_unreadable": unreadable,
        "capture_kb_per_rollout": round(capture_bytes / 1024 / max(1, len(records)), 1),
        "capture_kb_per_rollout_whole": round(whole_bytes / 1024 / max(1, len(records)), 1),
        "resumed_skipped": summary.skipped,
        "records_on_file": len(on_file),
        "records_unreadable": len(unreadable_records),
        "exactly_once": filed == planned,
    }
    if cpu_s is not None:
        row["cpu_s"] = round(cpu_s, 2)
        row["cpu_ms_per_call"] = round(1e3 * cpu_s / max(1, n_calls), 3)
    return row


def run_fresh(lv: Level, warmup: Level | None, out: Path, resume: bool = False) -> dict[str, Any]:
    """One level in this (fresh) process, after an unreported warm-up level (imports, first-use caches);
    ``resume``: keep what ``out`` already holds (the runner skips rollouts recorded there)."""
    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    raise_fd_limit()
    if lv.pin and lv.mode != "ray":
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if warmup is not None:
        run_inproc(warmup, out.with_name(out.name + "-warmup"))
    if not resume:
        shutil.rmtree(out, ignore_errors=True)
    return run_ray(lv, out) if lv.mode == "ray" else run_inproc(lv, out)


def _one_share(lv: Level, warmup: Level | None, out: Path, barrier: Any, results: Any) -> None:
    """A process of ``--procs`` (on CPU ``lv.cpu`` alone when given): warm up, wait for the others,
    run its share of the level."""
    if lv.cpu is not None:
        os.sched_setaffinity(0, {lv.cpu})
    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    raise_fd_limit()
    if warmup is not None:
        run_inproc(warmup, out.with_name(out.name + "-warmup"))
    shutil.rmtree(out, ignore_errors=True)
    barrier.wait()
    t_start = time.time()
    row = run_inproc(lv, out)
    results.put(row | {"t_start": t_start, "t_end": time.time()})


def run_procs(lv: Level, warmup: Level | None, out: Path) -> dict[str, Any]:
    """The level split over ``lv.procs`` fresh processes started together, each a whole stack of its
    own (runner, proxy, services, grading, agents) on its share of the rollouts: throughput against
    processes, one per core, with no coordinator between them."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(lv.procs), ctx.Queue()
    share = dataclasses.replace(lv, rollouts=lv.rollouts // lv.procs, procs=1)
    cpus = sorted(os.sched_getaffinity(0))
    pick = [cpus[i % len(cpus)] if lv.pin else None for i in range(lv.procs)]
    shares = [dataclasses.replace(share, cpu=cpu) for cpu in pick]
    procs = [
        ctx.Process(target=_one_share, args=(one, warmup, out / f"p{i}", barrier, results))
        for i, one in enumerate(shares)
    ]
    for p in procs:
        p.start()
    rows = [results.get() for _ in procs]
    for p in procs:
        p.join()
    wall_s = max(r["t_end"] for r in rows) - min(r["t_start"] for r in rows)
    graded, calls = sum(r["graded"] for r in rows), sum(r["model_calls"] for r in rows)
    failures: Counter[str] = Counter()
    for r in rows:
        failures.update(r["infra_failures"])
    return {
        "dialect": lv.dialect,
        "mode": "procs",
        "procs": lv.procs,
        "pinned": lv.pin,
        "rollouts": lv.rollouts,
        "recorded": sum(r["recorded"] for r in rows),
        "graded": graded,
        "infra_failures": dict(failures),
        "wall_s": round(wall_s, 2),
        "rollouts_per_s": round(graded / wall_s, 2),
        "model_calls": calls,
        "cpu_ms_per_call": round(1e3 * sum(r["cpu_s"] for r in rows) / max(1, calls), 3),
        "exactly_once": all(r["exactly_once"] for r in rows),
        "per_process": rows,
    }


def _cpu_s() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its waited-for children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def sandbox_fs(repeats: int) -> dict[str, Any]:
    """What a rollout's sandbox costs, with its own filesystem (a process harness's: mkfs.ext4 + loop
    mount, :mod:`coworkenv.rollout.diskfs`) and as plain directories (an in-process harness's): wall
    ms to create and to clean up (p50/p90/max), and CPU ms per sandbox of this process and of the
    child processes it ran (mkfs, mount, umount)."""
    from coworkenv.rollout.diskfs import disk_problem
    from coworkenv.rollout.isolation import Limits
    from coworkenv.rollout.sandbox import Sandbox

    spec = rig_tasks()[0]
    out: dict[str, Any] = {"disk_bytes": Limits().disk_bytes, "own_fs_problem": disk_problem()}
    with tempfile.TemporaryDirectory(prefix="coworkenv-sandbox-bench-") as tmp:
        for name, disk in (("own_fs", Limits().disk_bytes), ("plain", None)):
            create, clean = [], []
            me0, kids0 = _cpu_s()
            for i in range(repeats):
                t0 = time.perf_counter()
                box = Sandbox.create(Path(tmp), f"{name}-{i}", spec, disk_bytes=disk)
                t1 = time.perf_counter()
                box.cleanup()
                create.append(1e3 * (t1 - t0))
                clean.append(1e3 * (time.perf_counter() - t1))
            me1, kids1 = _cpu_s()

            def cpu(a: Any, b: Any) -> float:
                return round(1e3 * ((b.ru_utime + b.ru_stime) - (a.ru_utime + a.ru_stime)) / repeats, 2)

            out[name] = {
                "create_ms": percentiles(create),
                "cleanup_ms": percentiles(clean),
                "cpu_ms_self": round(1e3 * (me1 - me0) / repeats, 2),
                "cpu_ms_children": round(1e3 * (kids1 - kids0) / repeats, 2),
                "processes_on_machine": len([p for p in os.listdir("/proc") if p.isdigit()]),
            }
    return out


def machine(load_start: tuple[float, float, float]) -> dict[str, Any]:
    """The results file's machine block: CPU, cores, load average at the start and now."""
    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
    }


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--rollouts", default="100,1000", help=f"levels, comma-separated (multiples of {RIG_TASKS})"
    )
    ap.add_argument("--dialect", default="chat", help=f"one of {', '.join(DIALECTS)}, or all")
    ap.add_argument("--ttft-ms", type=float, default=200.0, help="simulated time to first token")
    ap.add_argument("--tpot-ms", type=float, default=2.0, help="simulated time per output token")
    ap.add_argument("--slots", type=int, default=0, help="the engine's batch limit (0: none)")
    ap.add_argument("--ray", action="store_true", help="run over Ray workers instead of in this process")
    ap.add_argument("--workers", type=int, default=2, help="Ray workers (processes, each with its proxy)")
    ap.add_argument("--nodes", type=int, default=1, help="local Ray cluster nodes (one CPU each)")
    ap.add_argument("--kill-node-after", type=float, default=None, help="seconds; remove a node mid-run")
    ap.add_argument(
        "--kill-worker-after", type=float, default=None, help="seconds; SIGKILL one Ray worker mid-run"
    )
    ap.add_argument("--procs", type=int, default=1, help="in-process levels: split over this many processes")
    ap.add_argument(
        "--pin", action="store_true", help="in-process levels: a core per process (one process: CPU 0)"
    )
    ap.add_argument("--resume", action="store_true", help="keep --work's records: the runner resumes there")
    ap.add_argument(
        "--sandbox-fs",
        type=int,
        default=0,
        help="also time N sandboxes with and without their own filesystem",
    )
    ap.add_argument("--warmup", type=int, default=RIG_TASKS, help="first, unreported (0: none)")
    ap.add_argument("--work", type=Path, default=None, help="records and captures (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=None, help="default results/scale-<date>.json")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    dialects = list(DIALECTS) if args.dialect == "all" else [args.dialect]
    if args.resume and args.work is None:
        raise SystemExit("--resume: name the run's directory with --work DIR (a temp dir is never resumed)")
    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    fd_limit = raise_fd_limit()
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    work = args.work or Path(tempfile.mkdtemp(prefix="coworkenv-scale-"))

    def level(n: int, dialect: str) -> Level:
        common = {"rollouts": n, "dialect": dialect, "ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms}
        if not args.ray:
            return Level(**common, slots=args.slots, procs=args.procs, pin=args.pin)
        return Level(
            **common,
            slots=args.slots,
            mode="ray",
            workers=args.workers,
            nodes=args.nodes,
            kill_after_s=args.kill_node_after,
            kill_worker_after_s=args.kill_worker_after,
        )

    results: list[dict[str, Any]] = []
    try:
        for dialect in dialects:
            for n in (int(x) for x in args.rollouts.split(",") if x):
                lv = level(n, dialect)
                warmup = Level(args.warmup, dialect, args.ttft_ms, args.tpot_ms) if args.warmup else None
                if lv.procs > 1:
                    row = run_procs(lv, warmup, work / f"{dialect}-{n}")
                else:  # each level in a fresh process: memory figures start from a clean heap
                    ctx = multiprocessing.get_context("spawn")
                    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                        row = pool.submit(
                            run_fresh, lv, None if args.ray else warmup, work / f"{dialect}-{n}", args.resume
                        ).result()
                print(json.dumps(row), flush=True)
                results.append(row)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    doc = {
        **provenance("scale", started),
        "setup": {
            "tasks": len(rig_tasks()),
            "ttft_ms": args.ttft_ms,
            "tpot_ms": args.tpot_ms,
            "slots": args.slots,
            "warmup_rollouts": 0 if args.ray else args.warmup,
            "fd_limit": fd_limit,
            "what": (
                f"Ray: {args.workers} workers on {args.nodes} node(s), each with proxy, services, agents"
                if args.ray
                else f"{args.procs} processes, each runner, proxy, services, grading and agents on its share"
                if args.procs > 1
                else "one process: runner, proxy, services, grading and the dialect agents in one event loop"
            ),
            "resume": args.resume,
        },
        "machine": machine(load_start),
        "levels": results,
    }
    if args.sandbox_fs:
        doc["sandbox_fs"] = sandbox_fs(args.sandbox_fs)
    out = args.out or Path(__file__).parent / "results" / f"scale-{started.date().isoformat()}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
