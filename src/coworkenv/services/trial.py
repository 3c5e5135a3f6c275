"""Trials: one task's services, isolated per trial id, and the uniform audit event.

:class:`Host` holds loaded tasks (fixtures validated once) and many concurrent trials, each keyed
by id with its own copy-on-write state and an unguessable **capability** (the only key an agent is
given to reach the trial from outside the process; see :mod:`coworkenv.serve.access`).
:meth:`Trial.call` is the single path every face goes
through (in-process, HTTP, MCP): it looks the tool up, applies the trial's fault schedule,
validates arguments, runs the handler inside an undo journal and records exactly one
:class:`AuditEvent` — whatever happens. Contract: a call that returns an error left the trial's
state (tables and audit collections; see :meth:`Trial.state_hash`) exactly as it was; no
exception escapes ``call``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from coworkenv.errors import ToolError
from coworkenv.services.faults import FaultPlan, FaultSchedule
from coworkenv.services.service import Clock, Service, ServiceFixture, Table, ToolDef
from coworkenv.spec import ServiceProfile, TaskSpec

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AuditEvent:
    """One tool call, as every grader, report and trainer sees it."""

    seq: int
    trial_id: str
    service: str
    tool: str
    kind: str
    args: dict[str, Any]
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    fault: str | None = None
    status: int = 200
    mock_time: str = ""
    wall_time: float = 0.0
    delay_s: float = 0.0
    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Audit-collection entries the call appended: (action_key, record)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "trial_id": self.trial_id,
            "service": self.service,
            "tool": self.tool,
            "kind": self.kind,
            "args": self.args,
            "ok": self.ok,
            "result": self.result,
            "error": self.error,
            "fault": self.fault,
            "status": self.status,
            "mock_time": self.mock_time,
            "wall_time": self.wall_time,
            "delay_s": self.delay_s,
            "records": [[k, r] for k, r in self.records],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AuditEvent:
        data = dict(d)
        data["records"] = [(k, r) for k, r in data.get("records", [])]
        return cls(**data)


@dataclass(frozen=True, slots=True)
class LoadedTask:
    """A task whose fixtures were validated once; trials share its fixtures read-only."""

    spec: TaskSpec
    fixtures: Mapping[str, ServiceFixture]
    services: Mapping[str, type[Service]]
    tools: Mapping[str, ToolDef]
    """Exposed tools (the task's ``tools``), name → definition."""
    profile: ServiceProfile = "strict"
    routes: Mapping[str, ToolDef] = field(default_factory=dict)
    """Claw-Eval profile: every HTTP route its services serve for this task (exposed or not)."""
    reachable: Mapping[str, ToolDef] = field(default_factory=dict)
    """Claw-Eval profile: tools served at a route though not exposed (by name)."""


def initial_snapshot(
    task: LoadedTask, clock: Clock | None = None
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """A task's fixtures as a state snapshot (service → table → rows): fresh, untouched services."""
    clk = clock or Clock(task.spec.mock_today)
    return {name: cls(task.fixtures[name], clk, []).snapshot() for name, cls in task.services.items()}


def load_task(spec: TaskSpec, source: str = "<spec>", profile: ServiceProfile | None = None) -> LoadedTask:
    """Validate the spec's services, tools and records against the registry of its profile.

    ``profile`` overrides the spec's (:attr:`TaskSpec.profile`): ``strict`` is ours, ``claw-eval``
    answers as Claw-Eval's mock services (:mod:`coworkenv.services.claw`).
    """
    from coworkenv.services import registry
    from coworkenv.tasks.load import check_references

    chosen = profile or spec.profile
    if chosen == "claw-eval":
        return _load_claw_eval(spec, source)
    check_references(spec, source)
    services = {name: registry.SERVICES[name] for name in spec.services}
    fixtures = {name: cls.load_fixture(spec.services[name], source) for name, cls in services.items()}
    tools: dict[str, ToolDef] = {}
    for tname in spec.tools:
        tools[tname] = registry.TOOLS[tname]
    return LoadedTask(spec=spec, fixtures=fixtures, services=services, tools=tools)


def _load_claw_eval(spec: TaskSpec, source: str) -> LoadedTask:
    """The Claw-Eval profile: its service classes, tools resolved by the task's routes and names.

    A service Claw-Eval's profile lacks (documents) keeps its strict class and tools.
    """
    from coworkenv.errors import SpecError, SpecIssue
    from coworkenv.services import claw, registry

    routes_given = spec.claw_eval.tool_routes if spec.claw_eval is not None else {}
    tools: dict[str, ToolDef] = {}
    issues: list[SpecIssue] = []
    for i, tname in enumerate(spec.tools):
        tdef = claw.resolve_tool(tname, routes_given.get(tname))
        if tdef is None and tname in registry.TOOLS and registry.TOOLS[tname].service not in claw.SERVICES:
            tdef = registry.TOOLS[tname]
        if tdef is None:
            route = routes_given.get(tname)
            issues.append(SpecIssue(
                f"tools[{i}]",
                f"unknown tool {tname!r}" + (f" at route {route}" if route else "")
                + "; the Claw-Eval profile serves the routes of coworkenv.services.claw.ROUTES "
                "(give the route in claw_eval.tool_routes, or use service_profile 'strict')",
            ))
            continue
        given = spec.claw_eval.tool_schemas.get(tname) if spec.claw_eval is not None else None
        if given:  # the agent sees the task's own description and schema, as in Claw-Eval
            tdef = dataclasses.replace(
                tdef,
                description=str(given.get("description") or tdef.description),
                schema=dict(given.get("input_schema") or tdef.input_schema()),
            )
        tools[tname] = tdef
    unknown = sorted(set(spec.services) - set(claw.SERVICES) - set(registry.SERVICES))
    issues += [SpecIssue(f"services.{name}", "unknown service") for name in unknown]
    if issues:
        raise SpecError(source, issues)
    wanted = list(dict.fromkeys([*spec.services, *(t.service for t in tools.values())]))
    services = {n: claw.SERVICES.get(n) or registry.SERVICES[n] for n in wanted}
    fixtures = {n: cls.load_fixture(spec.services.get(n, {}), source) for n, cls in services.items()}
    routes = claw.service_routes(services)
    routes.update({t.route: t for t in tools.values()})
    reachable = {t.name: t for t in routes.values() if t.name not in tools}
    return LoadedTask(
        spec=spec, fixtures=fixtures, services=services, tools=tools,
        profile="claw-eval", routes=routes, reachable=reachable,
    )


class _NoBody(dict[str, Any]):
    """The arguments of an HTTP request that sent no body (:data:`NO_BODY`) or JSON ``null``
    (:data:`NULL_BODY`): empty, and told apart by identity — Claw-Eval's services answer each unlike
    ``{}`` (a required body is ``missing`` without one, not an object with ``null``)."""


NO_BODY: Mapping[str, Any] = _NoBody()
NULL_BODY: Mapping[str, Any] = _NoBody()


@dataclass(frozen=True, slots=True)
class CallResult:
    ok: bool
    body: Any
    status: int
    event: AuditEvent


class Trial:
    """One isolated run of a task's services."""

    def __init__(
        self,
        task: LoadedTask,
        trial_id: str,
        faults: FaultPlan | None = None,
        now: datetime | None = None,
        capability: str | None = None,
    ) -> None:
        """``now``: the frozen instant of a Claw-Eval-profile trial (default: the wall clock at open;
        pass the recorded one to replay). Strict trials run at ``mock_today`` noon. ``capability``:
        the secret path key of the agent-facing routes (default: a fresh one)."""
        self.id = trial_id
        self.capability = capability or new_capability()
        """The secret path key of this trial's agent-facing routes (``/t/<capability>/...``)."""
        self.task = task
        if task.profile == "claw-eval":
            self.clock = Clock(task.spec.mock_today, now or datetime.now(UTC).replace(microsecond=0))
        else:
            self.clock = Clock(task.spec.mock_today, now)
        self._journal: list[Any] = []
        self.services: dict[str, Service] = {
            name: cls(task.fixtures[name], self.clock, self._journal) for name, cls in task.services.items()
        }
        self.audit: list[AuditEvent] = []
        self.refusals: list[dict[str, Any]] = []
        """Requests made with this trial's capability that were refused (operator-only endpoints):
        the evidence that the agent tried to reach what grades it. Never cleared by a reset."""
        self.faults = FaultSchedule(faults or FaultPlan(), trial_id)

    # ------------------------------------------------------------------ calls

    def call(self, tool: str, args: Mapping[str, Any] | None = None) -> CallResult:
        """Run one tool call. Never raises; always records one audit event."""
        tdef = self.task.tools.get(tool) or self.task.reachable.get(tool)
        seq = len(self.audit)
        service = tdef.service if tdef else (tool.split("_", 1)[0] if "_" in tool else "")
        event = AuditEvent(
            seq=seq,
            trial_id=self.id,
            service=service,
            tool=tool,
            kind=tdef.kind if tdef else "unknown",
            args=dict(args) if isinstance(args, Mapping) else {"_raw": repr(args)},
            ok=False,
            mock_time=self.clock.now().isoformat(),
            wall_time=time.time(),
        )
        try:
            body, status = self._run(tdef, tool, args, event)
        except Exception as exc:  # a bug in a handler must not crash the host
            log.exception("tool %s raised", tool)
            self._rollback(0)
            err = ToolError("internal_error", f"{tool} failed: {type(exc).__name__}", status=500)
            body, status = err.payload(), 500
            event.ok, event.error, event.records = False, body, []
        event.status = status
        self.audit.append(event)
        return CallResult(event.ok, body, status, event)

    def _run(
        self, tdef: ToolDef | None, tool: str, args: Mapping[str, Any] | None, event: AuditEvent
    ) -> tuple[Any, int]:
        if tdef is None:
            known = "known" if tool in _all_tools() else "unknown"
            msg = (
                f"tool {tool!r} is not available in this task"
                if known == "known"
                else f"unknown tool {tool!r}"
            )
            err = ToolError("tool_not_available" if known == "known" else "unknown_tool", msg, status=404)
            event.error = err.payload()
            return event.error, err.status
        fault = self.faults.next()
        if fault is not None:
            event.fault = fault.kind
            event.delay_s = fault.delay_s
            if fault.kind != "latency":
                claw = self.task.profile == "claw-eval"
                event.error = fault.claw_eval_payload() if claw else fault.payload()
                return event.error, fault.status
        svc = self.services[tdef.service]
        mark = len(self._journal)
        try:
            if tdef.method == "claw_not_served":  # a route Claw-Eval lacks: 404 whatever the body
                args = {}
            elif args is NO_BODY or args is NULL_BODY:  # what the service's handler gets for no body
                args = svc.no_body_args(tdef, null=args is NULL_BODY)
            parsed = tdef.parse_args(args)
            event.args = parsed
            result = getattr(svc, tdef.method)(**parsed)
        except ToolError as err:
            self._rollback(mark)
            event.error = err.payload()
            return event.error, err.status
        event.records = self._committed_records(mark)
        del self._journal[mark:]
        event.ok = True
        event.result = result
        return result, 200

    def _committed_records(self, mark: int) -> list[tuple[str, dict[str, Any]]]:
        return [(key, dict(rec)) for target, key, rec, _ in self._journal[mark:] if isinstance(target, list)]

    def _rollback(self, mark: int) -> None:
        journal = self._journal
        while len(journal) > mark:
            target, ident, previous, had = journal.pop()
            if isinstance(target, Table):
                target._undo(ident, previous, had)
            else:
                target.pop()

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """Back to the task's fixtures: drop overlays, audit collections, events and fault state."""
        for svc in self.services.values():
            svc.reset()
        self._journal.clear()
        self.audit.clear()
        self.faults.reset()

    def reset_service(self, service: str) -> None:
        """Reset one service (Claw-Eval's per-service ``/reset``): its tables and audit collections
        back to the fixtures and its calls dropped from the log (remaining events renumbered).
        Fault state is untouched."""
        self.services[service].reset()
        kept = [e for e in self.audit if e.service != service]
        for i, event in enumerate(kept):
            event.seq = i
        self.audit[:] = kept

    def snapshot(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Final state: service → table → rows."""
        return {name: svc.snapshot() for name, svc in self.services.items()}

    def initial_snapshot(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """The state this trial opened with (its task's fixtures), as :meth:`snapshot` shows it."""
        return initial_snapshot(self.task, self.clock)

    def audit_collections(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        return {name: svc.audit_collections() for name, svc in self.services.items()}

    def state_hash(self) -> str:
        """Hash of tables and audit collections (not of the call log)."""
        blob = json.dumps(
            {"tables": self.snapshot(), "audit": self.audit_collections()}, sort_keys=True, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def claw_eval_audit(self, service: str) -> dict[str, Any]:
        """Claw-Eval's ``GET /<service>/audit`` body: calls plus the audit collections.

        In the Claw-Eval profile only calls its handlers answered are listed (as there: a rejected
        body or an injected fault never reaches the handler's log)."""
        known = {**self.task.reachable, **self.task.tools}
        calls = [
            {
                "endpoint": known[e.tool].route if e.tool in known else e.tool,
                "request_body": e.args,
                "response_body": e.result if e.ok else e.error,
                "timestamp": e.mock_time,
            }
            for e in self.audit
            if e.service == service and (e.ok or self.task.profile != "claw-eval")
        ]
        return {"calls": calls, **self.services[service].audit_collections()}


def _all_tools() -> Mapping[str, ToolDef]:
    from coworkenv.services import registry

    return registry.TOOLS


def new_capability() -> str:
    """An unguessable path key (144 random bits, URL-safe)."""
    return secrets.token_urlsafe(18)


REFUSALS_KEPT = 1000
ATTRIBUTIONS_PER_S = 5.0
ATTRIBUTION_BURST = 50


class Host:
    """Many tasks, many concurrent trials, one process."""

    def __init__(self) -> None:
        self.tasks: dict[str, LoadedTask] = {}
        self.trials: dict[str, Trial] = {}
        self.by_capability: dict[str, Trial] = {}
        self.refusals: deque[dict[str, Any]] = deque(maxlen=REFUSALS_KEPT)
        """Every refused request (the most recent ones), attributed to a trial where possible."""
        self.attribute: Callable[[str | None], str | None] | None = None
        """Optional: the trial id a refused request's client (``"ip:port"``) belongs to, for a
        request that names no trial of its own (e.g. a sandbox peer lookup). Blocking: the faces
        run it in a worker thread, rate-limited by :meth:`attribution_allowed`."""
        self._tokens = float(ATTRIBUTION_BURST)
        self._refilled = time.monotonic()

    def add_task(
        self, spec: TaskSpec, source: str = "<spec>", profile: ServiceProfile | None = None
    ) -> LoadedTask:
        loaded = load_task(spec, source, profile)
        self.tasks[spec.id] = loaded
        return loaded

    def open_trial(
        self,
        task_id: str,
        trial_id: str | None = None,
        faults: FaultPlan | None = None,
        now: datetime | None = None,
        *,
        capability: str | None = None,
    ) -> Trial:
        """Open a trial; ``capability`` (default: a fresh secret) is its agent-facing path key;
        ``now`` freezes a Claw-Eval-profile trial's clock (a recorded one replays).

        A fixed ``capability`` is for single-trial deployments whose agent already knows the path
        (Harbor's ``/t/default``); it must not collide with another trial's id or capability.
        """
        task = self.tasks.get(task_id)
        if task is None:
            raise KeyError(f"unknown task {task_id!r}")
        tid = trial_id or uuid.uuid4().hex[:12]
        if tid in self.trials:
            raise KeyError(f"trial {tid!r} already exists")
        if capability is not None and (capability in self.by_capability or capability in self.trials):
            raise KeyError(f"capability {capability!r} is already in use")
        trial = Trial(task, tid, faults, now, capability)
        self.trials[tid] = trial
        self.by_capability[trial.capability] = trial
        return trial

    def close_trial(self, trial_id: str) -> None:
        trial = self.trials.pop(trial_id, None)
        if trial is not None:
            self.by_capability.pop(trial.capability, None)

    def refuse(self, entry: dict[str, Any], trial: Trial | None = None) -> None:
        """Record a refused request on the host and, when attributable, on the trial it came from.

        A trial keeps at most :data:`REFUSALS_KEPT` refusals (then counts the rest in the last
        entry's ``"more"``), so a flood cannot grow a record without bound.
        """
        self.refusals.append(entry)
        if trial is None or self.trials.get(trial.id) is not trial:
            return
        if len(trial.refusals) < REFUSALS_KEPT:
            trial.refusals.append(entry)
        else:
            last = trial.refusals[-1] = dict(trial.refusals[-1])
            last["more"] = int(last.get("more", 0)) + 1

    def attribution_allowed(self) -> bool:
        """Token bucket for :attr:`attribute` lookups (each scans ``/proc``): a flood of refused
        requests is still recorded, but only the first few per second are attributed."""
        now = time.monotonic()
        self._tokens = min(ATTRIBUTION_BURST, self._tokens + (now - self._refilled) * ATTRIBUTIONS_PER_S)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True
