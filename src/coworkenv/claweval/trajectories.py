"""Trajectory-score differential: the same scripted runs graded on Claw-Eval's services and ours.

Contract: for each task, :func:`scripts` builds three scripted trajectories from its task.yaml and
fixtures — ``partial`` (one read and a lookup of an unknown id), ``correct`` (every read tool, the
gets on several records, the writes its reference solution names, its reference solution as the
answer) and ``unsafe`` (the correct run plus every tool its safety checks forbid, or each write
tool twice). :func:`run` plays
each script on both sides from fresh fixtures, builds Claw-Eval's trace of their run as its runner
would (tool dispatches with the status and body their services answered, ``GET /audit`` snapshots)
and ours from our rollout record (:func:`coworkenv.claweval.trace.to_trace_events`), grades both with
the task's own ``grader.py`` and the same fixed judge, and reports the scores side by side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coworkenv.claweval.differential import Sides, TaskSides, probes
from coworkenv.claweval.grade import grade_traces
from coworkenv.claweval.trace import BASE_URL, to_trace_events
from coworkenv.importers.claw_eval import task_dirs
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.record import RolloutRecord
from coworkenv.spec import ServiceProfile

Kind = Literal["partial", "correct", "unsafe"]
FIXED_JUDGE: dict[str, Any] = {"kind": "fixed", "score": 0.6, "text": '{"score": 0.6, "reasoning": "fixed"}'}
_READ_WORDS = ("list", "get", "search", "history", "user_events", "feeds", "articles")


@dataclass(frozen=True)
class Script:
    kind: Kind
    calls: tuple[tuple[str, str, dict[str, Any]], ...]
    """(tool, route, arguments), in order."""
    final: str


@dataclass
class ScorePair:
    task_id: str
    kind: Kind
    theirs: dict[str, Any]
    ours: dict[str, Any]

    @property
    def equal(self) -> bool:
        a, b = self.theirs.get("task_score"), self.ours.get("task_score")
        return a is not None and b is not None and abs(float(a) - float(b)) < 1e-9


@dataclass
class ScoreReport:
    pairs: list[ScorePair] = field(default_factory=list)
    failed_tasks: dict[str, str] = field(default_factory=dict)

    @property
    def agreement(self) -> float:
        return sum(p.equal for p in self.pairs) / len(self.pairs) if self.pairs else 0.0

    def summary(self) -> str:
        eq = sum(p.equal for p in self.pairs)
        errors = sum(1 for p in self.pairs if p.theirs.get("status") != "graded")
        return (
            f"{eq}/{len(self.pairs)} trajectories scored equal ({self.agreement:.1%}); "
            f"{errors} their-side grader errors; {len(self.failed_tasks)} task(s) failed"
        )

    def differences(self) -> str:
        return "\n".join(
            f"{p.task_id} {p.kind}: theirs {p.theirs.get('task_score', p.theirs.get('reason'))} "
            f"ours {p.ours.get('task_score', p.ours.get('reason'))}"
            for p in self.pairs
            if not p.equal
        )


def _is_read(tool: str) -> bool:
    return any(w in tool for w in _READ_WORDS) and "create" not in tool


def scripts(t: TaskSides) -> list[Script]:
    """The partial, correct and unsafe scripts of one task."""
    data = t.data
    valid = {
        p.tool: (p.route, dict(p.args))
        for p in probes(list(data.get("tools") or []), t.routes, t.rows_of, t.trial.clock.now())
        if p.kind == "valid" and p.route.strip("/").split("/", 1)[0] in t.running
    }
    reads = [n for n in valid if _is_read(n)]
    writes = [n for n in valid if not _is_read(n)]
    reference = str(data.get("reference_solution") or "")
    forbidden = [
        str(c.get("tool_name"))
        for c in data.get("safety_checks") or []
        if isinstance(c, dict) and c.get("tool_name") in valid
    ]
    correct: list[tuple[str, str, dict[str, Any]]] = []
    for n in reads:
        route, args = valid[n]
        ids = [k for k in args if k.endswith("_id")]
        if ids:
            rows = t.rows_of.get(route.strip("/").split("/", 1)[0], [])
            values = [r.get(ids[0]) for r in rows if isinstance(r, dict) and r.get(ids[0])][:5]
            correct += [(n, route, {**args, ids[0]: v}) for v in values or [args[ids[0]]]]
        else:
            correct.append((n, route, args))
    correct += [(n, *valid[n]) for n in writes if n in reference and n not in forbidden]
    risky = forbidden or [n for n in writes for _ in range(2)]
    unsafe = correct + [(n, *valid[n]) for n in risky]
    # partial: one read, then a lookup of an id that does not exist (an error the grader may count)
    lookups = [
        (n, r, {**a, k: "NOPE-404"})
        for n, (r, a) in valid.items()
        if _is_read(n)
        for k in a
        if k.endswith("_id")
    ]
    partial = correct[:1] + lookups[:1]
    return [
        Script("partial", tuple(partial), "I looked at it."),
        Script("correct", tuple(correct), reference or "Done."),
        Script("unsafe", tuple(unsafe), reference or "Done."),
    ]


def _messages(prompt: str, script: Script, bodies: list[Any]) -> list[Message]:
    msgs = [
        Message(role="system", content="You are a helpful assistant."),
        Message(role="user", content=prompt),
    ]
    for i, ((tool, _route, args), body) in enumerate(zip(script.calls, bodies, strict=True)):
        call = ToolCall(id=f"call_{i}", name=tool, arguments=json.dumps(args, ensure_ascii=False))
        msgs.append(Message(role="assistant", tool_calls=(call,)))
        msgs.append(Message(role="tool", content=json.dumps(body, ensure_ascii=False), tool_call_id=call.id))
    msgs.append(Message(role="assistant", content=script.final))
    return msgs


def _their_trace(t: TaskSides, sides: Sides, script: Script, tid: str) -> list[dict[str, Any]]:
    answers = [sides.theirs(route, args) for _tool, route, args in script.calls]
    record = RolloutRecord(
        rollout_id=tid,
        task_id=t.spec.id,
        harness="script",
        trial=0,
        status="ok",
        messages=tuple(
            _messages(str((t.data.get("prompt") or {}).get("text", "")), script, [b for _, b in answers])
        ),
    )
    # Messages as ours would be; dispatches and audit as Claw-Eval's runner records them.
    events = [e for e in to_trace_events(record, t.trial.task) if e["type"] in ("trace_start", "message")]
    for i, ((tool, route, args), (status, body)) in enumerate(zip(script.calls, answers, strict=True)):
        events.append(
            {
                "type": "tool_dispatch",
                "trace_id": tid,
                "tool_use_id": f"call_{i}",
                "tool_name": tool,
                "endpoint_url": BASE_URL + route,
                "request_body": args,
                "response_status": status,
                "response_body": body,
            }
        )
    for svc in sorted(t.running):
        audit = sides.upstream.audit(svc)
        events.append(
            {
                "type": "audit_snapshot",
                "trace_id": tid,
                "service_name": svc,
                "audit_url": f"{BASE_URL}/{svc}/audit",
                "audit_data": audit,
            }
        )
    events.append({"type": "trace_end", "trace_id": tid})
    return events


def _our_trace(t: TaskSides, sides: Sides, script: Script, tid: str) -> list[dict[str, Any]]:
    bodies = [sides.ours(route, args)[1] for _tool, route, args in script.calls]
    prompt = str((t.data.get("prompt") or {}).get("text", ""))
    msgs = _messages(prompt, script, bodies)
    record = RolloutRecord(
        rollout_id=tid,
        task_id=t.spec.id,
        harness="script",
        trial=0,
        status="ok",
        messages=tuple(msgs),
        final_answer=script.final,
        audit=tuple(e.to_dict() for e in t.trial.audit),
    )
    return to_trace_events(record, t.trial.task)


def run(
    tasks_dir: Path, checkout: Path, only: list[str] | None = None, profile: ServiceProfile = "claw-eval"
) -> ScoreReport:
    """Every task's three scripts on both sides, graded by its own grader with :data:`FIXED_JUDGE`
    (``profile``: ours to measure; ``strict`` shows what grading on our own services would change)."""
    dirs = [d for d in task_dirs(tasks_dir) if only is None or d.name in only]
    sides = Sides(dirs, checkout, profile)
    report = ScoreReport()
    jobs: list[dict[str, Any]] = []
    keys: list[tuple[str, Kind]] = []
    for t in sides.tasks(report.failed_tasks):
        base = {
            "task_yaml": str(t.task_dir / "task.yaml"),
            "tasks_dir": str(t.task_dir.parent),
            "judge": FIXED_JUDGE,
        }
        for script in scripts(t):
            tid = f"{t.task_dir.name}-{script.kind}"
            for svc in t.running:  # fresh fixtures on both sides for every script
                sides.upstream.load(svc, sides_file(sides, t, svc))
            sides.host.close_trial("parity")
            t.trial = sides.host.open_trial(t.spec.id, "parity")
            jobs.append({**base, "trace": _their_trace(t, sides, script, tid)})
            jobs.append({**base, "trace": _our_trace(t, sides, script, tid)})
            keys.append((t.task_dir.name, script.kind))
    results = grade_traces(jobs, checkout=checkout)
    for i, (task_id, kind) in enumerate(keys):
        report.pairs.append(ScorePair(task_id, kind, results[2 * i], results[2 * i + 1]))
    return report


def sides_file(sides: Sides, t: TaskSides, service: str) -> Path:
    """The fixture file Claw-Eval's ``service`` loads for task ``t``."""
    for d, _data, files in sides.loaded:
        if d == t.task_dir:
            return files[service]
    raise KeyError(f"{t.task_dir.name}: no fixture for {service}")
