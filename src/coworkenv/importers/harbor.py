"""Import a Harbor task written by ``coworkenv package --format harbor`` back into a TaskSpec.

Contract: :func:`import_task` reassembles the spec from the files that carry each part — request
from ``instruction.md`` (the text before the environment marker), identity fields and limits from
``task.toml``, records/tools/workspace/user simulator from ``environment/services/task.json``, the
reference from ``solution/reference.json``, checks and hidden fields from ``tests/task.json`` — and
returns notes naming every part that differs from ``tests/task.json`` (the verifier's copy), so an
edit made after export is visible. Missing or malformed files raise :class:`SpecError` naming the
file and field.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from coworkenv.errors import SpecError, SpecIssue
from coworkenv.spec import TaskSpec

MARKER = "<!-- coworkenv:environment -->"
_META_FIELDS = {
    "task_id": "id",
    "name": "name",
    "category": "category",
    "difficulty": "difficulty",
    "language": "language",
    "mock_today": "mock_today",
    "tags": "tags",
    "source": "source",
}
_SERVING_FIELDS = ("services", "tools", "workspace", "user_sim")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.single(path, "", "missing (not a coworkenv Harbor package?)") from None


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as e:
        raise SpecError.single(path, "", f"invalid JSON: {e}") from None
    if not isinstance(data, dict):
        raise SpecError.single(path, "", "expected a JSON object")
    return data


def import_task(task_dir: Path) -> tuple[TaskSpec, list[str]]:
    d = Path(task_dir)
    base = _json(d / "tests" / "task.json")
    data = dict(base)
    visible: dict[str, tuple[str, Any]] = {}  # field -> (file, value)

    text = _read(d / "instruction.md")
    request, found, _ = text.rpartition("\n\n" + MARKER)
    if not found:
        raise SpecError.single(d / "instruction.md", "", f"no {MARKER} line after the request")
    visible["request"] = ("instruction.md", request)

    toml_path = d / "task.toml"
    try:
        toml = tomllib.loads(_read(toml_path))
    except tomllib.TOMLDecodeError as e:
        raise SpecError.single(toml_path, "", f"invalid TOML: {e}") from None
    meta = toml.get("metadata", {})
    for key, fld in _META_FIELDS.items():
        if key in meta:
            visible[fld] = ("task.toml", meta[key])
    limits = dict(base.get("limits") or {})
    if "max_turns" in meta:
        limits["max_turns"] = meta["max_turns"]
    if "timeout_sec" in toml.get("agent", {}):
        limits["timeout_s"] = toml["agent"]["timeout_sec"]
    visible["limits"] = ("task.toml", limits)

    serving = _json(d / "environment" / "services" / "task.json")
    for fld in _SERVING_FIELDS:
        visible[fld] = ("environment/services/task.json", serving.get(fld))
    ref = _json(d / "solution" / "reference.json")
    steps = [
        {"text": s["user"]} if "user" in s else {"tool": s["tool"], "args": s.get("args", {})}
        for s in ref.get("steps", [])
    ]
    visible["reference"] = (
        "solution/reference.json",
        {
            "steps": steps,
            "final_message": ref.get("final_message", ""),
            "text": ref.get("text", ""),
        },
    )

    notes: list[str] = []
    try:
        base_spec = TaskSpec.model_validate(base)
    except ValidationError as e:
        raise SpecError(
            d / "tests" / "task.json", [SpecIssue(".".join(map(str, x["loc"])), x["msg"]) for x in e.errors()]
        ) from None
    for fld, (_fname, value) in visible.items():
        data[fld] = value
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as e:
        issues = [SpecIssue(".".join(str(p) for p in err["loc"]), err["msg"]) for err in e.errors()]
        raise SpecError(d, issues) from None
    for fld, (fname, _) in visible.items():
        if getattr(spec, fld) != getattr(base_spec, fld):
            notes.append(
                f"{fld} from {fname} differs from tests/task.json (the verifier grades with the latter)"
            )
    return spec, notes
