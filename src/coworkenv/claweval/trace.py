"""Our rollout record as a Claw-Eval trace (the JSONL its ``claw_eval.trace.reader`` loads).

Contract: :func:`to_trace_events` maps one :class:`~coworkenv.rollout.record.RolloutRecord` of a
task to the events Claw-Eval's runner would have written for the same run: ``trace_start``; one
``message`` per system/user/assistant message (assistant tool calls as ``tool_use`` blocks with the
arguments exactly as generated; consecutive tool results as one user message of ``tool_result``
blocks); one ``tool_dispatch`` per audited call (its route, the arguments the agent sent, the
status and body the service answered); one ``audit_snapshot`` per service (the body of
``GET /<service>/audit``: the calls its handlers answered plus every audit collection of the
service, empty ones included); ``trace_end``. Plain dicts, no Claw-Eval import: the JSON is the
interface.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from coworkenv.rollout.record import RolloutRecord
from coworkenv.services.trial import LoadedTask

BASE_URL = "http://localhost"


def _args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": value}


def _route(task: LoadedTask, tool: str) -> str:
    known = {**task.reachable, **task.tools}
    return known[tool].route if tool in known else ""


def to_trace_events(record: RolloutRecord, task: LoadedTask) -> list[dict[str, Any]]:
    """The trace events of ``record`` (a run of ``task``), in Claw-Eval's JSON shapes."""
    tid = record.rollout_id
    events: list[dict[str, Any]] = [
        {
            "type": "trace_start",
            "trace_id": tid,
            "task_id": record.task_id,
            "model": record.backend or "unknown",
        }
    ]
    sent = {c.id: _args(c.arguments) for m in record.messages for c in m.tool_calls}
    order = [(c.id, c.name) for m in record.messages for c in m.tool_calls]
    dispatches = _dispatches(record, task, order, sent)
    status_of = {d["tool_use_id"]: d["response_status"] for d in dispatches}
    results: list[dict[str, Any]] = []

    def flush() -> None:
        if results:
            events.append(_message(tid, "user", list(results)))
            results.clear()

    for m in record.messages:
        if m.role == "tool":
            text = m.content
            use_id = m.tool_call_id or ""
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use_id,
                    "content": [{"type": "text", "text": text}],
                    "is_error": status_of.get(use_id, 200) >= 400,
                }
            )
            continue
        flush()
        blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        for call in m.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": sent[call.id]})
        events.append(_message(tid, m.role, blocks))
    flush()
    if record.final_answer and not any(
        e["type"] == "message" and e["message"]["role"] == "assistant" for e in events[-1:]
    ):
        events.append(_message(tid, "assistant", [{"type": "text", "text": record.final_answer}]))
    events += dispatches
    events += _snapshots(record, task)
    events.append(
        {"type": "trace_end", "trace_id": tid, "total_turns": record.n_calls, "wall_time_s": record.wall_s}
    )
    return events


def _message(tid: str, role: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "trace_id": tid, "message": {"role": role, "content": blocks}}


def _dispatches(
    record: RolloutRecord, task: LoadedTask, order: list[tuple[str, str]], sent: Mapping[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One dispatch per audited call; the n-th call of a tool is matched to its n-th ``tool_use``."""
    pending: dict[str, list[str]] = {}
    for use_id, name in order:
        pending.setdefault(name, []).append(use_id)
    out: list[dict[str, Any]] = []
    for e in record.audit:
        tool = str(e.get("tool", ""))
        ids = pending.get(tool) or []
        use_id = ids.pop(0) if ids else f"call_{e.get('seq', len(out))}"
        body = e.get("result") if e.get("ok") else e.get("error")
        out.append(
            {
                "type": "tool_dispatch",
                "trace_id": record.rollout_id,
                "tool_use_id": use_id,
                "tool_name": tool,
                "endpoint_url": BASE_URL + _route(task, tool),
                "request_body": sent.get(use_id, e.get("args") or {}),
                "response_status": int(e.get("status", 200)),
                "response_body": body,
                "latency_ms": float(e.get("delay_s", 0.0)) * 1000,
            }
        )
    return out


def _snapshots(record: RolloutRecord, task: LoadedTask) -> list[dict[str, Any]]:
    out = []
    for name, cls in task.services.items():
        collections: dict[str, list[Any]] = {key: [] for key in cls.audit_keys}
        calls = []
        for e in record.audit:
            if e.get("service") != name:
                continue
            for key, rec in e.get("records") or []:
                collections.setdefault(str(key), []).append(rec)
            if e.get("ok"):
                calls.append(
                    {
                        "endpoint": _route(task, str(e.get("tool", ""))),
                        "request_body": e.get("args") or {},
                        "response_body": e.get("result"),
                        "timestamp": e.get("mock_time", ""),
                    }
                )
        out.append(
            {
                "type": "audit_snapshot",
                "trace_id": record.rollout_id,
                "service_name": name,
                "audit_url": f"{BASE_URL}/{name}/audit",
                "audit_data": {"calls": calls, **collections},
            }
        )
    return out
