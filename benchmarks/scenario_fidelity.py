"""How closely offline synthesis builds the task a scenario describes (issue 31).

Builds every slot of the hand-written suite ``tests/data/scenario_suite.yaml`` with the offline
generator (``auto``: a template where one fits the scenario, else composition), validates it
(replay = 1.0, mutation tests), and checks each part the suite expects against the *built task*
(:mod:`coworkenv.synth.procedural.expectations`): ``built`` (the request, reference calls, forbidden
rules or distractors do it), ``reported`` (not built, and ``run.json``'s scenario report or the
refusal says so), ``silent`` (neither). Also counts parts the generator called honoured that the
task does not do (``false_honour``). Deterministic; no timing.

    .venv/bin/python benchmarks/scenario_fidelity.py --out benchmarks/results/scenario-fidelity-DATE.json

Both suites by default: ``scenario_suite.yaml`` (44 slots) and ``scenario_suite_heldout.yaml`` (12,
written after the reading was frozen; it found defects that were then fixed, so it no longer
measures generalization cleanly).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import commit, machine_info

from coworkenv.synth.procedural.expectations import run_suite, summary

SUITE = Path(__file__).resolve().parents[1] / "tests" / "data" / "scenario_suite.yaml"


SUITES = (SUITE, SUITE.with_name("scenario_suite_heldout.yaml"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", type=Path, action="append", help="a suite file (default: both in tests/data)")
    p.add_argument("--mode", default="auto", help="auto | compose | templates")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("-v", "--verbose", action="store_true", help="print every part that is not built")
    args = p.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "scenario fidelity: parts of hand-written scenarios the built tasks do",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["benchmarks/scenario_fidelity.py", *(sys.argv[1:] if argv is None else argv)]),
        "commit": commit(),
        "load_before": os.getloadavg(),
        "machine": machine_info(),
        "mode": args.mode,
        "suites": {},
    }
    for path in args.suite or SUITES:
        results = run_suite(path, args.mode)
        result["suites"][path.stem] = {"summary": summary(results), "slots": [r.as_dict() for r in results]}
        print(path.stem, json.dumps(summary(results)))
        for r in results if args.verbose else ():
            for part in r.parts:
                if part.outcome != "built":
                    print(
                        f"  {r.task_id:28s} {r.builder:34s} {part.outcome:8s} {part.label}: "
                        f"{part.evidence} | {part.report}"
                    )
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
