"""The built-in library under Harbor: every task exported, then Harbor's oracle and nop agents on each.

usage: python benchmarks/bench_harbor.py [--tasks ID ...] [--concurrency N] [--out DIR]
(scripts/harbor_library.sh installs what it needs and runs this.)

A correctness run, not a timing benchmark: it writes ``<out>/harbor-library-<date>.json`` with the
per-task rewards (``reward``/``completion``/``safety``/``robustness`` from the task's verifier) for
both agents, a failed trial's step and error, wall times, the date, the load average before and
after, the machine and the command; and a Markdown table beside it. Exit 1 when the oracle scores
below 1.0 or the nop agent completes anything (completion above 0) on some task.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import commit, cpu_model

from coworkenv.harbor.images import ensure_runtime_image
from coworkenv.harbor.run import TrialOutcome, harbor_missing, run_job
from coworkenv.synth.packaging import export_task
from coworkenv.tasks.builtin import builtin_tasks


def _row(o: TrialOutcome) -> dict[str, Any]:
    row: dict[str, Any] = {**o.rewards, "seconds": round(o.seconds, 1)}
    if o.failed_step is not None:
        row["failed_step"] = o.failed_step
        row["error"] = o.exception
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="*", default=None, help="task ids (default: the whole library)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    a = ap.parse_args(argv)
    why = harbor_missing()
    if why:
        print(f"bench_harbor: {why}", file=sys.stderr)
        return 2
    specs = [s for s in builtin_tasks() if a.tasks is None or s.id in a.tasks]
    load_start = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    t0 = time.monotonic()
    ensure_runtime_image()
    image_s = time.monotonic() - t0
    results: dict[str, dict[str, Any]] = {s.id: {} for s in specs}
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="coworkenv-harbor-lib-") as tmp:
        pkg = Path(tmp) / "tasks"
        for s in specs:
            export_task(s, pkg, "harbor")
        for agent in ("oracle", "nop"):
            t = time.monotonic()
            outcomes = run_job(pkg, agent, Path(tmp) / "jobs", job_name=agent, concurrency=a.concurrency)
            walls[agent] = round(time.monotonic() - t, 1)
            for o in outcomes:
                results.setdefault(o.task, {})[agent] = _row(o)
                print(f"{agent:6} {o.describe()}", flush=True)
    bad = [
        tid
        for tid, r in results.items()
        if r.get("oracle", {}).get("reward") != 1.0 or r.get("nop", {}).get("completion", 1.0) > 0.0
    ]
    today = dt.date.today().isoformat()
    doc = {
        "date": today,
        "command": os.environ.get("COWORKENV_BENCH_COMMAND")
        or "python benchmarks/bench_harbor.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "commit": commit(),
        "machine": {
            "nproc": os.cpu_count(),
            "cpu_model": cpu_model(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "loadavg_start": load_start,
        "loadavg_end": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "harbor": "harbor 0.25.0, docker environment, verifier environment_mode shared",
        "concurrency": a.concurrency,
        "runtime_image_seconds": round(image_s, 1),
        "wall_seconds": walls,
        "tasks": len(specs),
        "oracle_reward_1": sum(1 for r in results.values() if r.get("oracle", {}).get("reward") == 1.0),
        "nop_completion_0": sum(1 for r in results.values() if r.get("nop", {}).get("completion") == 0.0),
        "failing": bad,
        "results": results,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"harbor-library-{today}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"# Built-in library under Harbor ({today})",
        "",
        f"`{doc['command']}` — load {load_start} → {doc['loadavg_end']}, {os.cpu_count()} cores; "
        f"wall {walls}",
        "",
        f"oracle reward 1.0 on {doc['oracle_reward_1']}/{len(specs)} tasks; "
        f"nop completion 0 on {doc['nop_completion_0']}/{len(specs)}",
        "",
        "| task | oracle reward | nop completion | nop reward |",
        "|---|---|---|---|",
    ]
    for tid, r in sorted(results.items()):
        o, n = r.get("oracle", {}), r.get("nop", {})
        lines.append(
            f"| {tid} | {o.get('reward', o.get('failed_step', '-'))} | "
            f"{n.get('completion', n.get('failed_step', '-'))} | {n.get('reward', '-')} |"
        )
    path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"bench_harbor: wrote {path}; failing: {bad or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
