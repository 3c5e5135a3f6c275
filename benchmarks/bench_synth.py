"""Benchmark: procedural synthesis of N distinct tasks with full validation.

Every slot of a coverage plan — ``--plan templates`` (default; ``ProceduralGenerator.plan``: all
13 templates, easy/medium/hard, varied ``mock_today``) or ``--plan compose``
(``compose_plan``: the compositional generator over every registered service, 2–5 services per
slot, easy…D2.5, safety and multi-turn slots) — goes through the synthesis pipeline's own loop
(:func:`coworkenv.synth.pipeline.synthesize_slot`: draft → the eight stages of
:func:`coworkenv.synth.validate.validate` — parse, tool conflict, weights, services, leakage,
grading gate, reference replay, mutation tests — with one repair retry). Slots are split across
``--workers`` processes (default 2, the CI machine's cores). Reported: valid tasks per minute of
wall time (goal ≥ 1,000/min on 2 cores), distinctness (unique request and record hashes over the
valid tasks), structural diversity (distinct service sets, step patterns — the reference's tool
sequence with repeats collapsed — condition kinds, and (service set, step pattern, condition kind)
combinations; a template's condition kind is its id), a per-stage acceptance table (entered /
rejected / seconds) and the generation time. Results go to ``synth-<date>`` (templates) or
``synthcompose-<date>`` (compose) ``.json``/``.md``.

Run:  .venv/bin/python benchmarks/bench_synth.py [--plan templates|compose] [--n 1000] [--workers 2]
      [--seed 0] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import cpu_model  # benchmarks/_machine.py

HERE = Path(__file__).resolve().parent
GOAL_PER_MIN = 1000.0


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def structure(spec: Any) -> tuple[str, str, str]:
    """(service set, step pattern, condition kind) of a TaskSpec (see the module docstring)."""
    from coworkenv.spec import ToolCall

    pattern: list[str] = []
    for st in spec.reference.steps:
        name = st.tool if isinstance(st, ToolCall) else "<user>"
        if not pattern or pattern[-1] != name:
            pattern.append(name)
    conds = [t.removeprefix("cond:") for t in spec.tags if t.startswith("cond:")]
    kind = "+".join(conds) if conds else "template:" + spec.source.rsplit(":", 1)[-1]
    return ",".join(sorted(spec.services)), ">".join(pattern), kind


def _slots(plan: str, n: int, seed: int) -> list[Any]:
    from coworkenv.synth.procedural import plan_slots
    from coworkenv.synth.procedural.compose import compose_plan

    return compose_plan(n, seed) if plan == "compose" else plan_slots(n, seed)


def _work(args: tuple[str, int, int, int, int]) -> dict[str, Any]:
    """Synthesize slots [lo, hi) of the plan in this process; return stats and hashes."""
    plan, n, seed, lo, hi = args
    from coworkenv.synth.pipeline import RunStats, synthesize_slot
    from coworkenv.synth.procedural import ProceduralGenerator

    gen = ProceduralGenerator(seed)
    slots = _slots(plan, n, seed)[lo:hi]
    stats = RunStats(slots=len(slots))
    req, rec, shapes, failures = [], [], [], []
    t0 = time.perf_counter()
    for slot in slots:
        res = synthesize_slot(slot, gen, stats, attempts=2)
        setattr(stats, res.status, getattr(stats, res.status) + 1)
        if res.spec is not None:
            req.append(_sha(res.spec.request))
            rec.append(_sha(res.spec.model_dump(mode="json")["services"]))
            shapes.append(structure(res.spec))
        else:
            failures.append({"task_id": res.task_id, "diagnostics": res.diagnostics[-1][:3]})
    return {
        "seconds": time.perf_counter() - t0,
        "stats": {**stats.__dict__},
        "req": req,
        "rec": rec,
        "shapes": shapes,
        "failures": failures,
    }


def machine() -> dict[str, Any]:
    model = cpu_model()
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }


def diversity(shapes: list[tuple[str, str, str]], req: list[str], rec: list[str]) -> dict[str, int]:
    return {
        "tasks": len(shapes),
        "distinct_combinations": len(set(shapes)),
        "distinct_service_sets": len({s[0] for s in shapes}),
        "distinct_step_patterns": len({s[1] for s in shapes}),
        "distinct_condition_kinds": len({s[2] for s in shapes}),
        "unique_request_hashes": len(set(req)),
        "unique_record_hashes": len(set(rec)),
    }


def run(n: int, workers: int, seed: int, plan: str = "templates") -> dict[str, Any]:
    from coworkenv.synth.base import STAGES

    bounds = [(n * i // workers, n * (i + 1) // workers) for i in range(workers)]
    t0 = time.perf_counter()
    if workers == 1:
        parts = [_work((plan, n, seed, *bounds[0]))]
    else:
        with mp.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_work, [(plan, n, seed, lo, hi) for lo, hi in bounds])
    wall = time.perf_counter() - t0
    tot: dict[str, Any] = {"accepted": 0, "repaired": 0, "discarded": 0, "drafts": 0, "generate_seconds": 0.0}
    rejected = dict.fromkeys(STAGES, 0)
    seconds = dict.fromkeys(STAGES, 0.0)
    for p in parts:
        s = p["stats"]
        for k in tot:
            tot[k] += s[k]
        for st in STAGES:
            rejected[st] += s["rejected_by_stage"][st]
            seconds[st] += s["stage_seconds"][st]
    req = [h for p in parts for h in p["req"]]
    rec = [h for p in parts for h in p["rec"]]
    shapes: list[tuple[str, str, str]] = [(x[0], x[1], x[2]) for p in parts for x in p["shapes"]]
    valid = tot["accepted"] + tot["repaired"]
    entered = tot["drafts"]
    table = []
    for st in STAGES:
        table.append(
            {
                "stage": st,
                "entered": entered,
                "rejected": rejected[st],
                "passed": entered - rejected[st],
                "seconds": round(seconds[st], 3),
            }
        )
        entered -= rejected[st]
    return {
        "benchmark": "synth-procedural" if plan == "templates" else "synth-compose",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "params": {"n": n, "workers": workers, "seed": seed, "attempts": 2, "plan": plan},
        "wall_seconds": round(wall, 3),
        "valid": valid,
        "valid_per_min": round(valid / wall * 60, 1),
        "goal_per_min": GOAL_PER_MIN,
        "goal_met": valid / wall * 60 >= GOAL_PER_MIN,
        "counts": tot,
        "unique_request_hashes": len(set(req)),
        "unique_record_hashes": len(set(rec)),
        "diversity": diversity(shapes, req, rec),
        "stages": table,
        "failures": [f for p in parts for f in p["failures"]][:20],
    }


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"# Procedural synthesis benchmark, plan {r['params'].get('plan', 'templates')} ({r['date']})",
        "",
        f"Machine: {m['cpu']}, {m['nproc']} cores, Python {m['python']}, "
        f"load at start {m['loadavg_at_start']}.",
        f"Run: n={r['params']['n']}, workers={r['params']['workers']}, seed={r['params']['seed']}, "
        f"attempts={r['params']['attempts']} (initial + 1 repair).",
        "",
        "| metric | value |",
        "|---|---|",
        f"| valid tasks | {r['valid']} / {r['params']['n']} |",
        f"| wall time | {r['wall_seconds']} s |",
        f"| **valid tasks per minute** | **{r['valid_per_min']}** (goal ≥ {r['goal_per_min']:.0f}: "
        f"{'PASS' if r['goal_met'] else 'FAIL'}) |",
        f"| accepted / repaired / discarded | {r['counts']['accepted']} / {r['counts']['repaired']} / "
        f"{r['counts']['discarded']} |",
        f"| unique request hashes | {r['unique_request_hashes']} |",
        f"| unique record hashes | {r['unique_record_hashes']} |",
        f"| generation (CPU s, all workers) | {r['counts']['generate_seconds']:.2f} |",
        *(f"| {k.replace('_', ' ')} | {v} |" for k, v in r["diversity"].items() if k.startswith("distinct")),
        "",
        "Per-stage acceptance (drafts; CPU seconds summed over workers):",
        "",
        "| stage | entered | rejected | passed | seconds |",
        "|---|---|---|---|---|",
        *(
            f"| {s['stage']} | {s['entered']} | {s['rejected']} | {s['passed']} | {s['seconds']} |"
            for s in r["stages"]
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--plan", choices=("templates", "compose"), default="templates")
    a = ap.parse_args()
    r = run(a.n, a.workers, a.seed, a.plan)
    a.out.mkdir(parents=True, exist_ok=True)
    stem = a.out / f"{'synth' if a.plan == 'templates' else 'synthcompose'}-{r['date']}"
    stem.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
    md = markdown(r)
    stem.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
