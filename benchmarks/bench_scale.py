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
* ``open_fds_peak`` — file descriptors of the process at its peak (sockets both ways, capture files).

A warm-up level (``--warmup``, 25 rollouts, not reported) runs first, so imports and first-use caches
are not counted as the first level's memory or latency.

The JSON names the date, commit, machine, load average at start and end, and the command.

    .venv/bin/python benchmarks/bench_scale.py --rollouts 100,1000 --dialect chat
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _machine import cpu_model  # benchmarks/_machine.py

from coworkenv.proxy.capture import CaptureStore, read_calls
from coworkenv.proxy.server import ProxyServer
from coworkenv.rollout.harnesses.dialect_agent import DIALECTS
from coworkenv.rollout.loop import wants_workspace_tools
from coworkenv.rollout.record import RolloutRecord
from coworkenv.rollout.runner import run_rollouts_async
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


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Probe:
    """Samples RSS, open fds and the proxy's open rollouts while a level runs."""

    def __init__(self) -> None:
        self.proxy: ProxyServer | None = None
        self.rss_peak = 0
        self.fds_peak = 0
        self.live_peak = 0

    def factory(self, backend: Any, store: CaptureStore) -> ProxyServer:
        self.proxy = ProxyServer(backend, store, keepalive_s=2.0)
        return self.proxy

    async def sample(self) -> None:
        while True:
            self.rss_peak = max(self.rss_peak, rss_kb())
            self.fds_peak = max(self.fds_peak, open_fds())
            if self.proxy is not None:
                self.live_peak = max(self.live_peak, len(self.proxy._open))
            await asyncio.sleep(SAMPLE_S)


async def run_level(n: int, dialect: str, ttft_ms: float, tpot_ms: float, work: Path) -> dict[str, Any]:
    tasks = rig_tasks()
    trials, extra = divmod(n, len(tasks))
    if extra:
        raise SystemExit(f"--rollouts {n}: use a multiple of the {len(tasks)} rig tasks")
    out = work / f"{dialect}-{n}"
    shutil.rmtree(out, ignore_errors=True)
    probe = Probe()
    rss_before = rss_kb()
    cpu0 = time.process_time()
    sampler = asyncio.create_task(probe.sample())
    try:
        summary = await run_rollouts_async(
            tasks,
            [f"agent-{dialect}"],
            trials,
            f"simulated?ttft_ms={ttft_ms:g}&tpot_ms={tpot_ms:g}",
            out,
            concurrency=n,
            progress=False,
            proxy_factory=probe.factory,
        )
    finally:
        sampler.cancel()
    cpu_s = time.process_time() - cpu0
    return summarize(summary.records, out, n, summary.wall_s, cpu_s, probe, rss_before, ttft_ms, tpot_ms)


def summarize(  # noqa: PLR0917 (one level's figures in one place)
    records: list[RolloutRecord],
    out: Path,
    n: int,
    wall_s: float,
    cpu_s: float,
    probe: Probe,
    rss_before: int,
    ttft_ms: float,
    tpot_ms: float,
) -> dict[str, Any]:
    added: list[float] = []
    inside: list[float] = []
    tool_ms: list[float] = []
    unreadable = 0
    for rec in records:
        calls, problems = read_calls(out / "calls" / f"{rec.rollout_id}.calls.jsonl")
        unreadable += len(problems)
        seen = rec.meta.get("model_call_s") or []
        tool_ms += [1e3 * s for s in rec.meta.get("tool_call_s") or []]
        for call, client_s in zip(calls, seen, strict=False):
            engine_ms = ttft_ms + tpot_ms * len(call.output_ids)
            added.append(1e3 * client_s - engine_ms)
            inside.append(1e3 * (call.t_end - call.t_start) - engine_ms)
    ok = [r for r in records if r.status == "ok"]
    failures = Counter(f"{r.failure.kind}" for r in records if r.failure is not None)
    n_calls = sum(r.n_calls for r in records)
    proxy = probe.proxy
    return {
        "rollouts": n,
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
        "cpu_s": round(cpu_s, 2),
        "cpu_ms_per_call": round(1e3 * cpu_s / max(1, n_calls), 3),
        "rss_before_mb": round(rss_before / 1024, 1),
        "rss_peak_mb": round(probe.rss_peak / 1024, 1),
        "live_rollouts_peak": probe.live_peak,
        "rss_per_live_rollout_kb": round((probe.rss_peak - rss_before) / max(1, probe.live_peak), 1),
        "proxy_kept_rollouts": (len(proxy._open) + len(proxy._closed)) if proxy else None,
        "open_fds_peak": probe.fds_peak,
        "capture_unreadable": unreadable,
    }


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--rollouts", default="100,1000", help="comma-separated levels (multiples of the rig tasks)"
    )
    ap.add_argument("--dialect", default="chat", help=f"one of {', '.join(DIALECTS)}, or all")
    ap.add_argument("--ttft-ms", type=float, default=200.0, help="simulated time to first token")
    ap.add_argument("--tpot-ms", type=float, default=2.0, help="simulated time per output token")
    ap.add_argument(
        "--work", type=Path, default=None, help="where records and captures go (default: a temp dir)"
    )
    ap.add_argument(
        "--warmup", type=int, default=RIG_TASKS, help="rollouts run first, not reported (0: none)"
    )
    ap.add_argument("--out", type=Path, default=None, help="default results/scale-<date>.json")
    args = ap.parse_args()
    dialects = list(DIALECTS) if args.dialect == "all" else [args.dialect]
    levels = [int(x) for x in args.rollouts.split(",") if x]
    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    fd_limit = raise_fd_limit()
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    work = args.work or Path(tempfile.mkdtemp(prefix="coworkenv-scale-"))
    results: list[dict[str, Any]] = []
    try:
        if args.warmup:  # imports, first-use caches and the allocator's arenas, before any level
            asyncio.run(run_level(args.warmup, dialects[0], args.ttft_ms, args.tpot_ms, work))
        for dialect in dialects:
            for n in levels:
                row = {
                    "dialect": dialect,
                    **asyncio.run(run_level(n, dialect, args.ttft_ms, args.tpot_ms, work)),
                }
                print(json.dumps(row), flush=True)
                results.append(row)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    doc = {
        "benchmark": "scale",
        "date": started.isoformat(timespec="seconds"),
        "commit": commit(),
        "command": " ".join(["python", *map(shlex.quote, sys.argv)]),
        "setup": {
            "tasks": len(rig_tasks()),
            "ttft_ms": args.ttft_ms,
            "tpot_ms": args.tpot_ms,
            "processes": 1,
            "warmup_rollouts": args.warmup,
            "fd_limit": fd_limit,
            "what": "one process: runner, proxy, services, grading and the dialect agents in one event loop",
        },
        "machine": {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "load_average_start": load_start,
            "load_average_end": os.getloadavg(),
        },
        "levels": results,
    }
    out = args.out or Path(__file__).parent / "results" / f"scale-{started.date().isoformat()}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
