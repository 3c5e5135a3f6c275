"""What a job's SFT changed in the student's first turn on its held-out tasks, beside the base model.

For each held-out task of a finished main job (``<job>/before/calls``: the exact prompt token ids of
the first model call of trial 0), and for each model given (default: the base SmolLM2 and the job's
SFT checkpoint ``<job>/sft/final``), it records the probability that the first generated token opens
a tool call (``<tool_call>``'s first token) and the greedy first turn (``--max-new-tokens``). The
job evaluated at temperature 1 until ``student.eval_temperature`` (default 0, greedy) was added; a
model that prefers a tool call by a small margin rarely shows it when sampled, and this probe
shows the margin. Deterministic (greedy), no sampling.

Run:  .venv/bin/python experiments/first_turn_probe.py runs/main [--models smollm2 runs/main/sft/final]
Writes ``--out`` (JSON) with date, load and command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def first_calls(job: Path) -> list[tuple[str, list[int]]]:
    """(task id, prompt ids) of trial 0's first model call per held-out task."""
    out = []
    for f in sorted((job / "before" / "calls").glob("*-t0-*.calls.jsonl")):
        with f.open() as fh:
            row = json.loads(fh.readline())
        out.append((str(row["task_id"]), [int(x) for x in row["prompt_ids"]]))
    if not out:
        raise SystemExit(f"{job}/before/calls has no trial-0 call records: run the main job first")
    return out


def probe(name: str, calls: list[tuple[str, list[int]]], max_new: int) -> list[dict[str, Any]]:
    import torch

    from coworkenv.models import load_causal_lm

    model, tok = load_causal_lm(name)
    model.eval()
    opener = tok.encode("<tool_call>", add_special_tokens=False)[0]
    rows = []
    for task, ids in calls:
        x = torch.tensor([ids])
        with torch.no_grad():
            p = torch.softmax(model(x).logits[0, -1].float(), -1)[opener]
            out = model.generate(x, max_new_tokens=max_new, do_sample=False)
        text = tok.decode(out[0, len(ids) :])
        rows.append(
            {
                "task_id": task,
                "p_tool_call_opener": round(float(p), 4),
                "greedy_opens_tool_call": text.lstrip().startswith("<tool_call>"),
                "greedy": text,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("job", type=Path, help="a finished main job's out directory")
    ap.add_argument("--models", nargs="+", default=None, help="default: smollm2 and <job>/sft/final")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 2))
    models = args.models or ["smollm2", str(args.job / "sft" / "final")]
    calls = first_calls(args.job)
    load = [round(x, 2) for x in os.getloadavg()]
    doc = {
        "probe": "first turn on the job's held-out tasks: P(first token opens a tool call), greedy text",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "experiments/first_turn_probe.py " + " ".join(sys.argv[1:]),
        "load": load,
        "models": {m: probe(m, calls, args.max_new_tokens) for m in models},
    }
    out = args.out or args.job / "first_turn_probe.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for m, rows in doc["models"].items():
        print(m)
        for r in rows:
            print(f"  {r['task_id']}: p={r['p_tool_call_opener']:.3f}  {r['greedy'][:100]!r}")


if __name__ == "__main__":
    main()
