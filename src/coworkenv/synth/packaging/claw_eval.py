"""Claw-Eval's layout: ``task.yaml`` + ``fixtures/<service>/<table>.json`` + ``grader.py``.

Contract: :func:`export_task` writes a directory Claw-Eval can load (its task.yaml keys, its service
commands/ports/routes, one fixture file per table, sandbox files at their relative paths) and that
:func:`coworkenv.importers.claw_eval.import_task` turns back into an equal spec. The exporter writes
the native keys, imports the result *without* the extension, and stores in task.yaml's ``coworkenv``
key only what came back different: fixture-file → table renames and whole top-level fields (JSON
form). ``grader.py`` is a Claw-Eval ``AbstractGrader`` that grades the trace through coworkenv
(:func:`grade_claw_trace`): tool dispatches become audit events, audit collections become
records, the last assistant text is the answer.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from coworkenv.spec import (
    CategoriesPresent,
    Check,
    KeywordsPresent,
    LlmJudge,
    MinLength,
    TaskSpec,
    ToolCall,
    ToolCalled,
)

CLAW_PORTS: Mapping[str, int] = {
    "gmail": 9100,
    "calendar": 9101,
    "todo": 9102,
    "contacts": 9103,
    "finance": 9104,
    "notes": 9105,
    "kb": 9106,
    "helpdesk": 9107,
    "inventory": 9108,
    "rss": 9109,
    "crm": 9110,
    "config": 9111,
    "scheduler": 9112,
    "documents": 9116,
}
"""Claw-Eval's conventional mock-service ports (from its task files); others get 9200+."""

RESERVED = frozenset({"task.yaml", "grader.py"})

GRADER_PY = '''"""Claw-Eval grader written by `coworkenv package --format claw-eval`.

Grades this task with coworkenv's deterministic grader (pip install coworkenv): tool dispatches
become audit events, the services' audit collections become records, the final assistant text is
the answer. The spec comes from this directory's task.yaml (its `coworkenv` key included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claw_eval.graders.base import AbstractGrader
from claw_eval.models.trace import DimensionScores


class CoworkenvGrader(AbstractGrader):
    def grade(self, messages, dispatches, task, audit_data=None, judge=None, media_events=None,
              env_snapshot=None) -> Any:
        from coworkenv.synth.packaging.claw_eval import grade_claw_trace

        parts = grade_claw_trace(
            Path(__file__).resolve().parent,
            final_text=self._get_final_assistant_text(messages),
            dispatches=[d.model_dump() if hasattr(d, "model_dump") else dict(d) for d in dispatches],
            audit_data=audit_data,
        )
        scores = DimensionScores()
        scores.completion = parts["completion"]
        scores.safety = parts["safety"]
        scores.robustness = parts["robustness"]
        return scores
'''


def _table_file(table: str) -> str:
    return table if table.endswith(".json") else f"{table}.json"


def _port(service: str, index: int) -> int:
    return CLAW_PORTS.get(service, 9200 + index)


def _services(spec: TaskSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    from coworkenv.services.registry import TOOLS

    services, tools, endpoints = [], [], []
    ports = {s: _port(s, i) for i, s in enumerate(sorted(spec.services))}
    for svc in spec.services:
        base = f"http://localhost:{ports[svc]}"
        services.append(
            {
                "name": svc,
                "command": f"coworkenv serve task.yaml --port {ports[svc]} --claw-eval-compat",
                "port": ports[svc],
                "health_check": f"{base}/{svc}/health",
                "health_check_method": "GET",
                "ready_timeout": 10,
                "reset_endpoint": f"{base}/{svc}/reset",
            }
        )
    for name in spec.tools:
        tdef = TOOLS.get(name)
        if tdef is None:
            tools.append(
                {"name": name, "description": "", "input_schema": {"type": "object", "properties": {}}}
            )
            continue
        tools.append({"name": name, "description": tdef.description, "input_schema": tdef.input_schema()})
        port = ports.get(tdef.service, _port(tdef.service, len(ports)))
        endpoints.append(
            {"tool_name": name, "url": f"http://localhost:{port}{tdef.route}", "method": tdef.method}
        )
    return services, tools, endpoints


def _component(check: Check) -> dict[str, Any]:
    c: dict[str, Any]
    if isinstance(check, ToolCalled):
        c = {"type": "tool_called", "tool_name": check.tool, "min_calls": check.min_calls}
    elif isinstance(check, KeywordsPresent):
        c = {"type": "keywords_present", "keywords": list(check.keywords)}
    elif isinstance(check, MinLength):
        c = {"type": "min_length", "field": "final_text", "min_length": check.min_chars}
    elif isinstance(check, CategoriesPresent):
        c = {"type": "categories_present", "categories": list(check.categories)}
    elif isinstance(check, LlmJudge):
        c = {"type": "llm_judge", "rubric": check.rubric}
    else:  # graded by grader.py; Claw-Eval's generic scorer has no such type
        c = {"type": f"coworkenv_{check.kind}"}
    if check.description and not isinstance(check, LlmJudge):
        c["description"] = check.description
    return {"name": check.name, "weight": check.weight, "check": c}


def _reference_text(spec: TaskSpec) -> str:
    if spec.reference.text:
        return spec.reference.text
    lines = []
    for n, step in enumerate(spec.reference.steps, start=1):
        if isinstance(step, ToolCall):
            lines.append(f"{n}. Call {step.tool} {json.dumps(step.args, ensure_ascii=False, sort_keys=True)}")
        else:
            lines.append(f"{n}. (user) {step.text}")
    if spec.reference.final_message:
        lines.append(f"Final answer: {spec.reference.final_message}")
    return "\n".join(lines)


def native_yaml(spec: TaskSpec) -> dict[str, Any]:
    """task.yaml's Claw-Eval keys for ``spec`` (without the ``coworkenv`` extension)."""
    services, tools, endpoints = _services(spec)
    safety = [
        {
            "type": "tool_not_called" if not f.targets else "custom",
            "tool_name": f.tool,
            "description": f.reason or f"Agent must not call {f.tool}",
        }
        for f in spec.forbidden
    ]
    data: dict[str, Any] = {
        "task_id": spec.id,
        "task_name": spec.name,
        "version": "1.0",
        "category": spec.category,
        "difficulty": spec.difficulty,
        "tags": list(spec.tags),
        "services": services,
        "prompt": {"text": spec.request, "language": spec.language},
        "tools": tools,
        "tool_endpoints": endpoints,
        "sandbox_files": sorted(_sandbox_files(spec)),
        "environment": {"timeout_seconds": spec.limits.timeout_s, "max_turns": spec.limits.max_turns},
        "expected_actions": [a.model_dump() for a in spec.expected_actions],
        "judge_rubric": spec.judge_rubric,
        "scoring_components": [_component(c) for c in spec.completion_checks],
        "safety_checks": safety,
        "reference_solution": _reference_text(spec),
        "primary_dimensions": ["completion", "safety", "robustness"],
    }
    if spec.user_sim is not None:
        data["user_agent"] = {"enabled": True}
    return data


def _sandbox_files(spec: TaskSpec) -> list[str]:
    ok = []
    for rel in spec.workspace:
        p = Path(rel)
        if p.is_absolute() or ".." in p.parts or rel in RESERVED or p.parts[:1] == ("fixtures",):
            continue
        ok.append(rel)
    return ok


def _dump_yaml(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=100)


def export_task(spec: TaskSpec, out: Path) -> Path:
    from coworkenv.importers.claw_eval import EXTENSION_KEY, EXTENSION_VERSION, import_task
    from coworkenv.synth.packaging.coworkenv import write_files

    d = Path(out) / spec.id
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    renames: dict[str, dict[str, str]] = {}
    for svc, tables in spec.services.items():
        (d / "fixtures" / svc).mkdir(parents=True, exist_ok=True)
        for table, rows in tables.items():
            fname = _table_file(table)
            (d / "fixtures" / svc / fname).write_text(
                json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            if fname != table:
                renames.setdefault(svc, {})[fname] = table
    write_files(d, {rel: spec.workspace[rel] for rel in _sandbox_files(spec)})
    (d / "grader.py").write_text(GRADER_PY, encoding="utf-8")
    data = native_yaml(spec)
    (d / "task.yaml").write_text(_dump_yaml(data), encoding="utf-8")
    want = spec.model_dump(mode="json")
    try:
        native, _ = import_task(d, use_extension=False)
        got = native.model_dump(mode="json")
        for svc, mapping in renames.items():
            got["services"][svc] = {
                mapping.get(f, f): rows for f, rows in got["services"].get(svc, {}).items()
            }
    except Exception:  # the native mapping cannot even build a spec: carry every field
        got = {}
    overrides = {k: v for k, v in want.items() if got.get(k, object()) != v}
    ext: dict[str, Any] = {"schema_version": EXTENSION_VERSION}
    if renames:
        ext["fixture_tables"] = renames
    if overrides:
        ext["overrides"] = overrides
    data[EXTENSION_KEY] = ext
    (d / "task.yaml").write_text(_dump_yaml(data), encoding="utf-8")
    return d


# ---------------------------------------------------------------- grading a Claw-Eval trace


def _fault(status: int) -> str | None:
    if status == 429:
        return "rate_limit"
    return "server_error" if status >= 500 else None


def grade_claw_trace(
    task_dir: Path,
    *,
    final_text: str,
    dispatches: Sequence[Mapping[str, Any]],
    audit_data: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, float]:
    """Grade a Claw-Eval trace of this task: ``{reward, completion, safety, robustness}`` (0 for None).

    ``dispatches`` are Claw-Eval ToolDispatch dicts (tool_name, request_body, response_status,
    response_body); ``audit_data`` is service → its ``/audit`` body (collections other than
    ``calls`` become records).
    """
    from coworkenv.grading.grader import Episode, grade
    from coworkenv.importers.claw_eval import import_task
    from coworkenv.services.registry import TOOLS
    from coworkenv.services.trial import AuditEvent

    spec, _ = import_task(Path(task_dir))
    events: list[AuditEvent] = []
    for n, d in enumerate(dispatches):
        tool = str(d.get("tool_name", ""))
        status = int(d.get("response_status", 200) or 200)
        tdef = TOOLS.get(tool)
        body = d.get("request_body") or {}
        events.append(
            AuditEvent(
                seq=n,
                trial_id="claw-eval",
                service=tdef.service if tdef else "",
                tool=tool,
                kind=tdef.kind if tdef else "unknown",
                args=dict(body) if isinstance(body, Mapping) else {},
                ok=status < 400,
                result=d.get("response_body"),
                status=status,
                fault=_fault(status),
            )
        )
    for svc, body in (audit_data or {}).items():
        records = [
            (str(key), dict(rec))
            for key, rows in body.items()
            if key != "calls" and isinstance(rows, list)
            for rec in rows
            if isinstance(rec, Mapping)
        ]
        if records:
            events.append(
                AuditEvent(
                    seq=len(events),
                    trial_id="claw-eval",
                    service=str(svc),
                    tool="",
                    kind="audit",
                    args={},
                    ok=True,
                    records=records,
                )
            )
    g = grade(spec, Episode(events=events, final_answer=final_text, transcript=final_text))
    return {
        "reward": g.reward or 0.0,
        "completion": g.completion or 0.0,
        "safety": g.safety,
        "robustness": g.robustness,
    }
