"""What a finished main job's student does on its held-out tasks, stage by stage (error analysis).

For each job directory given (``coworkenv job --out DIR``), reads the held-out evaluations —
``base/`` (the base model), ``before/`` (after SFT, before the RL update), ``after/`` (after the
update), whichever exist — and writes, per stage and task: mean completion over the trials, the
checks the trials passed, mean safety (0 when a forbidden action was attempted), and what trial 0
did, labelled:

* ``prose``      no tool call was attempted: the model answered in text;
* ``malformed``  a tool call the codec could not parse (e.g. the prompt's ``<arguments as a JSON
                 object>`` placeholder copied verbatim);
* ``repeats``    the same tool with the same arguments called again (the observation was not used);
* ``acts``       distinct, well-formed tool calls.

With the job's config and stage summaries (SFT steps, lr, loss, seconds; the eval line) beside it,
so runs that differ in one setting compare side by side. Reads files only; no model runs.

Run:  .venv/bin/python experiments/job_heldout.py runs/main [more job dirs] --out heldout.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STAGES = (("base", "base"), ("sft", "before"), ("rl", "after"))


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _malformed(stage_dir: Path, rollout_id: str) -> int:
    calls = _rows(stage_dir / "calls" / f"{rollout_id}.calls.jsonl")
    return sum(1 for c in calls if c.get("malformed"))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def label(record: dict[str, Any], malformed: int) -> str:
    calls = [(c["tool"], json.dumps(c["args"], sort_keys=True)) for c in record["tool_calls"]]
    if malformed:
        return "malformed"
    if not calls:
        return "prose"
    return "repeats" if len(set(calls)) < len(calls) else "acts"


def stage_report(stage_dir: Path) -> dict[str, Any]:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in _rows(stage_dir / "rollouts.jsonl"):
        by_task[r["task_id"]].append(r)
    tasks = {}
    for task, recs in sorted(by_task.items()):
        graded = [r for r in recs if r.get("rewards")]
        first = min(recs, key=lambda r: r["trial"])
        passed = sorted(
            {c["name"] for r in graded for c in r["grade"]["checks"] if c.get("status") == "passed"}
        )
        tasks[task] = {
            "trials": len(recs),
            "completion": round(sum(r["rewards"]["completion"] for r in graded) / len(graded), 4)
            if graded
            else None,
            "safety": round(sum(r["rewards"]["safety"] for r in graded) / len(graded), 4) if graded else None,
            "checks_passed_by_any_trial": passed,
            "trial0": {
                "label": label(first, _malformed(stage_dir, first["rollout_id"])),
                "model_calls": first["n_calls"],
                "tool_calls": [c["tool"] for c in first["tool_calls"]],
            },
        }
    return tasks


def job_report(job: Path) -> dict[str, Any]:
    summary = json.loads((job / "summary.json").read_text(encoding="utf-8"))
    config = json.loads((job / "config.json").read_text(encoding="utf-8"))
    ev = summary.get("eval", {})
    stages = {}
    for name, folder in STAGES:
        key = {"sft": "before"}.get(name, folder)
        if (job / folder / "rollouts.jsonl").exists() and key in ev:
            o = ev[key]["overall"]
            stages[name] = {
                **{k: _round(o[k]) for k in ("completion", "score", "safety", "pass_at_k", "pass_hat_k")},
                "tasks": o["tasks"],
                "trials": o["trials"],
                "per_task": stage_report(job / folder),
            }
    sft = summary.get("sft", {})
    return {
        "job": str(job),
        "config": {"sft": config["sft"], "student": config["student"], "train": config["train"]},
        "sft": {k: sft.get(k) for k in ("steps", "examples", "loss", "seconds")},
        "student_s": summary.get("student", {}).get("seconds"),
        "wall_s": summary.get("wall_s"),
        "stages": stages,
    }


def markdown(rep: dict[str, Any]) -> str:
    lines = [f"### {rep['job']}", "", "| task | " + " | ".join(rep["stages"]) + " |"]
    lines.append("|---|" + "---|" * len(rep["stages"]))
    tasks = sorted({t for s in rep["stages"].values() for t in s["per_task"]})
    for t in tasks:
        cells = []
        for s in rep["stages"].values():
            row = s["per_task"].get(t)
            cells.append("-" if row is None else f"{row['completion']:.3f} ({row['trial0']['label']})")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    overall = " → ".join(f"{n} {s['completion']:.3f}" for n, s in rep["stages"].items())
    return "\n".join([*lines, "", f"completion: {overall}", ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jobs", nargs="+", type=Path, help="finished main-job directories")
    ap.add_argument("--out", type=Path, help="write the JSON report here")
    ap.add_argument("--note", default="", help="how the jobs were run (recorded in the JSON)")
    a = ap.parse_args(argv)
    for job in a.jobs:
        if not (job / "summary.json").exists():
            raise SystemExit(f"{job}: no summary.json (run `coworkenv job --out {job}` to the end first)")
    reports = [job_report(j) for j in a.jobs]
    for rep in reports:
        print(markdown(rep))
    if a.out:
        doc = {
            "analysis": "main jobs' held-out tasks: completion per stage and task, trial 0 labelled",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(["experiments/job_heldout.py", *(argv or sys.argv[1:])]),
            "load": [round(x, 2) for x in os.getloadavg()],
            "note": a.note,
            "jobs": reports,
        }
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
