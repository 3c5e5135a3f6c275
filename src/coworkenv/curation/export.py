"""SFT export: selected rollouts → conversational JSONL with tools, plus a stats summary.

Contract: each line is ``{"messages": [...], "tools": "<JSON list>", "task_id", "trial",
"harness", "reward", "source"}`` — ``messages`` in the shape of :func:`coworkenv.curation.convert.convert`,
``tools`` a JSON *string* of OpenAI function schemas (TRL's SFTTrainer ``json.loads`` a string
``tools`` column; a string keeps Arrow from merging different schemas across rows). It loads with
``datasets.load_dataset("json", data_files=path)``. The tools are those the model was offered in
the rollout's first captured call with tools (``<rollout_id>.calls.jsonl``), else the task's tools
from the registry (built-in task id), else the registry entries of the tools the conversation used.
``source`` is ``workflow`` (selection → conversion) or ``dialogue`` (highest-scoring multi-turn
trial per task). :class:`CurationReport` counts every record dropped, by stage and reason.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coworkenv.curation.convert import ConvertConfig, convert, dialogue_demos
from coworkenv.curation.select import SelectConfig, Selection, merge, read_score, record_reward, select
from coworkenv.proxy.capture import CapturedCall
from coworkenv.rollout.record import RolloutRecord, calls_path, read_records

Mode = Literal["workflow", "dialogue", "both"]


@dataclass
class CurationReport:
    collections: list[str] = field(default_factory=list)
    records_read: int = 0
    unreadable_lines: list[str] = field(default_factory=list)
    selection: Selection | None = None
    conversion_rejected: Counter[str] = field(default_factory=Counter)
    converted: int = 0
    dialogue: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        sel = self.selection
        rows = self.rows
        n = len(rows)

        def mean(xs: list[float]) -> float | None:
            return round(math.fsum(xs) / len(xs), 3) if xs else None

        return {
            "collections": self.collections,
            "records_read": self.records_read,
            "unreadable_lines": len(self.unreadable_lines),
            "pool_after_merge_dedup": sel.pool if sel else 0,
            "task_labels": dict(Counter(sel.labels.values())) if sel else {},
            "selection_dropped": dict(sel.dropped) if sel else {},
            "selected": len(sel.selected) if sel else 0,
            "conversion_candidates": (len(sel.selected) if sel else 0),
            "conversion_rejected": dict(self.conversion_rejected),
            "workflow_examples": self.converted,
            "dialogue_examples": self.dialogue,
            "exported": n,
            "mean_reward": mean([float(r["reward"]) for r in rows]),
            "mean_messages": mean([float(len(r["messages"])) for r in rows]),
            "mean_tool_calls": mean([float(sum(len(m["tool_calls"]) for m in r["messages"])) for r in rows]),
        }


def explain(stats: dict[str, Any], trivial_above: float) -> str:
    """One line on what :meth:`CurationReport.stats` selected and why (the ``curate`` summary)."""
    labels = stats.get("task_labels", {})
    dropped = stats.get("selection_dropped", {})
    parts = ", ".join(f"{labels.get(k, 0)} {k}" for k in ("KEEP", "TRIVIAL", "UNSOLVABLE", "UNREADABLE"))
    line = (
        f"{stats.get('pool_after_merge_dedup', 0)} rollouts of {sum(labels.values())} tasks ({parts}) → "
        f"{stats.get('selected', 0)} selected → {stats.get('exported', 0)} conversations exported"
    )
    why = [f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(dropped.items()) if n]
    if why:
        line += f"; dropped: {', '.join(why)}"
    if dropped.get("trivial_prefix_taken"):
        line += (
            f". TRIVIAL tasks (mean completion > {trivial_above:g}) keep one rollout per task prefix; "
            "to keep every perfect demonstration pass --trivial-above 1"
        )
    return line


def _registry_tools(names: list[str]) -> list[dict[str, Any]]:
    from coworkenv.services.registry import TOOLS

    out = []
    for name in names:
        t = TOOLS.get(name)
        params = t.input_schema() if t else {"type": "object", "properties": {}}
        desc = t.description if t else ""
        out.append(
            {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}
        )
    return out


def tools_for(record: RolloutRecord, root: Path | None) -> list[dict[str, Any]]:
    if root is not None:
        path = calls_path(root, record.rollout_id)
        if path.exists():
            with path.open(encoding="utf-8") as fh:
                for raw in fh:
                    try:
                        call = CapturedCall.model_validate_json(raw)
                    except ValueError:
                        continue
                    if call.request.tools:
                        return [{"type": "function", "function": t.model_dump()} for t in call.request.tools]
    try:
        from coworkenv.tasks.builtin import builtin_task

        return _registry_tools(list(builtin_task(record.task_id).tools))
    except KeyError:
        pass
    used: list[str] = []
    for m in record.messages:
        for tc in m.tool_calls:
            if tc.name not in used:
                used.append(tc.name)
    return _registry_tools(used)


def _row(
    record: RolloutRecord, messages: list[dict[str, Any]], root: Path | None, source: str
) -> dict[str, Any]:
    return {
        "messages": messages,
        "tools": json.dumps(tools_for(record, root), ensure_ascii=False),
        "task_id": record.task_id,
        "trial": record.trial,
        "harness": record.harness,
        "reward": record_reward(record) or 0.0,
        "source": source,
    }


def curate(
    dirs: list[Path],
    replacement: list[bool] | None = None,
    select_cfg: SelectConfig | None = None,
    convert_cfg: ConvertConfig | None = None,
    mode: Mode = "workflow",
) -> CurationReport:
    rep = CurationReport(collections=[str(d) for d in dirs])
    collections: list[list[RolloutRecord]] = []
    origin: dict[str, Path] = {}
    for d in dirs:
        records, problems = read_records(d / "rollouts.jsonl")
        rep.unreadable_lines += problems
        rep.records_read += len(records)
        collections.append(records)
        for r in records:
            origin.setdefault(r.rollout_id, d)
    scfg = select_cfg or SelectConfig()
    sel = select(collections, scfg, replacement)
    rep.selection = sel
    if mode in ("workflow", "both"):
        for r in sel.selected:
            msgs, why = convert(r.messages, convert_cfg)
            if msgs is None:
                rep.conversion_rejected[why or "?"] += 1
                continue
            rep.rows.append(_row(r, msgs, origin.get(r.rollout_id), "workflow"))
            rep.converted += 1
    if mode in ("dialogue", "both"):
        pool, _ = merge(collections, replacement or [False] * len(collections))
        scores = {r.rollout_id: s for r in pool if (s := read_score(r)) is not None}
        for r in dialogue_demos(pool, scores):
            msgs, why = convert(r.messages, convert_cfg, dialogue=True)
            if msgs is None:
                rep.conversion_rejected[f"dialogue_{why}"] += 1
                continue
            rep.rows.append(_row(r, msgs, origin.get(r.rollout_id), "dialogue"))
            rep.dialogue += 1
    return rep


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
