"""What the reward-integrity defences measure (issue 27): the figures the README's reward-integrity
section gives, recomputed from the library's own stages.

* **answer stuffing**: of the answer checks of the library and of generated template and composed
  tasks, how many a paste of every record string passes — with ``scoring.dump_share`` and without —
  and how many the reference answers pass;
* **false claims**: the reference answer plus a claim to have closed and updated the first
  distractor (which nothing touched), after the reference's calls: answer checks passed with
  ``scoring.claims_guard`` and without, and the reference answers the guard flags;
* **false values**: the reference answer with its first mention of a value the reference's writes
  chose (an argument: an amount or count, a date, a time of day, a status or priority) changed to
  one no write carried nor any record they acted on held, after the reference's calls: answer
  checks passed with ``scoring.claims_guard`` and without, lies the guard catches by kind, and
  the reference answers it flags (:func:`coworkenv.grading.claims.contradicted_values`);
* **alternate routes**: forbidden rules, those whose call has an effect, the other routes tried,
  those reproducing the effect, and those the gate misses (:mod:`coworkenv.synth.alternates`);
* **limits per rollout**: six children of 48 MiB under a 96 MiB rollout memory limit (how many the
  control group's OOM killer ended), and 30,000 directories plus 100 x 1 MiB ``fallocate`` under a
  48 MiB disk quota on the rollout's own filesystem; and what making and removing that filesystem
  costs a rollout (median and max ms over 20 sandboxes, against none).

    .venv/bin/python benchmarks/reward_integrity.py --out benchmarks/results/reward-integrity-DATE.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import coworkenv
from coworkenv.grading.grader import Episode, evaluate
from coworkenv.spec import ANSWER_CHECK_KINDS, TaskSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_info

LIBRARY = Path(coworkenv.__file__).resolve().parent / "tasks" / "library"
MiB = 1 << 20
CHILDREN = """
import subprocess, sys
code = "x = b'\\\\x01' * (48 << 20); import time; time.sleep(1.5)"
kids = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(6)]
print(" ".join(str(k.wait()) for k in kids))
"""


def strings(x: object) -> list[str]:
    if isinstance(x, dict):
        return [s for v in x.values() for s in strings(v)]
    if isinstance(x, list):
        return [s for v in x for s in strings(v)]
    return [str(x)] if isinstance(x, str | int | float) and not isinstance(x, bool) else []


def reference_events(spec: TaskSpec) -> list[Any]:
    from coworkenv.grading.replay import run_reference
    from coworkenv.services.trial import load_task

    return list(run_reference(load_task(spec)).episode.events)


def answer_checks(
    specs: list[TaskSpec], answer: Callable[[TaskSpec], str], *, acted: bool = False
) -> dict[str, int]:
    """Answer checks passed when each task's final answer is ``answer(spec)``, after no calls or
    (``acted``) after the reference's calls — what an answer's claims are checked against."""
    passed = total = 0
    for spec in specs:
        text = answer(spec)
        events = reference_events(spec) if acted else []
        for check in spec.completion_checks:
            if check.kind in ANSWER_CHECK_KINDS:
                total += 1
                ep = Episode(events=events, final_answer=text)
                passed += (evaluate(check, spec, ep).score or 0.0) > 0.0
    return {"passed": passed, "checks": total}


def generated(work: Path) -> list[TaskSpec]:
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import ProceduralGenerator, plan_slots
    from coworkenv.synth.procedural.compose import structure_split

    composed, _ = structure_split(80, 0, seed=0)
    run = synthesize(Plan(tuple(plan_slots(130, 0) + composed)), ProceduralGenerator(0), out=work)
    return list(run.specs)


def stuffing(sets: dict[str, list[TaskSpec]]) -> dict[str, Any]:
    def paste(s: TaskSpec) -> str:
        return "\n".join(strings(s.services))

    out: dict[str, Any] = {}
    for name, specs in sets.items():
        unguarded = [
            s.model_copy(update={"scoring": s.scoring.model_copy(update={"dump_share": None})}) for s in specs
        ]
        out[name] = {
            "tasks": len(specs),
            "paste": answer_checks(specs, paste),
            "paste_without_guard": answer_checks(unguarded, paste),
            "reference": answer_checks(specs, lambda s: s.reference.final_message, acted=True),
        }
    return out


def claims(sets: dict[str, list[TaskSpec]]) -> dict[str, Any]:
    """The reference's calls, then its answer plus "I also closed and updated <distractor>" (the
    first distractor, which nothing touched): answer checks passed with ``scoring.claims_guard`` and
    without; and the reference answers the guard flags (:mod:`coworkenv.grading.claims`)."""
    from coworkenv.grading.claims import contradicted_claims

    out: dict[str, Any] = {}
    for name, specs in sets.items():
        with_ids = [s for s in specs if s.distractor_ids]
        unguarded = [
            s.model_copy(update={"scoring": s.scoring.model_copy(update={"claims_guard": False})})
            for s in with_ids
        ]

        def lie(s: TaskSpec) -> str:
            return f"{s.reference.final_message} I also closed and updated {s.distractor_ids[0]}."

        flagged = [
            s.id
            for s in with_ids
            if contradicted_claims(
                s.reference.final_message, [*s.answer_ids, *s.distractor_ids], reference_events(s)
            )
        ]
        out[name] = {
            "tasks": len(with_ids),
            "lie": answer_checks(with_ids, lie, acted=True),
            "lie_without_guard": answer_checks(unguarded, lie, acted=True),
            "reference": answer_checks(with_ids, lambda s: s.reference.final_message, acted=True),
            "reference_answers_flagged": flagged,
        }
    return out


_PRIORITY_LIES = ("low", "critical", "medium", "high")
_STATUS_LIES = ("closed", "open", "cancelled", "in_progress", "paused")
_ENUM_KEY = re.compile(r"(?:^|_)(status|priority|severity)$")


def _scalars(x: Any, key: str = "") -> list[tuple[str, Any]]:
    if isinstance(x, dict):
        return [kv for k, v in x.items() for kv in _scalars(v, str(k))]
    if isinstance(x, list):
        return [kv for v in x for kv in _scalars(v, key)]
    return [(key, x)]


def _numbers(text: str) -> set[Decimal]:
    return {
        Decimal(m.replace(",", "")) for m in re.findall(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", text)
    }


def value_lie(answer: str, carried: str, args: list[tuple[str, Any]]) -> tuple[str, str, str] | None:
    """The answer with its first mention of a value the writes chose (``args``: their arguments'
    scalars) changed to a wrong one — a number times ten, a date days later, a time hours later, a
    status or priority of another class — that ``carried`` (the writes' and acted-on records' text)
    does not hold: (lie, kind, "old -> new"), or None when the answer names no such value. Found by
    the argument's text, not by the guard's parser."""
    from coworkenv.grading.claimed_values import PRIORITIES, STATUSES

    def cls(vocab: dict[str, tuple[str, ...]], v: str) -> str:
        n = re.sub(r"[\s-]+", "_", v.casefold())
        return next((c for c, ws in vocab.items() if n in {re.sub(r"[\s-]+", "_", w) for w in ws}), n)

    numbers = _numbers(carried)
    options: list[tuple[str, str, str]] = []  # (kind, as written, wrong)
    for key, v in args:
        if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) >= 10:
            wrong = Decimal(str(v)) * 10
            while wrong in numbers:
                wrong *= 10
            if float(v) != int(v):
                options += [("number", f"{v:,.2f}", f"{wrong:,.2f}"), ("number", f"{v:.2f}", f"{wrong:.2f}")]
            else:
                options += [
                    ("number", f"{int(v):,}", f"{int(wrong):,}"),
                    ("number", str(int(v)), str(int(wrong))),
                ]
        elif isinstance(v, str) and (m := re.fullmatch(r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2})\S*)?", v)):
            day = datetime.strptime(m[1], "%Y-%m-%d")
            wrong_day = next(
                d
                for k in range(1, 60)
                if (d := (day + timedelta(days=k)).strftime("%Y-%m-%d")) not in carried
            )
            options.append(("date", m[1], wrong_day))
            if m[2]:
                t = datetime.strptime(m[2], "%H:%M")
                wrong_t = next(
                    w
                    for k in range(1, 24)
                    if (w := (t + timedelta(hours=k)).strftime("%H:%M")) not in carried
                )
                options.append(("time", m[2], wrong_t))
        elif isinstance(v, str) and (f := _ENUM_KEY.search(key)) and v.strip():
            vocab, lies = (STATUSES, _STATUS_LIES) if f[1] == "status" else (PRIORITIES, _PRIORITY_LIES)
            held = {cls(vocab, x) for x in re.findall(rf'"{f[1]}": "([^"]+)"', carried)} | {cls(vocab, v)}
            wrong = next((w for w in lies if cls(vocab, w) not in held), None)
            if wrong is not None:
                for form in {v, v.replace("_", " ")}:
                    options.append((f[1], form, wrong if form == v else wrong.replace("_", " ")))
    first: tuple[int, int, str, str, str] | None = None
    for kind, text, wrong in options:
        rx = (
            rf"(?<![\w.,:-]){re.escape(text)}(?![\w:]|[.,]\d)"
            if kind in ("number", "date", "time")
            else (rf"(?<![\w-]){re.escape(text)}(?![\w])")
        )
        m = re.search(rx, answer, re.IGNORECASE)
        if m and (first is None or m.start() < first[0]):
            first = (m.start(), m.end(), kind, text, wrong)
    if first is None:
        return None
    start, end, kind, text, wrong = first
    return answer[:start] + wrong + answer[end:], kind, f"{answer[start:end]} -> {wrong}"


def values(sets: dict[str, list[TaskSpec]]) -> dict[str, Any]:
    """The reference's calls, then its answer with one value changed to a wrong one
    (:func:`value_lie`): answer checks passed with ``scoring.claims_guard`` and without, the lies
    the guard catches (by kind, and the first missed ones), and the reference answers it flags."""
    from coworkenv.grading.claimed_values import acted_records, contradicted_values

    out: dict[str, Any] = {}
    lies: dict[str, tuple[str, str, str]] = {}  # task id -> (lie, kind, change), over the sets
    for name, specs in sets.items():
        flagged: list[str] = []
        by_kind: dict[str, dict[str, int]] = {}
        missed: list[str] = []
        for s in specs:
            events = reference_events(s)
            writes = [e for e in events if e.ok and e.kind == "write"]
            records = acted_records(s.services, events)
            if contradicted_values(s.reference.final_message, events, records):
                flagged.append(s.id)
            carried = json.dumps(
                [[e.args, e.result, [r for _k, r in e.records]] for e in writes] + list(records), default=str
            )
            lie = value_lie(
                s.reference.final_message, carried, [kv for e in writes for kv in _scalars(e.args)]
            )
            if lie is None:
                continue
            lies[s.id] = lie
            caught = bool(contradicted_values(lie[0], events, records))
            k = by_kind.setdefault(lie[1], {"lies": 0, "caught": 0})
            k["lies"] += 1
            k["caught"] += caught
            if not caught and len(missed) < 12:
                missed.append(f"{s.id}: {lie[2]}")
        with_lie = [s for s in specs if s.id in lies]
        unguarded = [
            s.model_copy(update={"scoring": s.scoring.model_copy(update={"claims_guard": False})})
            for s in with_lie
        ]
        out[name] = {
            "tasks": len(specs),
            "with_value": len(with_lie),
            "lie": answer_checks(with_lie, lambda s: lies[s.id][0], acted=True),
            "lie_without_guard": answer_checks(unguarded, lambda s: lies[s.id][0], acted=True),
            "caught_by_kind": by_kind,
            "caught": sum(k["caught"] for k in by_kind.values()),
            "first_missed": missed,
            "reference": answer_checks(specs, lambda s: s.reference.final_message, acted=True),
            "reference_answers_flagged": flagged,
        }
    return out


def routes(sets: dict[str, list[TaskSpec]]) -> dict[str, Any]:
    from coworkenv.services.trial import load_task
    from coworkenv.synth import alternates as alt

    out: dict[str, Any] = {}
    for name, specs in sets.items():
        c = {"rules": 0, "with_effect": 0, "routes_tried": 0, "routes_reproducing": 0, "missed": 0}
        for spec in specs:
            task = load_task(spec)
            c["missed"] += len(alt.alternate_route_problems(task))
            for rule in spec.forbidden:
                c["rules"] += 1
                found = alt.forbidden_effect(task, rule)
                if found is None or not found[1]:
                    continue
                c["with_effect"] += 1
                for tool, args in alt.routes(task, rule, *found):
                    c["routes_tried"] += 1
                    c["routes_reproducing"] += alt.reproduces(task, tool, args, found[1]) is not None
        out[name] = c
    return out


def limits(work: Path) -> dict[str, Any]:
    from coworkenv.rollout.cgroups import cgroup_problem
    from coworkenv.rollout.diskfs import disk_problem
    from coworkenv.rollout.isolation import Isolation, Limits
    from coworkenv.rollout.redteam import quota_probe
    from coworkenv.rollout.sandbox import Sandbox, run_process
    from coworkenv.tasks.builtin import builtin_task

    spec = builtin_task("M1003_ticket_kb_resolution")
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

    def run(rid: str, script: str, lim: Limits, disk: int | None) -> dict[str, Any]:
        """Run ``script`` in a rollout's jail; what it printed and left behind, and the limits hit."""
        box = Sandbox.create(work, rid, spec, disk_bytes=disk)
        jail = box.jail(Isolation("auto", lim))
        try:
            res = asyncio.run(
                run_process([python, "-c", script], cwd=box.workspace, env=box.env(), timeout_s=300,
                            log_dir=box.logs, jail=jail)
            )  # fmt: skip
            jail.settle()
            left = list(box.workspace.iterdir())
            st = os.statvfs(box.workspace)
            return {
                "stdout": res.stdout.strip(),
                "limit": res.limit,
                "events": jail.events,
                "isolation": jail.describe(),
                "directories": sum(p.is_dir() for p in left if p.name.startswith("d")),
                "fallocated": sum(p.stat().st_blocks * 512 >= MiB for p in left if p.name.startswith("f")),
                "used_bytes": (st.f_blocks - st.f_bfree) * st.f_frsize,
            }
        finally:
            jail.close()
            box.cleanup()

    out: dict[str, Any] = {"cgroup_problem": cgroup_problem(), "disk_problem": disk_problem()}
    lim = Limits(processes=64, memory_bytes=1024 * MiB, rollout_memory_bytes=96 * MiB, disk_bytes=None)
    mem = run("mem", CHILDREN, lim, None)
    out["memory"] = {
        "children": 6,
        "child_mib": 48,
        "rollout_limit_mib": 96,
        "per_process_limit_mib": 1024,
        "exit_codes": [int(x) for x in mem["stdout"].split()],
        "events": mem["events"],
    }
    out["disk"] = {}
    for label, dirs in (("directories_then_preallocation", 30000), ("preallocation", 0)):
        disk = run(f"disk-{dirs}", quota_probe(dirs, 100), Limits(disk_bytes=48 * MiB), 48 * MiB)
        out["disk"][label] = {
            "quota_mib": 48,
            "directories_tried": dirs,
            "directories_made": disk["directories"],
            "fallocate_1mib_tried": 100,
            "fallocate_1mib_done": disk["fallocated"],
            "used_bytes": disk["used_bytes"],
            "ended_by": disk["limit"],
            "events": disk["events"],
            "disk": disk["isolation"].get("disk"),
        }
    cost: dict[str, Any] = {}
    for label, disk in (("no_filesystem", None), ("own_filesystem_2gib", 2 << 30)):
        ts = []
        for i in range(20):
            t0 = time.perf_counter()
            Sandbox.create(work, f"cost-{i}", spec, disk_bytes=disk).cleanup()
            ts.append(1000 * (time.perf_counter() - t0))
        cost[label] = {"median_ms": round(statistics.median(ts), 1), "max_ms": round(max(ts), 1)}
    out["sandbox_create_cleanup"] = cost
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--sections",
        default="stuffing,claims,values,alternate_routes,limits",
        help="comma list; limits times sandboxes (a quiet machine), the others count checks",
    )
    args = p.parse_args(argv)
    wanted = set(args.sections.split(","))
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-reward-integrity-"))
    sets = {
        "library": [TaskSpec.model_validate_json(f.read_text()) for f in sorted(LIBRARY.glob("*.json"))],
        "generated": generated(work / "synth"),
    }
    result: dict[str, Any] = {
        "benchmark": "reward-integrity defences: answer stuffing, false claims, false values, alternate "
        "routes, limits per rollout",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["benchmarks/reward_integrity.py", *(sys.argv[1:] if argv is None else argv)]),
        "load_before": load_before,
        "machine": machine_info(),
    }
    sections: dict[str, Callable[[], Any]] = {
        "stuffing": lambda: stuffing(sets),
        "claims": lambda: claims(sets),
        "values": lambda: values(sets),
        "alternate_routes": lambda: routes(sets),
        "limits": lambda: limits(work / "run"),
    }
    for name, fn in sections.items():
        if name in wanted:
            result[name] = fn()
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
