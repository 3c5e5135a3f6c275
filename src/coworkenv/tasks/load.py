"""Loading task files: JSON or YAML, a file or a task directory, all-or-nothing with clear errors.

``load_spec(path)`` returns a :class:`~coworkenv.spec.TaskSpec` or raises
:class:`~coworkenv.errors.SpecError` naming the file, every offending field and what was expected.
``check_references`` adds the rules that need the service registry: services exist, the exposed
tools exist and belong to the task's services, checks and forbidden actions name exposed tools and
known audit collections.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from coworkenv.errors import SpecError, SpecIssue
from coworkenv.spec import CHECK_KINDS, AuditPresent, StateCheck, TaskSpec, ToolArgs, ToolCalled

TASK_FILE_NAMES = ("task.json", "spec.json", "task.yaml")


def read_data(path: Path) -> Any:
    """Parse a JSON or YAML file, turning syntax errors into a SpecError with the position."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.single(path, "", "file not found") from None
    except (IsADirectoryError, UnicodeDecodeError) as e:
        raise SpecError.single(path, "", f"cannot read: {e}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError.single(
            path, "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except yaml.YAMLError as e:
        raise SpecError.single(path, "", f"invalid YAML: {e}") from None


def issues_from_validation(err: ValidationError) -> list[SpecIssue]:
    out = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not (isinstance(p, str) and p in _UNION_TAGS))
        got = e.get("input")
        shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
        out.append(SpecIssue(loc, f"{e['msg']}{shown}"))
    return out


_UNION_TAGS = frozenset(CHECK_KINDS)


def resolve_task_file(path: Path) -> Path:
    if path.is_dir():
        for name in TASK_FILE_NAMES:
            if (path / name).exists():
                return path / name
        raise SpecError.single(path, "", f"no task file in directory; expected one of {TASK_FILE_NAMES}")
    return path


def spec_from_data(data: Any, source: str | Path) -> TaskSpec:
    if not isinstance(data, dict):
        raise SpecError.single(source, "", f"expected a mapping at the top level, got {type(data).__name__}")
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(source, issues_from_validation(e)) from None
    check_references(spec, source)
    return spec


def load_spec(path: str | Path) -> TaskSpec:
    """Load and fully validate one task (file or directory). A Claw-Eval task directory (or its
    ``task.yaml``) is imported on the fly (:func:`coworkenv.importers.claw_eval.import_task`)."""
    p = resolve_task_file(Path(path))
    data = read_data(p)
    if is_claw_eval_task(p, data):
        from coworkenv.importers.claw_eval import import_task

        try:
            return import_task(p.parent)[0]
        except SpecError as e:
            hint = "a Claw-Eval task that does not import; `coworkenv import claw-eval DIR` reports why"
            raise SpecError(e.source, [*e.issues, SpecIssue("", hint)]) from None
    return spec_from_data(data, p)


def is_claw_eval_task(path: Path, data: Any) -> bool:
    """Whether ``path`` (a ``task.yaml``) holds a Claw-Eval task, not one of ours: Claw-Eval's keys
    (``task_id``, ``prompt``, ``scoring_components``, ``tool_endpoints``) and none of our ``id`` /
    ``request``."""
    if path.name != "task.yaml" or not isinstance(data, dict) or {"id", "request"} & set(data):
        return False
    return bool(_CLAW_EVAL_KEYS & set(data))


_CLAW_EVAL_KEYS = frozenset({"task_id", "task_name", "prompt", "scoring_components", "tool_endpoints"})


def check_references(spec: TaskSpec, source: str | Path) -> None:
    """Registry rules; raises SpecError listing every problem.

    A task of the Claw-Eval profile is checked against that profile's services and routes
    (:func:`coworkenv.services.trial.load_task`), not against our strict registry."""
    from coworkenv.services.registry import SERVICES, TOOLS

    if spec.profile == "claw-eval":
        from coworkenv.services.trial import load_task

        load_task(spec, str(source))
        return

    issues: list[SpecIssue] = []
    for name, records in spec.services.items():
        if name not in SERVICES:
            issues.append(SpecIssue(f"services.{name}", f"unknown service; registered: {sorted(SERVICES)}"))
            continue
        try:
            SERVICES[name].load_fixture(records, str(source))
        except SpecError as e:
            issues.extend(e.issues)
    for i, tname in enumerate(spec.tools):
        tdef = TOOLS.get(tname)
        if tdef is None:
            issues.append(SpecIssue(f"tools[{i}]", f"unknown tool {tname!r}"))
        elif tdef.service not in spec.services:
            issues.append(
                SpecIssue(f"tools[{i}]", f"tool {tname!r} needs service {tdef.service!r}, not in services")
            )
    exposed = set(spec.tools)
    for i, c in enumerate(spec.completion_checks):
        where = f"completion_checks[{i}]"
        if isinstance(c, ToolCalled | ToolArgs) and c.tool not in exposed:
            issues.append(SpecIssue(f"{where}.tool", f"{c.tool!r} is not an exposed tool of this task"))
        if isinstance(c, AuditPresent | StateCheck) and c.service not in spec.services:
            issues.append(SpecIssue(f"{where}.service", f"{c.service!r} is not a service of this task"))
        if isinstance(c, AuditPresent) and c.service in SERVICES:
            keys = SERVICES[c.service].audit_keys
            if c.action_key not in keys:
                issues.append(
                    SpecIssue(
                        f"{where}.action_key",
                        f"{c.action_key!r} not an audit key of {c.service}; expected one of {list(keys)}",
                    )
                )
        if isinstance(c, StateCheck) and c.service in SERVICES and c.table not in SERVICES[c.service].tables:
            issues.append(
                SpecIssue(
                    f"{where}.table",
                    f"{c.table!r} not a table of {c.service}; "
                    f"expected one of {sorted(SERVICES[c.service].tables)}",
                )
            )
    for i, f in enumerate(spec.forbidden):
        if f.tool not in TOOLS:
            issues.append(SpecIssue(f"forbidden[{i}].tool", f"unknown tool {f.tool!r}"))
    for i, fx in enumerate(spec.forbidden_effects):
        where = f"forbidden_effects[{i}]"
        if fx.service not in spec.services:
            issues.append(SpecIssue(f"{where}.service", f"{fx.service!r} is not a service of this task"))
        elif fx.collection is not None and fx.service in SERVICES:
            if fx.collection not in SERVICES[fx.service].audit_keys:
                audit_keys = list(SERVICES[fx.service].audit_keys)
                msg = f"{fx.collection!r} not an audit key of {fx.service}; expected one of {audit_keys}"
                issues.append(SpecIssue(f"{where}.collection", msg))
        elif fx.table is not None and fx.service in SERVICES and fx.table not in SERVICES[fx.service].tables:
            issues.append(
                SpecIssue(
                    f"{where}.table",
                    f"{fx.table!r} not a table of {fx.service}; "
                    f"expected one of {sorted(SERVICES[fx.service].tables)}",
                )
            )
    for i, a in enumerate(spec.expected_actions):
        if a.service in SERVICES and a.action_key not in SERVICES[a.service].audit_keys:
            issues.append(
                SpecIssue(
                    f"expected_actions[{i}].action_key",
                    f"{a.action_key!r} not an audit key of {a.service}; "
                    f"expected one of {list(SERVICES[a.service].audit_keys)}",
                )
            )
    for i, step in enumerate(spec.reference.steps):
        tool_name = getattr(step, "tool", None)
        if tool_name is not None and tool_name not in exposed and not tool_name.startswith("workspace."):
            issues.append(
                SpecIssue(f"reference.steps[{i}].tool", f"{tool_name!r} is not an exposed tool of this task")
            )
    if issues:
        raise SpecError(source, issues)
