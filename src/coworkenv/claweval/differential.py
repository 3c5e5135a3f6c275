"""Differential test of the Claw-Eval profile: the same requests to Claw-Eval's services and ours.

Contract: :func:`run` imports every task of a Claw-Eval task directory, calls every tool each task
declares with valid, edge and invalid arguments (:func:`probes`) — the same sequence, in the same
order, on Claw-Eval's mock services (:class:`~coworkenv.claweval.upstream.UpstreamServices`) and on
our HTTP face in the Claw-Eval profile — then compares each service's ``/audit``. A pair is
*equivalent* (:func:`compare`) when the status is the same and the bodies are equal, except that
timestamps may differ by :data:`CLOCK_TOLERANCE` (their services read the wall clock per call,
ours freeze it per trial), 5xx bodies are not compared, 422 bodies compare the failing fields,
and an extra field of ours is allowed only if listed in :data:`EXTRA_FIELDS`. Calls to a service the
task does not run there (connection refused in Claw-Eval) are counted apart, not compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import yaml

from coworkenv.claweval.upstream import UpstreamServices
from coworkenv.importers.claw_eval import dataset_root, import_task, task_dirs
from coworkenv.spec import ServiceProfile

CLOCK_TOLERANCE = timedelta(minutes=30)
EXTRA_FIELDS: frozenset[str] = frozenset()
"""Fields our bodies may carry that Claw-Eval's do not (none on purpose today)."""

ProbeKind = Literal["valid", "edge", "invalid", "audit"]


@dataclass(frozen=True)
class Probe:
    tool: str
    route: str
    args: Any
    kind: ProbeKind


@dataclass
class Pair:
    task_id: str
    probe: Probe
    theirs: tuple[int, Any]
    ours: tuple[int, Any]
    diff: str | None

    @property
    def equivalent(self) -> bool:
        return self.diff is None


@dataclass
class Report:
    pairs: list[Pair] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    failed_tasks: dict[str, str] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return sum(p.equivalent for p in self.pairs) / len(self.pairs) if self.pairs else 0.0

    def summary(self) -> str:
        eq = sum(p.equivalent for p in self.pairs)
        by_kind = {
            k: f"{sum(p.equivalent for p in self.pairs if p.probe.kind == k)}/"
            f"{sum(1 for p in self.pairs if p.probe.kind == k)}"
            for k in ("valid", "edge", "invalid", "audit")
        }
        return (
            f"{eq}/{len(self.pairs)} pairs equivalent ({self.rate:.1%}); by kind {by_kind}; "
            f"{len(self.not_compared)} not compared; {len(self.failed_tasks)} task(s) failed"
        )

    def differences(self, limit: int = 40) -> str:
        rows = [
            f"{p.task_id} {p.probe.tool} {p.probe.kind} {_short(p.probe.args, 80)}: {p.diff}"
            for p in self.pairs
            if not p.equivalent
        ]
        return "\n".join(rows[:limit])


# ---------------------------------------------------------------- comparison


def _short(value: Any, n: int) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:n]


def _as_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) < 16 or value[4:5] != "-" or value[10:11] != "T":
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _diff(theirs: Any, ours: Any, path: str = "") -> str | None:
    if isinstance(theirs, Mapping) and isinstance(ours, Mapping):
        missing = sorted(set(theirs) - set(ours))
        extra = sorted(set(ours) - set(theirs) - EXTRA_FIELDS)
        if missing or extra:
            return f"{path or '<body>'}: missing {missing} extra {extra}"
        for k in theirs:
            d = _diff(theirs[k], ours[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(theirs, list) and isinstance(ours, list):
        if len(theirs) != len(ours):
            return f"{path}: {len(theirs)} items vs {len(ours)}"
        if path.endswith(".categories"):  # a set in Claw-Eval: its order is hash-random
            return (
                None if sorted(map(str, theirs)) == sorted(map(str, ours)) else f"{path}: {theirs} vs {ours}"
            )
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            d = _diff(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    ta, tb = _as_time(theirs), _as_time(ours)
    if ta is not None and tb is not None:
        return None if abs(ta - tb) <= CLOCK_TOLERANCE else f"{path}: {theirs} vs {ours}"
    if theirs == ours and type(theirs) is type(ours):
        return None
    if isinstance(theirs, int | float) and isinstance(ours, int | float) and theirs == ours:
        return None
    return f"{path}: {_short(theirs, 60)} vs {_short(ours, 60)}"


def _fields_422(body: Any) -> set[tuple[str, ...]]:
    detail = body.get("detail") if isinstance(body, Mapping) else None
    if not isinstance(detail, list):
        return set()
    return {tuple(str(p) for p in d.get("loc", ())) for d in detail if isinstance(d, Mapping)}


def compare(theirs: tuple[int, Any], ours: tuple[int, Any]) -> str | None:
    """None when the two answers are equivalent, else what differs."""
    (ts, tb), (os_, ob) = theirs, ours
    if ts != os_:
        return f"status {ts} vs {os_}: {_short(tb, 80)} | {_short(ob, 80)}"
    if ts >= 500:
        return None
    if ts == 422:
        a, b = _fields_422(tb), _fields_422(ob)
        return None if a == b else f"422 fields {sorted(a)} vs {sorted(b)}"
    return _diff(tb, ob)


# ---------------------------------------------------------------- probes


def _first(rows: list[Mapping[str, Any]], key: str) -> Any:
    for r in rows:
        if isinstance(r, Mapping) and r.get(key) not in (None, ""):
            return r[key]
    return None


def _valid_value(name: str, prop: Mapping[str, Any], rows: list[Mapping[str, Any]], today: datetime) -> Any:
    typ = prop.get("type")
    if name.endswith("_id") and _first(rows, name) is not None:
        return _first(rows, name)
    if name.endswith("_ids") or name == "transactions":
        key = name[:-1] if name.endswith("_ids") else "transaction_id"
        return [v for v in (_first(rows, key),) if v is not None]
    if name == "query":
        text = str(_first(rows, "name") or _first(rows, "title") or "a")
        return text.split(maxsplit=1)[0][:4]
    if name == "date":
        return (today + timedelta(days=1)).strftime("%Y-%m-%d")
    if name in ("start_date", "end_date"):
        dates = sorted(str(r.get("date", ""))[:10] for r in rows if isinstance(r, Mapping) and r.get("date"))
        return (dates[0] if name == "start_date" else dates[-1]) if dates else "2026-03-01"
    if name in ("start_time", "end_time"):
        hour = 10 if name == "start_time" else 11
        return (
            (today + timedelta(days=2)).replace(hour=hour, minute=0, second=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    if (
        name in ("status", "category", "tier", "industry", "department", "source", "user", "tag")
        and typ != "boolean"
    ):
        value = _first(rows, {"user": "attendees", "tag": "tags"}.get(name, name))
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return value
    if "enum" in prop:
        return prop["enum"][0]
    if "default" in prop:
        return prop["default"]
    if typ == "integer":
        return 3
    if typ == "number":
        return 125.5
    if typ == "boolean":
        return True
    if typ == "array":
        return ["parity@example.com"]
    if name == "cron_expression":
        return "0 9 * * 1"
    return f"parity {name}"


_EDGE_VALUES: dict[str, Any] = {
    "priority": "P1",
    "status": "open",
    "date": "02/21/2026",
    "start_date": "02/21/2026",
    "cron_expression": "every hour",
    "query": "",
    "days_back": 0,
    "max_results": 1,
    "limit": 0,
}


def probes(
    tools: list[Mapping[str, Any]],
    routes: Mapping[str, str],
    rows_of: Mapping[str, list[Any]],
    today: datetime,
) -> Iterator[Probe]:
    """Valid, edge and invalid calls of each declared tool, reads before writes, deletes last."""

    def order(t: Mapping[str, Any]) -> int:
        name = str(t.get("name", ""))
        return (
            2
            if "delete" in name
            else (0 if any(w in name for w in ("list", "get", "search", "history")) else 1)
        )

    for t in sorted(tools, key=order):
        name = str(t.get("name", ""))
        route = routes.get(name)
        if route is None:
            continue
        schema = t.get("input_schema") or {}
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        rows = rows_of.get(route.strip("/").split("/", 1)[0], [])
        valid = {
            k: _valid_value(k, p, rows, today)
            for k, p in props.items()
            if k in required or k in ("status", "category", "department", "date", "start_date", "end_date")
        }
        yield Probe(name, route, valid, "valid")
        ids = [k for k in props if k.endswith("_id")]
        for k in ids:
            yield Probe(name, route, {**valid, k: "NOPE-404"}, "edge")
        for k in props:
            if k in _EDGE_VALUES:
                yield Probe(name, route, {**valid, k: _EDGE_VALUES[k]}, "edge")
        if "start_time" in props and "end_time" in props:
            yield Probe(
                name,
                route,
                {**valid, "start_time": valid.get("end_time"), "end_time": valid.get("start_time")},
                "edge",
            )
        if not required:
            yield Probe(name, route, {}, "edge")
        if required:
            yield Probe(name, route, {}, "invalid")
            first = required[0]
            wrong: Any = 12345 if (props.get(first) or {}).get("type") == "string" else "not-a-number"
            if (props.get(first) or {}).get("type") == "array":
                wrong = "not-a-list"
            yield Probe(name, route, {**valid, first: wrong}, "invalid")
        yield Probe(name, route, {**valid, "unexpected_field": "x"}, "edge")


# ---------------------------------------------------------------- the run


def _fixture_files(task_yaml: Mapping[str, Any], task_dir: Path) -> dict[str, Path]:
    """Each listed service's fixture: its ``*_FIXTURES`` env, else the task's one
    ``fixtures/<service>/*.json`` (what the importer loads; Claw-Eval's server would fall back to
    its built-in default task, which a checkout without ``tasks/`` does not hold)."""
    root = dataset_root(task_dir)
    out: dict[str, Path] = {}
    for svc in task_yaml.get("services") or []:
        name = str(svc.get("name", ""))
        for key, value in (svc.get("env") or {}).items():
            if key == f"{name.upper()}_FIXTURES":
                out[name] = (root / str(value)).resolve()
        own = sorted((task_dir / "fixtures" / name).glob("*.json"))
        if name not in out and len(own) == 1:
            out[name] = own[0].resolve()
    return out


@dataclass
class TaskSides:
    """One task set up on both sides: its spec, task.yaml, fixtures, and our open trial."""

    task_dir: Path
    data: dict[str, Any]
    spec: Any
    trial: Any
    running: set[str]
    rows_of: dict[str, list[Any]]

    @property
    def routes(self) -> dict[str, str]:
        return dict(self.spec.claw_eval.tool_routes) if self.spec.claw_eval else {}


class Sides:
    """Claw-Eval's services and ours (HTTP face, one default trial), switched task by task."""

    def __init__(self, dirs: list[Path], checkout: Path, profile: ServiceProfile = "claw-eval") -> None:
        from starlette.testclient import TestClient

        from coworkenv.serve.http import create_app
        from coworkenv.services.trial import Host

        self.profile = profile
        self.loaded: list[tuple[Path, dict[str, Any], dict[str, Path]]] = []
        samples: dict[str, Path] = {}
        for d in dirs:
            data = yaml.safe_load((d / "task.yaml").read_text(encoding="utf-8"))
            files = _fixture_files(data, d)
            for svc, path in files.items():
                samples.setdefault(svc, path)
            self.loaded.append((d, data, files))
        self.upstream = UpstreamServices(checkout, samples)
        self.host = Host()
        app = create_app(self.host, default_trial="parity", mcp=False)
        self.client = TestClient(app, raise_server_exceptions=False)
        # tool calls go as an agent's would (no token); the audit is the grader's, with the token
        self._operator = {"Authorization": f"Bearer {app.state.operator_token}"}

    def tasks(self, failed: dict[str, str]) -> Iterator[TaskSides]:
        """Each task, both sides reset to its fixtures; a task that fails to set up goes to ``failed``."""
        for d, data, files in self.loaded:
            try:
                spec, _ = import_task(d)
                self.host.add_task(spec, str(d), self.profile)
            except Exception as exc:  # reported per task; the run goes on
                failed[d.name] = f"{type(exc).__name__}: {exc}"
                continue
            running = {s for s in files if self.upstream.serves(s)}
            for svc in running:
                self.upstream.load(svc, files[svc])
            self.host.close_trial("parity")
            trial = self.host.open_trial(spec.id, "parity")
            rows_of = {svc: json.loads(files[svc].read_text(encoding="utf-8")) for svc in running}
            yield TaskSides(d, data, spec, trial, running, rows_of)

    def theirs(self, route: str, args: Any) -> tuple[int, Any]:
        return self.upstream.post(route, args)

    def ours(self, route: str, args: Any) -> tuple[int, Any]:
        resp = self.client.post(route, json=args)
        return resp.status_code, _body(resp)

    def our_audit(self, service: str) -> Any:
        return _body(self.client.get(f"/{service}/audit", headers=self._operator))

    @property
    def operator(self) -> dict[str, str]:
        """The operator's headers (audit, state, reset of our side), as a grader sends them."""
        return dict(self._operator)


def run(
    tasks_dir: Path, checkout: Path, only: list[str] | None = None, profile: ServiceProfile = "claw-eval"
) -> Report:
    """Every task of ``tasks_dir`` (or ``only`` those ids), both sides, one process. ``profile``
    is ours to measure (``strict`` shows how far our own services are from Claw-Eval's)."""
    dirs = [d for d in task_dirs(tasks_dir) if only is None or d.name in only]
    sides = Sides(dirs, checkout, profile)
    report = Report()
    for t in sides.tasks(report.failed_tasks):
        name = t.task_dir.name
        for probe in probes(list(t.data.get("tools") or []), t.routes, t.rows_of, t.trial.clock.now()):
            service = probe.route.strip("/").split("/", 1)[0]
            if service not in t.running:
                report.not_compared.append(f"{name} {probe.tool} ({service} not run by the task)")
                continue
            theirs, ours = sides.theirs(probe.route, probe.args), sides.ours(probe.route, probe.args)
            report.pairs.append(Pair(name, probe, theirs, ours, compare(theirs, ours)))
        for svc in sorted(t.running):
            theirs_audit, ours_audit = (200, sides.upstream.audit(svc)), (200, sides.our_audit(svc))
            probe = Probe(f"{svc}/audit", f"/{svc}/audit", {}, "audit")
            report.pairs.append(
                Pair(name, probe, theirs_audit, ours_audit, compare(theirs_audit, ours_audit))
            )
    return report


def _body(resp: Any) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text
