"""What a perfect policy could score under an evaluation's call cap: each task's reference solution
through the built-in loop with at most ``--max-turns`` model calls, per cap (error analysis).

The learning proof evaluates and trains with ``--max-turns`` model calls per rollout, while its
teacher conversations run to the end (5–18 assistant turns). A rollout cut at the cap cannot pass
the checks of the steps after it, however good the policy. This runs the reference policy — the
task's own solution script, no model — at each cap on the same suite and writes completion (0–100)
with its 95% bootstrap interval over tasks, overall and per template, and the reference's own
number of model calls per task; with ``--student`` (an evaluation stage JSON of the learning proof,
e.g. ``stages/sft_eval.json``) the student's per-template completion beside it. No model runs:
seconds on 2 cores.

    .venv/bin/python experiments/reference_ceiling.py ~/.cache/coworkenv/experiments/RUN/synth/heldout/tasks \
        --max-turns 5,64 --student experiments/results/RUN/stages/sft_eval.json --out ceiling.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from coworkenv.eval.metrics import headline, summarize
from coworkenv.rollout.cli import resolve_specs
from coworkenv.rollout.record import read_records
from coworkenv.rollout.runner import run_rollouts


def template_of(task_id: str) -> str:
    """``proc-s1-00003-news_digest`` → ``news_digest``; composed tasks → ``composed`` (the learning
    proof's error-analysis grouping)."""
    parts = task_id.split("-", 3)
    if parts[0] in ("split", "comp"):
        return "composed"
    return parts[3] if len(parts) == 4 and parts[0] == "proc" else task_id


def per_template(recs: list[Any]) -> dict[str, float]:
    by: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        if r.rewards is not None:
            by[template_of(r.task_id)].append(r.rewards.completion)
    return {t: round(100 * sum(xs) / len(xs), 1) for t, xs in sorted(by.items())}


def run_cap(specs: list[Any], cap: int, out: Path, concurrency: int) -> dict[str, Any]:
    capped = [
        s.model_copy(
            update={"limits": s.limits.model_copy(update={"max_turns": min(cap, s.limits.max_turns)})}
        )
        for s in specs
    ]
    run_rollouts(capped, ["loop"], 1, "reference", out, concurrency, progress=False)
    recs, problems = read_records(out / "rollouts.jsonl")
    if problems:
        raise SystemExit(f"{out / 'rollouts.jsonl'}: {problems[:3]}")
    h = headline(summarize(recs, k=1), seed=0)
    calls = [r.n_calls for r in recs]  # the reference's calls, cut at the cap
    return {
        "max_turns": cap,
        "completion": round(h.completion or 0.0, 2),
        "completion_ci": [round(x, 2) for x in h.completion_ci] if h.completion_ci else None,
        "score": round(h.score or 0.0, 2),
        "tasks": h.tasks,
        "infra_failures": h.infra_failures,
        "per_template": per_template(recs),
        "_calls": {r.task_id: c for r, c in zip(recs, calls, strict=True)},
        "_reward": {r.task_id: r.rewards.reward for r in recs if r.rewards is not None},
    }


def rl_groups(files: list[Path], ref: dict[int, dict[str, float]]) -> dict[str, Any] | None:
    """Each RL group (a draw's rollouts of one task) beside the reference's reward on that task at
    each cap: how many groups' best rollout already reached it, and the mean of the groups' means,
    their best and the reference — the headroom RL had under the cap."""
    groups: list[list[float]] = []
    ids: list[str] = []
    for f in files:
        by: dict[str, list[float]] = defaultdict(list)
        for r in read_records(f)[0]:
            if r.rewards is not None:
                by[r.task_id].append(r.rewards.reward)
        for t, xs in sorted(by.items()):
            ids.append(t)
            groups.append(xs)
    if not groups:
        return None
    n = len(groups)
    out: dict[str, Any] = {
        "files": len(files),
        "groups": n,
        "rollouts": sum(len(g) for g in groups),
        "mean_group_mean": round(sum(sum(g) / len(g) for g in groups) / n, 3),
        "mean_group_best": round(sum(max(g) for g in groups) / n, 3),
        "by_cap": {},
    }
    for cap, rewards in ref.items():
        out["by_cap"][str(cap)] = {
            "mean_reference": round(sum(rewards[t] for t in ids) / n, 3),
            "groups_best_at_reference": sum(
                1 for t, g in zip(ids, groups, strict=True) if max(g) >= rewards[t] - 1e-9
            ),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", help="task files or a directory of them (the run's synth/heldout/tasks)")
    p.add_argument("--max-turns", default="5,64", help="comma list of caps on model calls per rollout")
    p.add_argument("--student", type=Path, default=None, help="a learning-proof evaluation stage JSON")
    p.add_argument("--set", default="A", help="the held-out set of --student to put beside")
    p.add_argument(
        "--groups",
        type=Path,
        nargs="*",
        default=[],
        help="RL draws' rollouts.jsonl files: each group (task, draw) beside the reference on its task",
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/reference-ceiling"), help="rollout records")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    specs = resolve_specs([a.suite])
    if a.groups:  # only the tasks the RL groups drew
        drawn = {r.task_id for f in a.groups for r in read_records(f)[0]}
        specs = [s for s in specs if s.id in drawn]
    caps = [int(x) for x in a.max_turns.split(",") if x.strip()]
    rows = [run_cap(specs, cap, a.work / f"cap-{cap}", a.concurrency) for cap in caps]
    full = max(rows, key=lambda r: r["max_turns"])["_calls"]
    groups = rl_groups(a.groups, {cap: r["_reward"] for cap, r in zip(caps, rows, strict=True)})
    for r in rows:
        del r["_calls"], r["_reward"]
    out: dict[str, Any] = {
        "experiment": "reference_ceiling",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": {"cpu": platform.processor() or platform.machine()},
        "suite": a.suite,
        "what": "each task's reference solution through the built-in loop, one trial, at each cap on "
        "model calls per rollout (no model: the best any policy can do under that cap)",
        "reference_calls": {
            "median": median(full.values()),
            "max": max(full.values()),
            "tasks_over": {str(c): sum(1 for v in full.values() if v > c) for c in caps},
            # the largest cap stands for "uncapped": none of its rollouts should end at it
            "at_largest_cap": sum(1 for v in full.values() if v >= max(caps)),
        },
        "caps": rows,
        **({"rl_groups": groups} if groups else {}),
    }
    if a.student is not None:
        ev = json.loads(a.student.read_text())["sets"][a.set]
        out["student"] = {
            "source": str(a.student),
            "completion": round(ev["headline"]["completion"], 2),
            "per_template": {t: x["completion"] for t, x in ev["errors"].items()},
        }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    for r in rows:
        print(
            f"max_turns {r['max_turns']}: reference completion {r['completion']} {r['completion_ci']}; "
            f"{out['reference_calls']['tasks_over'][str(r['max_turns'])]} of {r['tasks']} references "
            "need more calls"
        )


if __name__ == "__main__":
    main()
