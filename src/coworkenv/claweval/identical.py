"""Byte-identity of the Claw-Eval profile: the same request bytes to Claw-Eval's services and ours.

Contract: :func:`run` sets every task of a Claw-Eval task directory up on both sides — Claw-Eval's
own ``mock_services`` (:class:`~coworkenv.claweval.upstream.UpstreamServices`) and our HTTP face in
the Claw-Eval profile — sends each request of :data:`KINDS` to both, in the same order, and
compares the answers.

A pair is **identical** when the status code, the media type of ``content-type`` and the response
body *bytes* are the same — no canonical serialisation, no tolerance: key order, number spelling,
escaping and whitespace all count. Other headers (``content-length`` follows from the body; ``date``
and ``server`` are the transport's) are not compared.

The clocks are aligned, not tolerated: our trial freezes its clock when it opens; the operator reads
that instant back (``GET /state`` → ``now``), and Claw-Eval's servers are made to read the same
instant wherever they call ``datetime.now`` (:meth:`~UpstreamServices.freeze_clock`) before the task's
fixtures are loaded — so shifted gmail and calendar dates, audit ``timestamp`` s and ``created_at``
compare byte for byte, with no field exempted.

Two differences are **deliberate**, each counted and named, never folded into "identical":

* the importer declares one per task: a service whose ``task.yaml`` sets no ``*_FIXTURES`` is
  served by Claw-Eval from its server's built-in default file (another task's records) and by us
  from the task's own fixtures — the ``fixture`` pairs of exactly those (task, service), and the
  audit after them, are deliberate when they differ (:data:`DELIBERATE_NOTE`);
* :data:`SET_ORDER_FIELDS`: Claw-Eval's rss server builds a feed's ``categories`` as a Python set,
  whose order follows string hashes and so changes from process to process (``PYTHONHASHSEED``) —
  no fixed order matches it; ours is first-seen order, so a trial replays. A pair is deliberate on
  this count only when Claw-Eval's body, with each such list put in our order and serialised as
  FastAPI serialises it, is our body byte for byte.

Every other non-identical pair is **different**.

Request kinds (:data:`KINDS`), per task, each phase followed by one ``audit`` pair per service:

* ``fixture`` — the records as Claw-Eval resolves the task's fixtures (env, else the server's
  default): every list route that needs no argument, with no body, and every get of one id, of
  the first record;
* ``valid`` / ``edge`` / ``invalid`` — :func:`~coworkenv.claweval.differential.probes` of every
  declared tool, on the task's own fixtures (both sides reset to them);
* ``bodiless`` — every POST route Claw-Eval's service declares, with no body and with ``null``;
* ``non-object`` — the same routes with ``[1]`` and ``"text"``;
* ``sequence`` — where a service creates and deletes, from its fixture again: delete the first
  record, create twice, list, then get, update, delete and get the id the first create got
  (numbered ``len + 1``: a record's id still there when the fixture is numbered from 1, so two
  records share it), and list again;
* ``audit`` — ``GET /<service>/audit`` (ours with the operator token, as a grader reads it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from coworkenv.claweval.differential import Sides, _diff, _valid_value, probes
from coworkenv.claweval.upstream import resolved_fixture
from coworkenv.importers.claw_eval import dataset_root, import_task, task_dirs
from coworkenv.services.claw import ROUTES

Kind = Literal["fixture", "valid", "edge", "invalid", "bodiless", "non-object", "sequence", "audit"]
KINDS: tuple[Kind, ...] = (
    "fixture",
    "valid",
    "edge",
    "invalid",
    "bodiless",
    "non-object",
    "sequence",
    "audit",
)
Verdict = Literal["identical", "deliberate", "different"]
Reason = Literal["fixture-default", "set-order"]
DELIBERATE_NOTE = "sets no {}_FIXTURES, so Claw-Eval's service would serve its own default fixture file"
"""The importer's note (per task and service) that declares a ``fixture`` difference deliberate."""
SET_ORDER_FIELDS: tuple[tuple[str, str], ...] = (("feeds", "categories"),)
"""(list key, field): the field of each object in such a list is a Python set in Claw-Eval."""


@dataclass(frozen=True)
class Request:
    """One request: ``body`` None sends no body at all."""

    kind: Kind
    route: str
    body: bytes | None
    label: str = ""

    def show(self) -> str:
        body = "<no body>" if self.body is None else self.body.decode("utf-8", "replace")
        return f"{self.route} {body[:80]}" + (f" ({self.label})" if self.label else "")


@dataclass(frozen=True)
class Answer:
    status: int
    media: str
    body: bytes

    @classmethod
    def of(cls, resp: Any) -> Answer:
        media = str(resp.headers.get("content-type", "")).split(";", 1)[0].strip()
        return cls(resp.status_code, media, bytes(resp.content))


@dataclass
class RawPair:
    task_id: str
    request: Request
    theirs: Answer
    ours: Answer
    verdict: Verdict
    diff: str | None = None
    reason: Reason | None = None
    """Why a deliberate pair differs: the importer's fixture note, or Claw-Eval's set order."""


@dataclass
class IdenticalReport:
    pairs: list[RawPair] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    failed_tasks: dict[str, str] = field(default_factory=dict)

    def count(self, verdict: Verdict, kind: Kind | None = None) -> int:
        return sum(1 for p in self.pairs if p.verdict == verdict and kind in (None, p.request.kind))

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Per kind: how many pairs are identical, deliberate and different."""
        return {
            k: {v: self.count(v, k) for v in ("identical", "deliberate", "different")}
            for k in KINDS
            if any(p.request.kind == k for p in self.pairs)
        }

    def reasons(self) -> dict[str, int]:
        """How many deliberate pairs each reason accounts for."""
        out: dict[str, int] = {}
        for p in self.pairs:
            if p.reason is not None:
                out[p.reason] = out.get(p.reason, 0) + 1
        return out

    def summary(self) -> str:
        kinds = {k: f"{c['identical']}/{sum(c.values())}" for k, c in self.by_kind().items()}
        return (
            f"{self.count('identical')}/{len(self.pairs)} pairs byte-identical; "
            f"{self.count('deliberate')} deliberate {self.reasons()}, {self.count('different')} different; "
            f"identical by kind {kinds}; {len(self.not_compared)} not compared; "
            f"{len(self.failed_tasks)} task(s) failed"
        )

    def differences(self, limit: int = 40, verdict: Verdict = "different") -> str:
        """The first ``limit`` pairs of ``verdict``, in run order: task, kind, request, what differs."""
        rows = [
            f"{p.task_id} {p.request.kind} {p.request.show()}: {p.diff}"
            for p in self.pairs
            if p.verdict == verdict
        ]
        return "\n".join(rows[:limit])

    def as_dict(self, limit: int = 40) -> dict[str, Any]:
        return {
            "mode": "identical",
            "pairs": len(self.pairs),
            "identical": self.count("identical"),
            "deliberate": self.count("deliberate"),
            "deliberate_reasons": self.reasons(),
            "different": self.count("different"),
            "by_kind": self.by_kind(),
            "summary": self.summary(),
            "first_differences": self.differences(limit).splitlines(),
            "deliberate_pairs": self.differences(limit, "deliberate").splitlines(),
            "failed": self.failed_tasks,
        }


# ---------------------------------------------------------------- comparison


def describe(theirs: Answer, ours: Answer) -> str | None:
    """None when the answers are byte-identical (status, media type, body), else the first difference
    — the byte offset with both sides' bytes around it, and what differs once parsed as JSON."""
    if theirs.status != ours.status:
        return f"status {theirs.status} vs {ours.status}: {theirs.body[:80]!r} | {ours.body[:80]!r}"
    if theirs.media != ours.media:
        return f"content-type {theirs.media!r} vs {ours.media!r}"
    a, b = theirs.body, ours.body
    if a == b:
        return None
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    where = f"byte {at}: {a[max(0, at - 30) : at + 40]!r} vs {b[max(0, at - 30) : at + 40]!r}"
    try:
        ja, jb = json.loads(a), json.loads(b)
    except ValueError:
        return where
    if ja == jb:
        return f"{where}; as JSON: equal (key order or spelling only)"
    tolerated = "within the equivalence rules (e.g. a timestamp within 30 min)"
    return f"{where}; as JSON: {_diff(ja, jb) or tolerated}"


def _fastapi_json(value: Any) -> bytes:
    """How FastAPI's ``JSONResponse`` (Starlette's) renders a body."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def _reorder(theirs: Any, ours: Any, parent: str = "") -> Any:
    """``theirs`` with every :data:`SET_ORDER_FIELDS` list that is a permutation of ours in our order."""
    if isinstance(theirs, Mapping) and isinstance(ours, Mapping):
        out = {}
        for k, v in theirs.items():
            mine = ours.get(k)
            is_set = any(parent == lst and k == fld for lst, fld in SET_ORDER_FIELDS)
            if is_set and isinstance(v, list) and isinstance(mine, list) and _same_items(v, mine):
                out[k] = list(mine)
            else:
                out[k] = _reorder(v, mine, k)
        return out
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [_reorder(a, b, parent) for a, b in zip(theirs, ours, strict=True)]
    return theirs


def _same_items(a: list[Any], b: list[Any]) -> bool:
    return sorted(map(_fastapi_json, a)) == sorted(map(_fastapi_json, b))


def set_order_only(theirs: Answer, ours: Answer) -> bool:
    """True when the answers differ only in the order of :data:`SET_ORDER_FIELDS` lists: same
    status and media type, and Claw-Eval's body — which FastAPI's rendering reproduces byte for byte —
    with those lists in our order, rendered the same way, is our body."""
    if (theirs.status, theirs.media) != (ours.status, ours.media):
        return False
    try:
        a, b = json.loads(theirs.body), json.loads(ours.body)
    except ValueError:
        return False
    return _fastapi_json(a) == theirs.body and _fastapi_json(_reorder(a, b)) == ours.body


# ---------------------------------------------------------------- the run


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _service(route: str) -> str:
    return route.strip("/").split("/", 1)[0]


def _find(body: Any, key: str) -> Any:
    """The first value of ``key`` anywhere in a parsed body (depth first)."""
    if isinstance(body, Mapping):
        if key in body:
            return body[key]
        values: Iterator[Any] = iter(body.values())
    elif isinstance(body, list):
        values = iter(body)
    else:
        return None
    for v in values:
        found = _find(v, key)
        if found is not None:
            return found
    return None


def _args(route: str, rows: list[Any], now: datetime, extra: int = 0) -> dict[str, Any]:
    """Valid arguments of our tool at ``route``: its required ones, plus its first ``extra`` others."""
    schema = ROUTES[route].input_schema()
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = list(schema.get("required") or [])
    names = required + [n for n in props if n not in required][:extra]
    return {n: _valid_value(n, props[n], rows, now) for n in names}


class _Task:
    """One task on both sides: sends requests, records pairs."""

    def __init__(self, sides: Sides, report: IdenticalReport, name: str, deliberate: set[str]) -> None:
        self.sides, self.report, self.name, self.deliberate = sides, report, name, deliberate
        self.phase: Kind = "fixture"

    def send(self, request: Request) -> Any:
        """Both sides answer ``request``; the pair is recorded; their parsed answer is returned."""
        svc = _service(request.route)
        headers = {"content-type": "application/json"}
        theirs = Answer.of(self.sides.upstream.post_raw(request.route, request.body))
        ours = Answer.of(self.sides.client.post(request.route, content=request.body, headers=headers))
        self._pair(request, theirs, ours, svc)
        try:
            return json.loads(theirs.body)
        except ValueError:
            return None

    def audit(self, svc: str, after: str) -> None:
        route = f"/{svc}/audit"
        theirs = Answer.of(self.sides.upstream.clients[svc].get(route))
        ours = Answer.of(self.sides.client.get(route, headers=self.sides.operator))
        self._pair(Request("audit", route, None, f"after {after}"), theirs, ours, svc)

    def _pair(self, request: Request, theirs: Answer, ours: Answer, svc: str) -> None:
        diff = describe(theirs, ours)
        verdict: Verdict = "identical" if diff is None else "different"
        reason: Reason | None = None
        if diff is not None and self.phase == "fixture" and svc in self.deliberate:
            verdict, reason = "deliberate", "fixture-default"
            diff += f" [importer: {DELIBERATE_NOTE.format(svc.upper())}]"
        elif diff is not None and set_order_only(theirs, ours):
            verdict, reason = "deliberate", "set-order"
            diff += f" [Claw-Eval's set order: {SET_ORDER_FIELDS}]"
        self.report.pairs.append(RawPair(self.name, request, theirs, ours, verdict, diff, reason))


def run(tasks_dir: Path, checkout: Path, only: list[str] | None = None) -> IdenticalReport:
    """Every task of ``tasks_dir`` (or ``only`` those ids), every kind of :data:`KINDS`, both sides."""
    dirs = [d for d in task_dirs(tasks_dir) if only is None or d.name in only]
    sides = Sides(dirs, checkout)
    report = IdenticalReport()
    for task_dir, data, files in sides.loaded:
        try:
            spec, notes = import_task(task_dir)
            sides.host.add_task(spec, str(task_dir), "claw-eval")
        except Exception as exc:  # reported per task; the run goes on
            report.failed_tasks[task_dir.name] = f"{type(exc).__name__}: {exc}"
            continue
        running = sorted(s for s in files if sides.upstream.serves(s))
        deliberate = {s for s in running if any(DELIBERATE_NOTE.format(s.upper()) in n for n in notes)}
        sides.host.close_trial("parity")
        sides.host.open_trial(spec.id, "parity")
        state = sides.client.get("/state", headers=sides.operator).json()
        now = datetime.fromisoformat(str(state["now"]))  # the operator's reading of our frozen clock
        sides.upstream.freeze_clock(now)
        task = _Task(sides, report, task_dir.name, deliberate)
        env_of = {str(s.get("name")): dict(s.get("env") or {}) for s in data.get("services") or []}
        rows_of = {s: json.loads(files[s].read_text(encoding="utf-8")) for s in running}

        # fixture: the records as Claw-Eval resolves the task's fixtures
        for svc in running:
            theirs = resolved_fixture(checkout, dataset_root(task_dir), svc, env_of.get(svc, {}))
            if theirs is None or not theirs.is_file():
                report.not_compared.append(f"{task_dir.name} {svc} fixture (Claw-Eval resolves {theirs})")
                continue
            sides.upstream.load(svc, theirs)
            _fixture_requests(task, svc, json.loads(theirs.read_text(encoding="utf-8")))
            task.audit(svc, "fixture")
        for svc in running:  # both sides back to the task's own fixtures (what we serve)
            sides.upstream.load(svc, files[svc])
        sides.client.post("/reset", headers=sides.operator)
        task.phase = "valid"

        # valid / edge / invalid: every declared tool
        routes = dict(spec.claw_eval.tool_routes) if spec.claw_eval else {}
        for probe in probes(list(data.get("tools") or []), routes, rows_of, now):
            if _service(probe.route) not in running:
                report.not_compared.append(f"{task_dir.name} {probe.tool} ({_service(probe.route)} not run)")
                continue
            task.send(Request(probe.kind, probe.route, _encode(probe.args), probe.tool))
        for svc in running:
            task.audit(svc, "probes")

        for svc in running:
            for route in sides.upstream.post_routes(svc):
                task.send(Request("bodiless", route, None))
                task.send(Request("bodiless", route, b"null"))
            task.audit(svc, "bodiless")
            for route in sides.upstream.post_routes(svc):
                task.send(Request("non-object", route, b"[1]"))
                task.send(Request("non-object", route, b'"text"'))
            task.audit(svc, "non-object")
            sides.upstream.load(svc, files[svc])  # the sequence starts from the fixture, on both sides
            sides.client.post(f"/{svc}/reset", headers=sides.operator)
            if _sequence(task, svc, rows_of[svc], now):
                task.audit(svc, "sequence")
    sides.upstream.freeze_clock(None)
    return report


def _fixture_requests(task: _Task, svc: str, rows: list[Any]) -> None:
    for route, tdef in sorted(ROUTES.items()):
        if tdef.service != svc or tdef.kind != "read":
            continue
        required = list(tdef.input_schema().get("required") or [])
        if not required and "list" in tdef.name:
            task.send(Request("fixture", route, None, tdef.name))
        elif len(required) == 1 and required[0].endswith("_id"):
            first = next((r[required[0]] for r in rows if isinstance(r, Mapping) and required[0] in r), None)
            if first is not None:
                task.send(Request("fixture", route, _encode({required[0]: first}), tdef.name))


def _sequence(task: _Task, svc: str, rows: list[Any], now: datetime) -> bool:
    """Delete the first record, create twice, list; then get, update, delete and get again the id
    the first create got — numbered ``len + 1``, the id of a record still there when the fixture is
    numbered from 1 (labelled ``a duplicate id``) — and list again. False when the service does not
    both create and delete."""
    mine = {r.rsplit("/", 1)[1]: r for r, t in ROUTES.items() if t.service == svc}
    if "create" not in mine or "delete" not in mine:
        return False
    key = str((ROUTES[mine["delete"]].input_schema().get("required") or ["id"])[0])
    listing = next((r for r, t in ROUTES.items() if t.service == svc and "list" in t.name), None)
    ids = [r[key] for r in rows if isinstance(r, Mapping) and key in r]
    task.send(Request("sequence", mine["delete"], _encode({key: ids[0] if ids else "NOPE-404"}), "delete"))
    create = _encode(_args(mine["create"], rows, now))
    made = _find(task.send(Request("sequence", mine["create"], create, "create")), key)
    task.send(Request("sequence", mine["create"], create, "create again"))
    if listing is not None:
        task.send(Request("sequence", listing, None, "list"))
    which = f"the new id {made}" + (", a duplicate id" if made in ids[1:] else "")
    for verb in ("get", "update", "delete", "get"):
        if verb in mine and made is not None:
            args = {**_args(mine[verb], rows, now, extra=1 if verb == "update" else 0), key: made}
            task.send(Request("sequence", mine[verb], _encode(args), f"{verb} {which}"))
    if listing is not None:
        task.send(Request("sequence", listing, None, "list again"))
    return True
