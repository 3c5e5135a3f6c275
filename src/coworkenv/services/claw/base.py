"""The base of the Claw-Eval profile: services that answer as Claw-Eval's mock services do.

Contract (what every service of this profile shares, measured against Claw-Eval's
``mock_services/`` by ``tests/test_claw_eval_parity.py``):

* one table per service, loaded from whichever single fixture file the task gives (Claw-Eval's
  ``*_FIXTURES`` env var), rows kept raw and in file order;
* arguments are taken as a FastAPI body model takes them: unknown keys ignored, lax coercion,
  invalid ones answered 422 ``{"detail": [...]}``;
* an unknown id is answered 200 ``{"error": "<Kind> <id> not found"}`` (no state change);
* no body and a JSON ``null`` body are told apart (:meth:`ClawService.no_body_args`), and the audit
  body lists its collections in Claw-Eval's order (``audit_keys``), so answers match byte for byte
  (``coworkenv parity --mode identical``);
* a fixture row lacking a field a handler reads fails the call with 500, as theirs does;
* the clock is the trial's frozen instant (Claw-Eval reads the wall clock on every call; a
  frozen instant is what makes a run replay).

Tools that a Claw-Eval task declares at a route Claw-Eval's services do not serve are
:func:`missing_route` tools: they exist (the task loads) and answer 404 ``{"detail": "Not Found"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from coworkenv.errors import SpecError, SpecIssue, ToolError
from coworkenv.services.service import (
    NOT_AN_OBJECT,
    LaxArgs,
    Record,
    Service,
    ServiceFixture,
    TableDef,
)

ROWS = "rows"
"""The one table of every Claw-Eval-profile service."""


class ClawService(Service):
    """A service of the Claw-Eval profile. Subclasses set ``name``, ``key`` and ``kind``."""

    args_base = LaxArgs
    error_style = "fastapi"
    key: ClassVar[str] = "id"
    kind: ClassVar[str] = "Record"
    """The noun of the not-found message (``Ticket TK-9 not found``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        if "key" in cls.__dict__:
            cls.tables = {ROWS: TableDef(Record, cls.key, f"{cls.__dict__.get('name', 'rows')}.json")}
        super().__init_subclass__(**kwargs)

    def __init__(self, fixture: ServiceFixture, clock: Any, journal: list[Any]) -> None:
        super().__init__(fixture, clock, journal)
        self.seed()

    def reset(self) -> None:
        super().reset()
        self.seed()

    def seed(self) -> None:
        """Adjust this trial's starting rows (date shifts relative to the frozen now). Default: none."""

    no_body: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    """Tool -> the arguments its Claw-Eval handler takes when the request has no body (theirs are
    ``req: Model | None = None``, defaulted), where those are not the model's own defaults."""

    def no_body_args(self, tdef: Any, null: bool = False) -> Mapping[str, Any]:
        """A bodiless (or, ``null``, JSON ``null``) request, as FastAPI answers it: a handler whose
        body is optional runs with its defaults (``no_body``); one whose body is required is a 422 on
        ``["body"]`` — ``missing`` without a body, ``model_attributes_type`` for ``null``."""
        if tdef.name in self.no_body:
            return self.no_body[tdef.name]
        required = [n for n, f in tdef.args_model.model_fields.items() if f.is_required()]
        if required:
            kind, msg = ("model_attributes_type", NOT_AN_OBJECT) if null else ("missing", "Field required")
            detail = [{"type": kind, "loc": ["body"], "msg": msg, "input": None}]
            raise ToolError("invalid_arguments", "request body required", 422, body={"detail": detail})
        return {}

    def claw_not_served(self, **_: Any) -> Any:
        """The handler of a declared tool at a route Claw-Eval does not serve (not a tool itself)."""
        raise NotServed()

    # -- helpers for handlers

    @property
    def rows(self) -> Any:
        return self.table(ROWS)

    def find(self, ident: str) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = self.rows.get(ident)
        return found

    def not_found(self, ident: str) -> dict[str, Any]:
        return {"error": f"{self.kind} {ident} not found"}

    def get_row(self, ident: str) -> dict[str, Any]:
        """A copy of the row ``ident``, or Claw-Eval's not-found body."""
        row = self.find(ident)
        return dict(row) if row is not None else self.not_found(ident)

    def record(self, audit: str, **fields: Any) -> dict[str, Any]:
        """``fields`` stamped with the frozen now (last, as Claw-Eval orders it), appended to the
        ``audit`` list; returned for the answer."""
        rec = {**fields, "timestamp": self.stamp()}
        self.emit(audit, rec)
        return rec

    def stamp(self) -> str:
        """An ISO timestamp of the frozen now (``datetime.isoformat``, as Claw-Eval writes them)."""
        return self.clock.now().isoformat()

    def now(self) -> datetime:
        now: datetime = self.clock.now()
        return now

    @classmethod
    def load_fixture(cls, records: Mapping[str, Any], source: str = "<spec>") -> ServiceFixture:
        """Any one fixture file of the service feeds its table (Claw-Eval loads the one its env names)."""
        rows: list[Any] = []
        for value in records.values():
            if isinstance(value, list):
                rows.extend(value)
            elif isinstance(value, Mapping):
                issue = SpecIssue(f"services.{cls.name}", "expected a list of records (Claw-Eval's format)")
                raise SpecError(source, [issue])
        return super().load_fixture({ROWS: rows}, source)


def summary(record: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The listed fields of a record; a missing one fails the call (500), as in Claw-Eval."""
    return {f: record[f] for f in fields}


class NotServed(ToolError):
    """What a route Claw-Eval's services do not have answers: FastAPI's 404."""

    def __init__(self) -> None:
        super().__init__("not_found", "Not Found", 404, body={"detail": "Not Found"})
