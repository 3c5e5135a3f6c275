"""What the rollout jail costs: ``bench_rollouts.py --isolation`` (no model; scripted policy).

Three measurements, each jailed (bubblewrap, default limits) against today's unisolated sandbox:

* ``start_ms``: one :func:`run_process` of ``/bin/true`` in a fresh sandbox (median, p90);
* ``calls_per_s``: a ``python3`` client inside the sandbox making sequential tool calls to the
  services through the trial's capability URL (one keep-alive connection; jailed, through the
  jail's endpoint relay, as Claude Code and Codex reach them);
* ``rollout_s``: whole rollouts of the loop harness (reference solution + ``--bash-steps`` shell
  steps) through the proxy, ``--concurrency`` at a time; unisolated here is ``COWORKENV_ISOLATION=none``
  (limits only, no namespaces).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import cpu_model  # benchmarks/_machine.py

from coworkenv.proxy.backends.scripted import Script, ScriptCall, ScriptedBackend, script_from_reference
from coworkenv.rollout.harnesses.loop import LoopHarness
from coworkenv.rollout.isolation import Isolation, bwrap_problem
from coworkenv.rollout.runner import run_rollouts
from coworkenv.rollout.sandbox import Sandbox, run_process
from coworkenv.serve.http import background_server, create_app
from coworkenv.services.trial import Host
from coworkenv.spec import TaskSpec
from coworkenv.tasks.builtin import builtin_task

TASK = "M1003_ticket_kb_resolution"
CLIENT = """
import http.client, socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1]); n = int(sys.argv[2])
c = http.client.HTTPConnection(u.hostname, u.port)
c.connect(); c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t0 = time.perf_counter()
for _ in range(n):
    c.request("POST", u.path + "/helpdesk/tickets", body=b"{}", headers={"content-type": "application/json"})
    r = c.getresponse(); r.read(); assert r.status == 200, r.status
print(n / (time.perf_counter() - t0))
"""


def _stats(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"median": round(statistics.median(xs), 2), "p90": round(xs[int(0.9 * (len(xs) - 1))], 2)}


async def _starts(spec: TaskSpec, root: Path, repeats: int, jailed: bool) -> list[float]:
    out = []
    for i in range(repeats):
        t0 = time.perf_counter()
        box = Sandbox.create(root, f"start-{jailed}-{i}", spec)
        jail = box.jail(Isolation("bwrap")) if jailed else None
        res = await run_process(
            ["/bin/true"], cwd=box.workspace, env=box.env(), timeout_s=30, log_dir=box.logs, jail=jail
        )
        assert res.returncode == 0, res.stderr_tail
        out.append((time.perf_counter() - t0) * 1000)
        box.cleanup()
    return out


async def _calls(spec: TaskSpec, root: Path, n: int, jailed: bool) -> float:
    host = Host()
    host.add_task(spec)
    trial = host.open_trial(spec.id, f"calls-{jailed}")
    # the server in its own thread and loop (uvloop when installed), as ``coworkenv serve`` runs it
    # (the ~45 ms per sequential call once seen in the runner's loop was Nagle's algorithm on our
    # listening socket, since fixed: coworkenv/serve/listen.py)
    with background_server(create_app(host, mcp=False)) as base:
        box = Sandbox.create(root, f"calls-{jailed}", spec)
        jail = box.jail(Isolation("bwrap")) if jailed else None
        argv = ["python3", "-c", CLIENT, f"{base}/t/{trial.capability}", str(n)]
        res = await run_process(
            argv,
            cwd=box.workspace,
            env=box.env(),
            timeout_s=600,
            log_dir=box.logs,
            jail=jail,
            endpoints=[base],
        )
        box.cleanup()
    assert res.returncode == 0, res.stderr_tail
    return float(res.stdout.strip().splitlines()[-1])


def _bash_policy(steps: int) -> Any:
    def factory(spec: TaskSpec) -> ScriptedBackend:
        ref = script_from_reference(spec)
        shell = tuple(
            ScriptCall("workspace.run", {"command": f"echo step {i} >> log.txt && wc -l log.txt"})
            for i in range(steps)
        )
        return ScriptedBackend(Script((*shell, *ref.items), ref.final_message))

    return factory


def _rollouts(spec: TaskSpec, n: int, concurrency: int, steps: int, mode: str) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix=f"bench-iso-{mode}-"))
    t0 = time.monotonic()
    summary = run_rollouts(
        [spec],
        ["loop"],
        n,
        _bash_policy(steps),
        out,
        concurrency,
        harness_objects={"loop": LoopHarness(workspace_tools=True)},
        isolation=Isolation(mode),  # type: ignore[arg-type]
    )
    wall = time.monotonic() - t0
    return {
        "wall_s": round(wall, 2),
        "rollout_s": _stats([r.wall_s for r in summary.records]),
        "rollouts_per_hour": round(len(summary.records) / wall * 3600, 1),
        "ok": summary.ok,
        "mean_reward": summary.mean_reward,
    }


def run(args: argparse.Namespace) -> None:
    problem = bwrap_problem()
    if problem is not None:
        raise SystemExit(f"bubblewrap jail unavailable here, nothing to measure: {problem}")
    os.environ["COWORKENV_NO_PROGRESS"] = "1"
    spec = builtin_task(TASK).model_copy(update={"workspace": {"notes.md": "# notes\n"}})
    root = Path(tempfile.mkdtemp(prefix="bench-iso-"))
    result: dict[str, Any] = {
        "benchmark": "rollout isolation overhead (bwrap jail vs unisolated)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "benchmarks/bench_rollouts.py --isolation " + " ".join(sys.argv[2:]),
        "task": TASK,
        "load_before": list(os.getloadavg()),
        "rounds": [],
    }
    # interleaved rounds (the order alternates), so a drift in the machine's load hits both arms
    for r in range(max(1, args.rounds)):
        arms = (("unisolated", False), ("jailed", True))
        row: dict[str, Any] = {}
        for label, jailed in arms if r % 2 == 0 else arms[::-1]:
            starts = asyncio.run(_starts(spec, root, args.repeats, jailed))
            cps = asyncio.run(_calls(spec, root, args.calls, jailed))
            mode = "bwrap" if jailed else "none"
            roll = _rollouts(spec, max(1, args.rollouts), args.concurrency, args.bash_steps, mode)
            row[label] = {"start_ms": _stats(starts), "calls_per_s": round(cps, 1), "rollouts": roll}
        u, j = row["unisolated"], row["jailed"]
        row["overhead"] = {
            "start_ms": round(j["start_ms"]["median"] - u["start_ms"]["median"], 2),
            "calls_per_s_ratio": round(j["calls_per_s"] / u["calls_per_s"], 3),
            "rollout_s": round(
                j["rollouts"]["rollout_s"]["median"] - u["rollouts"]["rollout_s"]["median"], 3
            ),
        }
        result["rounds"].append(row)
    result["load_after"] = list(os.getloadavg())
    result["overhead"] = {
        key: {
            "median": statistics.median(x["overhead"][key] for x in result["rounds"]),
            "min": min(x["overhead"][key] for x in result["rounds"]),
            "max": max(x["overhead"][key] for x in result["rounds"]),
        }
        for key in ("start_ms", "calls_per_s_ratio", "rollout_s")
    }
    result["settings"] = {
        k: getattr(args, k) for k in ("repeats", "calls", "rollouts", "concurrency", "bash_steps", "rounds")
    }
    result["machine"] = {"cpu": cpu_model(), "cpus": os.cpu_count(), "python": platform.python_version()}
    out = args.out or Path(__file__).parent / "results" / f"isolation-{datetime.now(UTC).date()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
