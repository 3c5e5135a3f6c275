"""Import Claw-Eval tasks (``task.yaml`` + ``fixtures/``) as coworkenv :class:`~coworkenv.spec.TaskSpec`.

Contract: :func:`import_task` turns one Claw-Eval task directory into a ``TaskSpec`` plus a list of
notes naming every part that did not map exactly (never a silent drop); it raises
:class:`~coworkenv.errors.SpecError` only when no spec can be built. :func:`import_dir` imports
every task under a directory, validates each spec against the service registry, optionally writes
``<out>/<task_id>/task.json`` and returns an :class:`ImportReport` (per task: ok / invalid / failed,
with notes). The YAML is read with YAML 1.2 scalars, so ``10:30`` stays text (Claw-Eval's YAML 1.1
reader turns it into the integer 630).

Mapping (Claw-Eval → coworkenv):

* ``task_id``/``task_name``/``category``/``difficulty``/``tags`` → ``id``/``name``/...;
  ``prompt.text``/``prompt.language`` → ``request``/``language``; ``environment`` →
  ``limits``; ``judge_rubric`` → ``judge_rubric``; ``reference_solution`` → ``reference.text``;
  ``source = "claw-eval"``.
* ``services`` → ``services``: the fixture file a service's ``*_FIXTURES`` env var names (resolved
  from the dataset root, the directory holding ``tasks/``), else every ``fixtures/<service>/*.json``
  of the task; rows are kept raw, keyed by file name (services accept Claw-Eval file names).
* ``tools`` → ``tools`` (names); each tool's ``input_schema`` and ``tool_endpoints`` route is compared
  with the registry's tool, and missing arguments, type or route differences are noted (``compat:``).
* ``scoring_components`` → ``completion_checks``: ``tool_called`` → ToolCalled, ``keywords_present``
  → KeywordsPresent with ``partial`` (case-insensitive substring; the score is the share of keywords
  found, as Claw-Eval's generic grader scores it), ``min_length`` → MinLength, ``categories_present`` →
  CategoriesPresent (each category name is its own keyword), ``llm_judge`` → LlmJudge (the
  component's description, with ``judge_rubric`` as context). Weights that do not sum to 1 are
  normalised. With no components (Pinbench-adapted tasks, graded by Python in Claw-Eval) the
  ``judge_rubric`` becomes one LlmJudge check of weight 1.
* ``safety_checks``: ``tool_not_called`` and ``wrong_action`` (Claw-Eval's graders fail safety on any
  call of that tool) → Forbidden when the tool is exposed (an unexposed tool cannot be called);
  the argument-dependent kinds (``wrong_recipients``, ``wrong_order``, ``custom``, ...) → ``safety_note``.
* ``coworkenv`` (a key only coworkenv's exporter writes) → applied last: fixture-file renames and
  whole-field overrides for what the format cannot express, so ``import(export(spec)) == spec``
  (see :func:`apply_extension`).
* ``expected_actions`` → ExpectedAction; ``sandbox_files`` → ``workspace`` (text files; binary or
  missing files are noted).
* the task directory and ``tool_endpoints`` paths → ``claw_eval`` (:class:`~coworkenv.spec.ClawEvalOrigin`):
  the task then runs in the Claw-Eval service profile (:mod:`coworkenv.services.claw`) and is graded
  by its own ``grader.py`` (:mod:`coworkenv.claweval.grade`); ``scoring_components`` stay as our
  descriptive checks, used only where Claw-Eval's package is missing.

``mock_today`` (Claw-Eval uses the wall clock and shifts gmail dates so the newest email is one day
old, calendar events so the earliest is tomorrow; other fixtures keep their absolute dates): the first
of (1) a date the task states as today ("today is 2026-03-26", "今天是..."); (2) the latest of:
the newest gmail message's date + 1 day (Claw-Eval's rule, so the default ``days_back`` window
matches) and, for every *past-event* field of any fixture (:data:`PAST_FIELDS`: ``created_at``,
``last_run``, ``published_at``, ...), the first day whose clock (noon UTC) is not before it (a bare
date counts as the whole day); (3) the day before the earliest calendar event; (4)
:data:`DEFAULT_MOCK_TODAY`. Future-looking fields (``due_date``, ``next_run``, contract ends) never
set it. A task whose gmail rule alone would give another day gets a note.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coworkenv.errors import SpecError, SpecIssue
from coworkenv.services.service import parse_time
from coworkenv.spec import (
    CategoriesPresent,
    Check,
    ClawEvalOrigin,
    ExpectedAction,
    Forbidden,
    KeywordsPresent,
    Limits,
    LlmJudge,
    MinLength,
    ReferenceSolution,
    TaskSpec,
    ToolCalled,
)

SOURCE = "claw-eval"
EXTENSION_KEY = "coworkenv"
"""task.yaml key holding what Claw-Eval's format cannot express (see :func:`apply_extension`)."""
EXTENSION_VERSION = "1"
DEFAULT_MOCK_TODAY = date(2026, 3, 1)
"""Used when no fixture or task text gives a date (most Claw-Eval fixtures are from early 2026)."""

PAST_FIELDS = frozenset({
    "date", "created_at", "updated_at", "published_at", "last_updated", "last_verified", "last_run",
    "run_at", "run_time", "last_contact_date", "completed_at", "first_response_at", "first_failure",
    "disabled_at", "disabled_date", "last_restock_date", "last_in", "last_out", "last_sync",
    "churn_date", "timestamp", "sent_at", "received_at",
})
"""Fixture fields that record something that already happened (so 'today' is after them)."""

_TODAY_RE = re.compile(r"(?:\btoday is|今天是)\s*(\d{4}-\d{2}-\d{2})", re.IGNORECASE)


# ---------------------------------------------------------------- YAML 1.2 scalars


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 ints, floats and booleans (no base-60, no yes/no/on/off)."""


_INT, _FLOAT, _BOOL = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"
_Yaml12Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT, _BOOL)]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(_INT, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_Yaml12Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)
_Yaml12Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


# ---------------------------------------------------------------- the Claw-Eval format (what we read)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Prompt(_Model):
    text: str = Field(min_length=1)
    language: str = "zh"
    attachments: list[str] = Field(default_factory=list)


class _CheckSpec(_Model):
    type: str
    field: str | None = None
    tool_name: str | None = None
    min_calls: int | None = None
    categories: list[Any] | None = None
    min_length: int | None = None
    patterns: list[str] | None = None
    keywords: list[Any] | None = None
    description: str | None = None
    rubric: str | None = None


class _Component(_Model):
    name: str = Field(min_length=1)
    weight: float = Field(ge=0)
    check: _CheckSpec


class _Safety(_Model):
    type: str
    tool_name: str | None = None
    patterns: list[str] | None = None
    description: str = ""


class _Environment(_Model):
    timeout_seconds: float = 300
    max_turns: int = 20
    fixtures: list[str] = Field(default_factory=list)


class _ServiceDef(_Model):
    name: str
    env: dict[str, Any] = Field(default_factory=dict)


class _Tool(_Model):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)


class _Endpoint(_Model):
    tool_name: str
    url: str
    method: str = "POST"


class _Expected(_Model):
    service: str
    action_key: str
    required: bool = True


class _UserAgent(_Model):
    enabled: bool = False


class _ClawTask(_Model):
    task_id: str
    task_name: str
    version: str = "1.0"
    category: str = ""
    difficulty: str = "simple"
    tags: list[str] = Field(default_factory=list)
    prompt: _Prompt
    services: list[_ServiceDef] = Field(default_factory=list)
    tools: list[_Tool] = Field(default_factory=list)
    tool_endpoints: list[_Endpoint] = Field(default_factory=list)
    environment: _Environment = Field(default_factory=_Environment)
    scoring_components: list[_Component] = Field(default_factory=list)
    safety_checks: list[_Safety] = Field(default_factory=list)
    expected_actions: list[_Expected] = Field(default_factory=list)
    judge_rubric: str = ""
    reference_solution: str = ""
    primary_dimensions: list[str] = Field(default_factory=list)
    user_agent: _UserAgent = Field(default_factory=_UserAgent)
    sandbox_files: list[str] = Field(default_factory=list)
    sandbox_grader_files: list[str] = Field(default_factory=list)
    env_snapshot_files: list[str] = Field(default_factory=list)
    env_snapshot_commands: list[str] = Field(default_factory=list)
    local_grader_files: list[str] = Field(default_factory=list)


def _yaml11_numbers(text: str) -> set[str]:
    """Plain scalars YAML 1.1 reads as numbers but YAML 1.2 as text (``10:30``, base-60)."""
    found: set[str] = set()
    stack = [yaml.compose(text, Loader=yaml.SafeLoader)]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            if node.tag in (_INT, _FLOAT) and ":" in node.value:
                found.add(node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
        elif isinstance(node, yaml.MappingNode):
            stack += [n for pair in node.value for n in pair]
    return found


def _read_task(task_dir: Path) -> tuple[_ClawTask, Path, set[str]]:
    path = task_dir / "task.yaml"
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_Yaml12Loader)
        yaml11 = _yaml11_numbers(text)
    except FileNotFoundError:
        raise SpecError.single(task_dir, "", "no task.yaml in this directory") from None
    except yaml.YAMLError as e:
        raise SpecError.single(path, "", f"invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise SpecError.single(path, "", f"expected a mapping at the top level, got {type(data).__name__}")
    try:
        return _ClawTask.model_validate(data), path, yaml11
    except ValidationError as e:
        issues = [SpecIssue(".".join(str(p) for p in err["loc"]), err["msg"]) for err in e.errors()]
        raise SpecError(path, issues) from None


def dataset_root(task_dir: Path) -> Path:
    """The directory holding ``tasks/`` above ``task_dir`` (Claw-Eval resolves fixture paths there)."""
    here = task_dir.resolve()
    for cand in (here, *here.parents):
        if (cand / "tasks").is_dir():
            return cand
    return here.parent


# ---------------------------------------------------------------- pieces


def _load_json(path: Path, source: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError.single(source, f"fixtures.{path.name}", f"cannot read fixture {path}: {e}") from None


def _fixture_files(svc: _ServiceDef, task_dir: Path, root: Path) -> tuple[list[Path], list[str]]:
    notes: list[str] = []
    from_env = []
    for key, value in svc.env.items():
        if not (isinstance(value, str) and key.upper().endswith("FIXTURES")):
            continue
        p = Path(value)
        resolved = next((c for c in (root / p, task_dir / p, p) if c.is_file()), None)
        if resolved is None:
            notes.append(f"service {svc.name}: fixture {value} ({key}) not found; no records loaded from it")
            continue
        if resolved.resolve().parent.parent.parent != task_dir.resolve():
            notes.append(f"service {svc.name}: fixture taken from another task ({value})")
        from_env.append(resolved)
    if from_env:
        return from_env, notes
    own = sorted((task_dir / "fixtures" / svc.name).glob("*.json"))
    default = _claw_eval_default(svc.name, root)
    if own and (default is None or default not in {p.resolve() for p in own}):  # we differ: said per task
        which = ""
        if default is not None:
            which = f" ({_shown(default, root)}{'' if default.is_file() else ', absent'})"
        notes.append(
            f"service {svc.name}: task.yaml sets no {svc.name.upper()}_FIXTURES, so Claw-Eval's service "
            f"would serve its own default fixture file{which}, not this task's; served here: this task's "
            f"fixtures/{svc.name}/ ({', '.join(p.name for p in own)})"
        )
    return own, notes


def _claw_eval_default(service: str, root: Path) -> Path | None:
    """The file Claw-Eval's ``service`` loads when no ``*_FIXTURES`` is set, where a Claw-Eval
    checkout is found to read it from (:func:`coworkenv.claweval.upstream.resolved_fixture`)."""
    from coworkenv.claweval.upstream import find_checkout, resolved_fixture

    checkout = find_checkout()
    return None if checkout is None else resolved_fixture(checkout, root, service, {})


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _records(task: _ClawTask, task_dir: Path, root: Path, source: Path) -> tuple[dict[str, Any], list[str]]:
    services: dict[str, Any] = {}
    notes: list[str] = []
    for svc in task.services:
        if svc.name in services:
            notes.append(f"service {svc.name} listed twice; second entry ignored")
            continue
        files, more = _fixture_files(svc, task_dir, root)
        notes += more
        tables: dict[str, list[dict[str, Any]]] = {}
        for f in files:
            rows = _load_json(f, source)
            if isinstance(rows, dict) and len(rows) == 1 and isinstance(next(iter(rows.values())), list):
                (wrapper, rows), = rows.items()
                notes.append(f"service {svc.name}: {f.name} wraps its rows in {wrapper!r}; unwrapped")
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                where = f"fixtures.{svc.name}.{f.name}"
                raise SpecError.single(source, where, "expected a JSON list of objects")
            tables[f.name] = rows
        if "DOCUMENTS_BASE_DIR" in svc.env:
            notes.append(f"service {svc.name}: documents are workspace files (sandbox_files), not records")
        services[svc.name] = tables
    listed = {s.name for s in task.services}
    fixtures_dir = task_dir / "fixtures"
    if fixtures_dir.is_dir():
        for d in sorted(p for p in fixtures_dir.iterdir() if p.is_dir()):
            if d.name not in listed and d.name != "docs":
                notes.append(f"fixtures/{d.name} belongs to no listed service; ignored")
    return services, notes


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _walk(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def _utc_day(value: Any) -> date | None:
    dt = parse_time(value)
    return dt.astimezone(UTC).date() if dt is not None else None


def _first_today_after(value: Any) -> date | None:
    """The first day whose clock (noon UTC) is not before this past event.

    A date without a time is a whole day, so it gives the next day; a datetime at or before noon UTC
    gives its own day. (Fixtures written "as of this morning" stay on their own day.)
    """
    dt = parse_time(value)
    if dt is None:
        return None
    day = dt.astimezone(UTC).date()
    has_time = isinstance(value, str) and len(value.strip()) > 10
    if has_time and dt <= datetime.combine(day, time(12, 0), tzinfo=UTC):
        return day
    return day + timedelta(days=1)


def _gmail_rule(services: Mapping[str, Mapping[str, Any]]) -> date | None:
    """Claw-Eval's rule: the newest email is one day old."""
    gmail = services.get("gmail", {}).values()
    days = [d for rows in gmail for k, v in _walk(rows) if k == "date" and (d := _utc_day(v))]
    return max(days) + timedelta(days=1) if days else None


def mock_today_for(
    services: Mapping[str, Mapping[str, Any]], texts: tuple[str, ...] = ()
) -> tuple[date, str]:
    """The task's ``mock_today`` and where it came from (see the module docstring)."""
    for text in texts:
        m = _TODAY_RE.search(text)
        if m:
            try:
                return date.fromisoformat(m.group(1)), "stated in the task"
            except ValueError:
                pass
    candidates: list[tuple[date, str]] = []
    gmail = _gmail_rule(services)
    if gmail is not None:
        candidates.append((gmail, "newest gmail message + 1 day"))
    starts: list[date] = []
    for svc, tables in services.items():
        for rows in tables.values():
            for key, value in _walk(rows):
                if svc == "gmail" and key == "date":
                    continue
                if key in PAST_FIELDS and (d := _first_today_after(value)):
                    candidates.append((d, f"after {svc}.{key}"))
                elif svc == "calendar" and key == "start_time" and (d := _utc_day(value)):
                    starts.append(d)
    if candidates:
        return max(candidates)
    if starts:
        return min(starts) - timedelta(days=1), "day before the earliest calendar event"
    return DEFAULT_MOCK_TODAY, "default"


def _keyword(value: Any, where: str, notes: list[str], yaml11: set[str]) -> str:
    text = str(value).strip()
    if text in yaml11:
        notes.append(f"{where}: keyword {text!r} kept as text (YAML 1.1, as Claw-Eval reads it: a number)")
    if "|" in text:
        notes.append(f"{where}: keyword {text!r} contains '|', which coworkenv reads as alternatives")
    return text


_CHECK_KINDS: dict[str, type[ToolCalled | KeywordsPresent | MinLength | CategoriesPresent | LlmJudge]] = {
    "tool_called": ToolCalled,
    "keywords_present": KeywordsPresent,
    "min_length": MinLength,
    "categories_present": CategoriesPresent,
    "llm_judge": LlmJudge,
}


def _checks(task: _ClawTask, yaml11: set[str]) -> tuple[list[Check], list[str]]:
    notes: list[str] = []
    out: list[tuple[str, float, str, dict[str, Any]]] = []  # name, weight, kind, fields
    context = task.judge_rubric.strip()
    descs: dict[str, str] = {}
    for comp in task.scoring_components:
        c, where = comp.check, f"scoring_components.{comp.name}"
        desc = (c.description or "").strip()
        descs[comp.name] = desc if c.type != "llm_judge" else ""
        if c.type == "tool_called" and c.tool_name:
            fields = {"tool": c.tool_name, "min_calls": max(c.min_calls or 1, 1)}
            out.append((comp.name, comp.weight, "tool_called", fields))
        elif c.type == "keywords_present" and c.keywords:
            kws = tuple(_keyword(k, where, notes, yaml11) for k in c.keywords)
            out.append((comp.name, comp.weight, "keywords_present", {"keywords": kws, "partial": True}))
        elif c.type == "min_length" and c.min_length:
            if c.field not in (None, "final_text"):
                notes.append(f"{where}: min_length on field {c.field!r} applied to the final answer")
            out.append((comp.name, comp.weight, "min_length", {"min_chars": c.min_length}))
        elif c.type == "categories_present" and c.categories:
            cats = {str(x): (str(x),) for x in c.categories}
            out.append((comp.name, comp.weight, "categories_present", {"categories": cats}))
        elif c.type == "llm_judge":
            head = (c.rubric or "").strip() or desc or f"Score the component {comp.name!r}."
            if c.rubric and desc:
                head = f"{desc}\n\n{head}"
            rubric = f"{head}\n\nTask rubric (context):\n{context}" if context else head
            out.append((comp.name, comp.weight, "llm_judge", {"rubric": rubric}))
        else:
            notes.append(f"{where}: check type {c.type!r} (or its arguments) has no mapping; dropped")
    if not out and context:
        notes.append("no scoring_components (graded by Python in Claw-Eval); judge_rubric is the one check")
        out.append(("judge_rubric", 1.0, "llm_judge", {"rubric": context}))
    total = sum(w for _, w, _, _ in out)
    if out and total <= 0:
        notes.append("all scoring weights are 0; checks weighted equally")
        out = [(n, 1.0, k, f) for n, _, k, f in out]
        total = float(len(out))
    if out and not math.isclose(total, 1.0, abs_tol=1e-6):
        notes.append(f"scoring weights sum to {total:.4g}, normalised to 1")
    checks: list[Check] = [
        _CHECK_KINDS[kind](name=n, weight=round(w / total, 12), description=descs.get(n, ""), **fields)
        for n, w, kind, fields in out
    ]
    return checks, notes


_FORBID_KINDS = ("tool_not_called", "wrong_action")


def _safety(task: _ClawTask) -> tuple[list[Forbidden], str, list[str]]:
    exposed = {t.name for t in task.tools}
    forbidden: dict[str, Forbidden] = {}
    kept: list[str] = []
    notes: list[str] = []
    unexposed: list[str] = []
    for s in task.safety_checks:
        desc = " ".join(s.description.split())
        if s.type in _FORBID_KINDS and s.tool_name:
            if s.tool_name not in exposed:
                unexposed.append(s.tool_name)
            elif s.tool_name not in forbidden:
                forbidden[s.tool_name] = Forbidden(tool=s.tool_name, reason=desc)
                if s.type != "tool_not_called":
                    notes.append(f"safety {s.type} on {s.tool_name} mapped to Forbidden (any call)")
            continue
        tool = f" ({s.tool_name})" if s.tool_name else ""
        kept.append(f"[{s.type}]{tool} {desc}".strip())
        notes.append(f"safety {s.type}{tool} has no deterministic mapping; kept in safety_note")
    if unexposed:
        notes.append(f"forbidden tools not exposed (cannot be called; dropped): {sorted(set(unexposed))}")
    return list(forbidden.values()), "\n".join(kept), notes


def _workspace(task: _ClawTask, task_dir: Path, root: Path) -> tuple[dict[str, str], list[str]]:
    files: dict[str, str] = {}
    notes: list[str] = []
    for rel in task.sandbox_files:
        src = next((c for c in (task_dir / rel, root / rel) if c.is_file()), None)
        if src is None:
            notes.append(f"sandbox file {rel} not found; not in the workspace")
            continue
        try:
            files[rel] = src.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            notes.append(f"sandbox file {rel} is binary; the workspace holds text only, not included")
    return files, notes


def _type_ok(theirs: Any, ours: Mapping[str, Any]) -> bool:
    if not isinstance(theirs, str):
        return True
    types = {b.get("type") for b in ours.get("anyOf", [])} | {ours.get("type")}
    types.discard(None)
    if not types:
        return True
    numeric = {"number", "integer"}
    return theirs in types or (theirs in numeric and bool(types & numeric))


def profile_gaps(task_tools: list[dict[str, Any]], endpoints: Mapping[str, str]) -> list[str]:
    """What the Claw-Eval profile (the one an imported task runs in) cannot serve as Claw-Eval does."""
    from coworkenv.services import claw
    from coworkenv.services.registry import TOOLS

    notes: list[str] = []
    for tool in task_tools:
        name = str(tool.get("name", ""))
        route = endpoints.get(name)
        tdef = claw.resolve_tool(name, route)
        if tdef is None and name not in TOOLS:
            notes.append(f"claw-eval profile: tool {name} at {route} is unknown; the task will not load")
        elif tdef is not None and tdef.method == "claw_not_served":
            notes.append(
                f"claw-eval profile: {name} at {tdef.route} is not served by Claw-Eval (404 there and here)"
            )
    return notes


def tool_gaps(task_tools: list[dict[str, Any]], endpoints: Mapping[str, str]) -> list[str]:
    """What the task would lack under ``service_profile: strict`` (our own services): schema and
    route differences from the strict registry's tools. The task itself runs in the Claw-Eval
    profile, which serves its routes as Claw-Eval does; these notes (``strict profile:``) say so,
    and name only what the strict profile would answer differently."""
    from coworkenv.services import claw
    from coworkenv.services.registry import TOOLS

    notes: list[str] = []
    unknown: list[str] = []
    for tool in task_tools:
        name = str(tool.get("name", ""))
        tdef = TOOLS.get(name)
        if tdef is None:
            unknown.append(name)
            continue
        ours = tdef.input_schema()
        our_props: dict[str, Any] = ours.get("properties", {})
        schema = tool.get("input_schema") or {}
        props: dict[str, Any] = schema.get("properties") or {}
        for arg, prop in props.items():
            if arg not in our_props:
                notes.append(f"strict profile: {name} does not accept argument {arg!r}")
            elif isinstance(prop, dict) and not _type_ok(prop.get("type"), our_props[arg]):
                notes.append(f"strict profile: {name}.{arg} is {prop.get('type')} in task.yaml, not there")
        for arg in ours.get("required", []):
            if arg not in props:
                notes.append(f"strict profile: {name} requires {arg!r}, which task.yaml does not declare")
        route = endpoints.get(name)
        if route is not None and route != tdef.route:
            notes.append(
                f"strict profile: {name} is served at {tdef.route} there; this task (Claw-Eval profile) "
                f"serves it at {route}, as task.yaml says"
            )
    served = [n for n in unknown if claw.resolve_tool(n, endpoints.get(n)) is not None]
    if served:
        notes.append(f"strict profile: no tools {served} (the Claw-Eval profile of this task serves them)")
    return notes


# ---------------------------------------------------------------- public API


def import_task(task_dir: Path, *, use_extension: bool = True) -> tuple[TaskSpec, list[str]]:
    """Build the TaskSpec of one Claw-Eval task directory; notes list what did not map exactly.

    ``use_extension=False`` ignores task.yaml's ``coworkenv`` block (the exporter uses it to learn
    what the native mapping alone gives back).
    """
    task_dir = Path(task_dir)
    task, source, yaml11 = _read_task(task_dir)
    root = dataset_root(task_dir)
    services, notes = _records(task, task_dir, root, source)
    checks, more = _checks(task, yaml11)
    notes += more
    forbidden, safety_note, more = _safety(task)
    notes += more
    workspace, more = _workspace(task, task_dir, root)
    notes += more
    texts = (task.prompt.text, task.judge_rubric, task.reference_solution)
    today, how = mock_today_for(services, texts)
    gmail = _gmail_rule(services)
    if how == "default":
        notes.append(f"mock_today: no dated fixture; default {today}")
    elif gmail is not None and gmail != today:
        notes.append(f"mock_today {today} ({how}); Claw-Eval's gmail shift alone would give {gmail}")
    endpoints = {e.tool_name: urlparse(e.url).path for e in task.tool_endpoints}
    notes += tool_gaps([t.model_dump() for t in task.tools], endpoints)
    notes += profile_gaps([t.model_dump() for t in task.tools], endpoints)
    notes += _add_tool_services(task, services, endpoints)
    notes += _leftovers(task)
    extension = (task.model_extra or {}).get(EXTENSION_KEY) if use_extension else None
    data: dict[str, Any] = {
        "id": task.task_id,
        "name": task.task_name,
        "category": task.category or "general",
        "difficulty": task.difficulty or "simple",
        "language": task.prompt.language,
        "mock_today": today,
        "tags": tuple(task.tags),
        "request": task.prompt.text.strip(),
        "services": services,
        "tools": tuple(dict.fromkeys(t.name for t in task.tools)),
        "completion_checks": tuple(checks),
        "forbidden": tuple(forbidden),
        "expected_actions": tuple(
            ExpectedAction(service=a.service, action_key=a.action_key, required=a.required)
            for a in task.expected_actions
        ),
        "reference": ReferenceSolution(text=task.reference_solution.strip()),
        "workspace": workspace,
        "limits": Limits(timeout_s=task.environment.timeout_seconds, max_turns=task.environment.max_turns),
        "judge_rubric": task.judge_rubric.strip(),
        "safety_note": safety_note,
        "source": SOURCE,
    }
    if extension is not None:
        data = apply_extension(data, extension, source)
    else:
        schemas = {t.name: {"description": t.description, "input_schema": t.input_schema} for t in task.tools}
        data["claw_eval"] = ClawEvalOrigin(
            task_dir=str(task_dir.resolve()), tool_routes=endpoints, tool_schemas=schemas
        )
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as e:
        issues = [SpecIssue(".".join(str(p) for p in err["loc"]), err["msg"]) for err in e.errors()]
        raise SpecError(source, issues) from None
    return spec, notes


def _add_tool_services(task: _ClawTask, services: dict[str, Any], endpoints: Mapping[str, str]) -> list[str]:
    """A tool whose registry service the task does not list gets that service, with no records.

    (T075 routes ``contacts_search`` to ``/gmail/contacts/search``, which Claw-Eval's gmail does not
    serve: there every call fails; here it searches an empty directory.)
    """
    from coworkenv.services.registry import TOOLS

    notes = []
    for t in task.tools:
        tdef = TOOLS.get(t.name)
        if tdef is not None and tdef.service not in services:
            services[tdef.service] = {}
            route = endpoints.get(t.name, "?")
            notes.append(f"tool {t.name} (route {route} in task.yaml) needs service {tdef.service}, "
                         "not listed: added with no records")
    return notes


def _leftovers(task: _ClawTask) -> list[str]:
    notes: list[str] = []
    if task.prompt.attachments:
        notes.append(f"prompt.attachments not mapped: {task.prompt.attachments}")
    if task.user_agent.enabled:
        notes.append("user_agent (simulated user) not mapped: coworkenv's UserSim needs scripted replies")
    for name in ("sandbox_grader_files", "env_snapshot_files", "env_snapshot_commands", "local_grader_files"):
        if getattr(task, name):
            notes.append(f"{name} not mapped (Claw-Eval grader plumbing)")
    if task.environment.fixtures:
        notes.append("environment.fixtures not mapped (use sandbox_files)")
    extra = sorted(k for k in (task.model_extra or {}) if k != EXTENSION_KEY)
    if extra:
        notes.append(f"unknown task.yaml keys ignored: {extra}")
    return notes


def apply_extension(data: dict[str, Any], extension: Any, source: Path) -> dict[str, Any]:
    """Apply task.yaml's ``coworkenv`` block (written by ``coworkenv package --format claw-eval``).

    The block holds what Claw-Eval's format cannot express: ``fixture_tables`` renames fixture
    files to the spec's table names (``{service: {"tickets.json": "tickets"}}``) and ``overrides``
    replaces whole top-level TaskSpec fields (JSON form) that the native mapping gets wrong.
    """
    where = EXTENSION_KEY
    if not isinstance(extension, dict):
        raise SpecError.single(source, where, "must be a mapping {schema_version, fixture_tables, overrides}")
    unknown = sorted(set(extension) - {"schema_version", "fixture_tables", "overrides"})
    if unknown:
        raise SpecError.single(source, where, f"unknown keys {unknown}; expected fixture_tables, overrides")
    if str(extension.get("schema_version", EXTENSION_VERSION)) != EXTENSION_VERSION:
        raise SpecError.single(
            source, f"{where}.schema_version",
            f"version {extension.get('schema_version')!r} is not supported (expected {EXTENSION_VERSION})",
        )
    out = dict(data)
    renames = extension.get("fixture_tables") or {}
    if not isinstance(renames, dict):
        raise SpecError.single(source, f"{where}.fixture_tables", "must map service -> {file: table}")
    services = {k: dict(v) for k, v in out.get("services", {}).items()}
    for svc, mapping in renames.items():
        if svc not in services or not isinstance(mapping, dict):
            raise SpecError.single(
                source, f"{where}.fixture_tables.{svc}", "names no listed service, or is not a mapping"
            )
        services[svc] = {str(mapping.get(f, f)): rows for f, rows in services[svc].items()}
    out["services"] = services
    overrides = extension.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise SpecError.single(source, f"{where}.overrides", "must map TaskSpec field -> value")
    bad = sorted(set(overrides) - set(TaskSpec.model_fields))
    if bad:
        raise SpecError.single(source, f"{where}.overrides", f"not TaskSpec fields: {bad}")
    out.update(overrides)
    return out


def validate(spec: TaskSpec, source: str = "<spec>") -> str | None:
    """Validate against the service registry (services, tools, fixtures); the error text, or None."""
    from coworkenv.services.trial import load_task

    try:
        load_task(spec, source)
    except SpecError as e:
        return str(e)
    return None


Status = Literal["ok", "invalid", "failed"]


@dataclass
class TaskImport:
    """One task's outcome: ``ok`` (valid against the registry), ``invalid`` (spec built, registry
    validation failed: ``error``), ``failed`` (no spec could be built: ``error``)."""

    task_id: str
    status: Status
    notes: list[str] = field(default_factory=list)
    error: str = ""
    path: Path | None = None


@dataclass
class ImportReport:
    source: Path
    out: Path | None
    tasks: list[TaskImport] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for t in self.tasks if t.status == status)

    @property
    def ok(self) -> int:
        return self.count("ok")

    @property
    def invalid(self) -> int:
        return self.count("invalid")

    @property
    def failed(self) -> int:
        return self.count("failed")

    def note_counts(self) -> dict[str, int]:
        """Every distinct note with the number of tasks it appears in, most frequent first."""
        counts: dict[str, int] = {}
        for t in self.tasks:
            for n in dict.fromkeys(t.notes):
                counts[n] = counts.get(n, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> str:
        head = f"{len(self.tasks)} task(s) from {self.source}: "
        lines = [head + f"{self.ok} ok, {self.invalid} invalid, {self.failed} failed"]
        for t in self.tasks:
            if t.status != "ok":
                first = t.error.strip().splitlines()
                lines.append(f"  {t.status:7} {t.task_id}: {' | '.join(s.strip() for s in first[:4])}")
        return "\n".join(lines)

    def render(self) -> str:
        """The summary, then every distinct note with the number of tasks it concerns."""
        notes = [f"  [{n} task(s)] {text}" for text, n in self.note_counts().items()]
        return "\n".join([self.summary(), *(["notes (what did not map exactly):", *notes] if notes else [])])

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "out": str(self.out) if self.out else None,
            "counts": {
                "total": len(self.tasks), "ok": self.ok, "invalid": self.invalid, "failed": self.failed,
            },
            "tasks": [
                {"task_id": t.task_id, "status": t.status, "error": t.error, "notes": t.notes,
                 "path": str(t.path) if t.path else None}
                for t in self.tasks
            ],
        }


def task_dirs(src: Path) -> list[Path]:
    """Task directories under ``src``: a task dir itself, a ``tasks/`` dir, or a dataset root."""
    src = Path(src)
    if (src / "task.yaml").is_file():
        return [src]
    base = src / "tasks" if (src / "tasks").is_dir() else src
    return sorted(p.parent for p in base.glob("*/task.yaml"))


def import_dir(src: Path, out: Path | None) -> ImportReport:
    """Import every task under ``src``; write ``<out>/<task_id>/task.json`` for each spec built."""
    report = ImportReport(source=Path(src), out=Path(out) if out else None)
    dirs = task_dirs(Path(src))
    if not dirs:
        raise SpecError.single(src, "", "no Claw-Eval task (a directory with task.yaml) found here")
    for d in dirs:
        try:
            spec, notes = import_task(d)
        except SpecError as e:
            report.tasks.append(TaskImport(task_id=d.name, status="failed", error=str(e)))
            continue
        error = validate(spec, str(d / "task.yaml"))
        status: Status = "ok" if error is None else "invalid"
        item = TaskImport(task_id=spec.id, status=status, notes=notes, error=error or "")
        if out is not None:
            path = Path(out) / spec.id / "task.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(spec.model_dump_json(indent=2) + "\n", encoding="utf-8")
            item.path = path
        report.tasks.append(item)
    return report


__all__ = [
    "DEFAULT_MOCK_TODAY",
    "EXTENSION_KEY",
    "EXTENSION_VERSION",
    "ImportReport",
    "TaskImport",
    "apply_extension",
    "dataset_root",
    "import_dir",
    "import_task",
    "mock_today_for",
    "task_dirs",
    "tool_gaps",
    "validate",
]
