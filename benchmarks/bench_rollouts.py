"""Embedded-backend rollouts per hour for the white-box loop (issue 4's rollout benchmark).

Runs ``--rollouts`` rollouts of the built-in ``loop`` harness through the capturing proxy with the
embedded SmolLM2-135M backend on CPU, ``--concurrency`` at a time, and reports **graded** rollouts per
hour (``status == "ok"``: the ones that yield a reward and training data), with infrastructure
failures counted beside it by kind, never as rollouts; also model calls/hour, generated tokens/s and
mean completion and reward. Each task's limits are capped with ``--max-turns`` and ``--timeout``
(reported with the results). The JSON names its date, the machine, the load average at start and
end, and the command that reproduces it.

    .venv/bin/python benchmarks/bench_rollouts.py --rollouts 8 --concurrency 2

``--isolation`` measures instead what the rollout jail (:mod:`coworkenv.rollout.isolation`) costs
against the unisolated sandbox, with no model (scripted reference policy): process start time,
tool calls/s from inside the sandbox to the services, and whole-rollout wall time (loop harness,
reference solution plus ``--bash-steps`` shell steps). Writes ``results/isolation-<date>.json``.

    .venv/bin/python benchmarks/bench_rollouts.py --isolation --repeats 40 --calls 2000 --rollouts 16
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _machine import cpu_model  # benchmarks/_machine.py

from coworkenv.proxy.capture import read_calls
from coworkenv.rollout.runner import run_rollouts
from coworkenv.tasks.builtin import builtin_task

DEFAULT_TASKS = "M1003_ticket_kb_resolution,MT01_meeting_slot_booking"


def main() -> None:  # noqa: PLR0915 (argument parsing and one results document)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--backend", default=None, help="backend spec (default embedded?max_tokens=N&seed=0)")
    ap.add_argument("--out", type=Path, default=None, help="default results/rollouts-<date>.json")
    ap.add_argument("--isolation", action="store_true", help="measure the jail's overhead instead")
    ap.add_argument("--repeats", type=int, default=40, help="--isolation: process starts per mode")
    ap.add_argument("--calls", type=int, default=2000, help="--isolation: tool calls per mode")
    ap.add_argument("--bash-steps", type=int, default=3, help="--isolation: shell steps per rollout")
    ap.add_argument("--rounds", type=int, default=3, help="--isolation: interleaved rounds of both arms")
    args = ap.parse_args()
    if args.isolation:
        from _isolation import run as run_isolation  # benchmarks/_isolation.py

        run_isolation(args)
        return
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    out = args.out or Path(__file__).parent / "results" / f"rollouts-{started.date().isoformat()}.json"

    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 2))
    from coworkenv.proxy.backends import make_backend

    backend_spec = args.backend or f"embedded?max_tokens={args.max_tokens}&seed=0"
    t_load = time.monotonic()
    backend = make_backend(backend_spec)
    load_s = time.monotonic() - t_load

    names = args.tasks.split(",")
    specs = []
    for name in names:
        s = builtin_task(name)
        specs.append(
            s.model_copy(update={"limits": s.limits.model_copy(update={"max_turns": args.max_turns})})
        )
    trials = max(1, -(-args.rollouts // len(specs)))
    out_dir = Path(tempfile.mkdtemp(prefix="bench-rollouts-"))
    os.environ["COWORKENV_NO_PROGRESS"] = "1"
    try:
        t0 = time.monotonic()
        summary = run_rollouts(
            specs, ["loop"], trials, backend, out_dir, args.concurrency, timeout_cap_s=args.timeout
        )
        wall = time.monotonic() - t0
        calls = [
            c
            for r in summary.records
            for c in read_calls(out_dir / "calls" / f"{r.rollout_id}.calls.jsonl")[0]
        ]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    n = len(summary.records)
    graded = [r for r in summary.records if r.status == "ok"]
    failures = Counter(r.failure.kind for r in summary.records if r.failure is not None)
    completions = [r.rewards.completion for r in graded if r.rewards is not None]
    out_tokens = sum(len(c.output_ids) for c in calls)
    prompt_tokens = sum(len(c.prompt_ids) for c in calls)
    result = {
        "benchmark": "embedded-backend graded rollouts/hour, white-box loop",
        "date": started.isoformat(timespec="seconds"),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "backend": backend_spec,
        "tasks": names,
        "rollouts_attempted": n,
        "rollouts_graded": len(graded),
        "concurrency": args.concurrency,
        "max_turns": args.max_turns,
        "timeout_s": args.timeout,
        "wall_s": round(wall, 1),
        "model_load_s": round(load_s, 1),
        # only graded rollouts count: an infra failure yields no reward and no training data
        "graded_rollouts_per_hour": round(len(graded) / wall * 3600, 1),
        "infra_failures": sum(failures.values()),
        "infra_failures_by_kind": dict(failures),
        "model_calls": len(calls),
        "model_calls_per_hour": round(len(calls) / wall * 3600, 1),
        "generated_tokens_per_s": round(out_tokens / wall, 1),
        "mean_prompt_tokens": round(prompt_tokens / max(1, len(calls)), 1),
        "mean_output_tokens": round(out_tokens / max(1, len(calls)), 1),
        "status": {
            "ok": summary.ok,
            "infra_failure": summary.infra_failures,
            "timed_out": sum(r.timed_out for r in summary.records),
        },
        "mean_completion": sum(completions) / len(completions) if completions else None,
        "mean_reward": summary.mean_reward,
        "machine": {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "load_average_start": load_start,
            "load_average_end": os.getloadavg(),
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
