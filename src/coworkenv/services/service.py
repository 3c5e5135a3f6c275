"""The service contract: typed records, one tool table, copy-on-write state.

A service is a class. Its tools are methods decorated with :func:`tool`; the decorator's route,
read/write tag and audit collection, plus the method's typed signature, are the *one tool table*
from which every face is generated (in-process calls, HTTP routes, MCP tools). An instance of the
class is one trial's state of that service.

State is copy-on-write: fixtures are parsed and validated once per task into a
:class:`ServiceFixture` shared by all trials; a trial's :class:`Table` keeps only the records it
changed in an overlay, so opening or resetting a trial costs a few small objects regardless of
fixture size. Writes go through :meth:`Table.put` / :meth:`Table.delete` and :meth:`Service.emit`,
which journal their undo; :class:`coworkenv.services.trial.Trial` rolls the journal back when a
handler raises, so a rejected call never leaves a partial write.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeVar, get_type_hints

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from coworkenv.errors import SpecIssue, ToolError, invalid

ToolKind = Literal["read", "write"]
JSON = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])

_DELETED: Any = object()


# ---------------------------------------------------------------- records


class Record(BaseModel):
    """Base of typed fixture records. Unknown fields are kept (fixtures evolve), known ones typed."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True)
class TableDef:
    """A table of a service: its record type, key field and the fixture file it loads from.

    ``fixture`` is the file name under ``fixtures/<service>/`` in Claw-Eval's layout. ``wrapper``
    names a top-level key when the file holds ``{wrapper: [...]}`` instead of a bare list.
    ``aliases`` are other fixture file names holding the same kind of record (Claw-Eval tasks name
    the file differently, e.g. inventory ``items.json`` for ``products.json``); rows of several
    files feeding one table are merged (a repeated id is an error).
    """

    record: type[Record]
    key: str
    fixture: str
    wrapper: str | None = None
    aliases: tuple[str, ...] = ()


class Table:
    """One trial's view of a table: shared base rows + this trial's overlay.

    Reads return read-only mappings; writes replace whole records (never mutate in place), so the
    shared base is never touched. Iteration order: base order, then inserted records.
    """

    __slots__ = ("_base", "_dups", "_journal", "_order", "_overlay", "key")

    def __init__(self, base: Mapping[str, Mapping[str, Any]], key: str, journal: list[Any]) -> None:
        self._base = base
        self._overlay: dict[str, Any] = {}
        self._order: list[str] = []
        self._dups: dict[str, list[str]] = {}
        """Key -> the slots of the records :meth:`append` added under a key already present."""
        self._journal = journal
        self.key = key

    def _slot(self, ident: str) -> str | None:
        """The slot of the first live record whose key is ``ident`` (list order), or None."""
        rec = self._overlay.get(ident, None)
        if (rec is None and ident in self._base) or (rec is not None and rec is not _DELETED):
            return ident
        for slot in self._dups.get(ident, ()):
            if self._overlay.get(slot, _DELETED) is not _DELETED:
                return slot
        return None

    def get(self, ident: str) -> Mapping[str, Any] | None:
        rec: Mapping[str, Any] | None = self._overlay.get(ident, None)
        if rec is None:
            rec = self._base.get(ident)
            if rec is not None:
                return rec
        elif rec is not _DELETED:
            return rec
        if ident in self._dups:  # the first kept, gone: the next record appended under its key
            slot = self._slot(ident)
            found: Mapping[str, Any] | None = None if slot is None else self._overlay[slot]
            return found
        return None

    def require(self, ident: str, kind: str) -> Mapping[str, Any]:
        rec = self.get(ident)
        if rec is None:
            raise ToolError("not_found", f"{kind} {ident} not found", status=404)
        return rec

    def __contains__(self, ident: object) -> bool:
        return isinstance(ident, str) and self.get(ident) is not None

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        overlay = self._overlay
        for ident, rec in self._base.items():
            cur = overlay.get(ident, rec)
            if cur is not _DELETED:
                yield cur
        for ident in self._order:
            cur = overlay.get(ident, _DELETED)
            if cur is not _DELETED:
                yield cur

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def put(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        """Insert or replace a record (by its key field). Returns the stored read-only record."""
        ident = str(record[self.key])
        frozen = MappingProxyType(dict(record))
        had = ident in self._overlay
        self._journal.append((self, ident, self._overlay.get(ident), had))
        if ident not in self._base and ident not in self._overlay:
            self._order.append(ident)
        self._overlay[ident] = frozen
        return frozen

    def append(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        """Add a record after the others even when its key is already present (a list's
        ``append``, as Claw-Eval's services keep rows: both stay; reads, updates and deletes by key
        act on the first). Returns the stored read-only record."""
        ident = str(record[self.key])
        if self._slot(ident) is None:
            return self.put(record)
        slots = self._dups.setdefault(ident, [])
        slot = f"{ident}\x00{len(slots) + 1}"
        slots.append(slot)
        frozen = MappingProxyType(dict(record))
        self._journal.append((self, slot, None, False))
        self._order.append(slot)
        self._overlay[slot] = frozen
        return frozen

    def update(self, ident: str, **changes: Any) -> Mapping[str, Any]:
        """Replace record ``ident`` (the first with that key) with a copy carrying ``changes``."""
        cur = self.require(ident, "record")
        slot = self._slot(ident)
        if slot is not None and slot != ident:
            return self._replace(slot, {**cur, **changes})
        return self.put({**cur, **changes})

    def _replace(self, slot: str, record: Mapping[str, Any]) -> Mapping[str, Any]:
        frozen = MappingProxyType(dict(record))
        self._journal.append((self, slot, self._overlay.get(slot), slot in self._overlay))
        self._overlay[slot] = frozen
        return frozen

    def seed(self, record: Mapping[str, Any]) -> None:
        """Replace a base record in this trial's starting state (not journaled, survives nothing:
        :meth:`reset` drops it, so a service that seeds re-seeds after reset)."""
        self._overlay[str(record[self.key])] = MappingProxyType(dict(record))

    def delete(self, ident: str) -> None:
        """Delete record ``ident`` (the first with that key)."""
        slot = self._slot(ident) or ident
        self._journal.append((self, slot, self._overlay.get(slot), slot in self._overlay))
        self._overlay[slot] = _DELETED

    def _undo(self, ident: str, previous: Any, had: bool) -> None:
        if had:
            self._overlay[ident] = previous
        else:
            self._overlay.pop(ident, None)
            if ident not in self._base and ident in self._order:
                self._order.remove(ident)
            key, dup, _ = ident.partition("\x00")
            if dup and ident in self._dups.get(key, ()):
                self._dups[key].remove(ident)

    def reset(self) -> None:
        self._overlay.clear()
        self._order.clear()
        self._dups.clear()

    def rows(self) -> list[dict[str, Any]]:
        """A plain JSON copy of the current rows (for snapshots and hashing)."""
        return [dict(r) for r in self]


# ---------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class _ToolMeta:
    route: str
    kind: ToolKind
    audit: str | None
    name: str | None


def tool(
    route: str, *, write: bool = False, audit: str | None = None, name: str | None = None
) -> Callable[[F], F]:
    """Mark a service method as a tool.

    ``route`` is the HTTP path (Claw-Eval's, e.g. ``/helpdesk/tickets/update``); ``write`` tags
    state-changing tools; ``audit`` names the audit collection the tool appends to (the action key
    checks and ``expected_actions`` refer to). The tool name defaults to the method name; the
    description is the docstring's first paragraph; argument schemas come from the annotations
    (use ``Annotated[T, Field(description=...)]``).
    """

    def deco(fn: F) -> F:
        fn.__coworkenv_tool__ = _ToolMeta(route, "write" if write else "read", audit, name)  # type: ignore[attr-defined]
        return fn

    return deco


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LaxArgs(BaseModel):
    """Arguments as a FastAPI body model takes them: unknown keys ignored (Claw-Eval's services)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


ErrorStyle = Literal["coworkenv", "fastapi"]
NOT_AN_OBJECT = "Input should be a valid dictionary or object to extract fields from"
"""FastAPI's message for a body that is not an object (``model_attributes_type``)."""


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One row of a service's tool table."""

    name: str
    service: str
    route: str
    kind: ToolKind
    audit: str | None
    description: str
    args_model: type[BaseModel]
    method: str
    error_style: ErrorStyle = "coworkenv"
    """How invalid arguments are answered: ours (``{error, code, details}``) or FastAPI's 422
    ``{"detail": [...]}`` (the Claw-Eval profile)."""
    schema: JSON | None = None
    """The argument schema shown to agents when a task gives its own (Claw-Eval's task.yaml);
    validation still follows ``args_model``."""

    def input_schema(self) -> JSON:
        """JSON Schema of the arguments (as in Claw-Eval's ``input_schema`` and MCP's ``inputSchema``);
        a fresh object on each call (built once per args model: generating it costs ~1 ms)."""
        if self.schema is not None:
            return dict(self.schema)
        schema: JSON = orjson.loads(_args_schema(self.args_model))
        return schema

    def parse_args(self, args: Mapping[str, Any] | None) -> JSON:
        """Validate arguments; unknown keys and wrong types are a :class:`ToolError`."""
        if args is not None and not isinstance(args, Mapping):
            if self.error_style == "fastapi":  # FastAPI's answer to a body that is not an object
                detail = [
                    {"type": "model_attributes_type", "loc": ["body"], "msg": NOT_AN_OBJECT, "input": args}
                ]
                raise ToolError("invalid_arguments", NOT_AN_OBJECT, 422, body={"detail": detail})
            raise invalid(f"arguments of {self.name} must be a JSON object, got {type(args).__name__}")
        try:
            model = self.args_model.model_validate(dict(args or {}))
        except ValidationError as e:
            problems = [
                f"{'.'.join(str(p) for p in err['loc']) or '<args>'}: {err['msg']}" for err in e.errors()
            ]
            if self.error_style == "fastapi":
                detail = [
                    {"type": er["type"], "loc": ["body", *er["loc"]], "msg": er["msg"], "input": er["input"]}
                    for er in e.errors(include_url=False)
                ]
                body = {"detail": detail}
                raise ToolError("invalid_arguments", "; ".join(problems), 422, body=body) from None
            raise invalid(
                f"invalid arguments for {self.name}: " + "; ".join(problems), problems=problems
            ) from None
        return model.model_dump(exclude_unset=False)

    def openai_schema(self) -> JSON:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema(),
            },
        }


@functools.cache
def _args_schema(args_model: type[BaseModel]) -> bytes:
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    for name, prop in list(schema.get("properties", {}).items()):
        prop.pop("title", None)
        branches = prop.get("anyOf")
        if branches and {"type": "null"} in branches and len(branches) == 2:
            (real,) = [b for b in branches if b != {"type": "null"}]
            prop.pop("anyOf")
            if prop.get("default", 0) is None:
                prop.pop("default")
            schema["properties"][name] = {**real, **prop}
    schema.setdefault("required", [])
    return orjson.dumps(schema)


def _build_args_model(
    cls_name: str, fn: Callable[..., Any], base: type[BaseModel] = _Args
) -> type[BaseModel]:
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == "self":
            continue
        ann = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (ann, default)
    model: type[BaseModel] = create_model(f"{cls_name}Args", __base__=base, **fields)
    return model


# ---------------------------------------------------------------- fixtures and clock


@dataclass(frozen=True, slots=True)
class ServiceFixture:
    """A service's validated initial records, shared read-only by every trial of a task."""

    service: str
    tables: Mapping[str, Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Clock:
    """The services' notion of now: ``mock_today`` at noon UTC, or ``instant`` when given (the
    Claw-Eval profile freezes the wall clock at trial open). Fixed for a trial, so a run replays."""

    today: date
    instant: datetime | None = None

    def now(self) -> datetime:
        if self.instant is not None:
            return self.instant
        return datetime.combine(self.today, time(12, 0), tzinfo=UTC)

    def days_ago(self, days: float) -> datetime:
        return self.now() - timedelta(days=days)


def parse_time(value: object) -> datetime | None:
    """Parse an ISO date or datetime from a fixture ('2026-03-01', '...T10:00:00Z'); None if not one."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        try:
            dt = datetime.combine(date.fromisoformat(text[:10]), time(0, 0))
        except ValueError:
            return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


# ---------------------------------------------------------------- the service base


class Service:
    """Base of every service. Subclasses set ``name``, ``tables`` and decorate tool methods.

    An instance is one trial's state: ``self.table(name)`` gives the copy-on-write tables,
    ``self.clock`` the mock clock, ``self.emit(action_key, record)`` appends to an audit collection.
    """

    name: ClassVar[str]
    title: ClassVar[str] = ""
    tables: ClassVar[Mapping[str, TableDef]] = {}
    tool_table: ClassVar[Mapping[str, ToolDef]] = {}
    audit_keys: ClassVar[tuple[str, ...]] = ()
    args_base: ClassVar[type[BaseModel]] = _Args
    """Base of the generated argument models (strict: unknown keys rejected)."""
    error_style: ClassVar[ErrorStyle] = "coworkenv"

    __slots__ = ("_audit", "_journal", "_tables", "clock")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[str, ToolDef] = {}
        keys: list[str] = []
        for attr, fn in inspect.getmembers(cls, inspect.isfunction):
            meta: _ToolMeta | None = getattr(fn, "__coworkenv_tool__", None)
            if meta is None:
                continue
            tname = meta.name or attr
            doc = inspect.cleandoc(fn.__doc__ or tname).split("\n\n")[0].replace("\n", " ")
            table[tname] = ToolDef(
                name=tname,
                service=cls.name,
                route=meta.route,
                kind=meta.kind,
                audit=meta.audit,
                description=doc,
                args_model=_build_args_model("".join(p.title() for p in tname.split("_")), fn, cls.args_base),
                method=attr,
                error_style=cls.error_style,
            )
            if meta.audit and meta.audit not in keys:
                keys.append(meta.audit)
        cls.tool_table = MappingProxyType(dict(sorted(table.items())))
        cls.audit_keys = (*cls.audit_keys, *(k for k in keys if k not in cls.audit_keys))

    def __init__(self, fixture: ServiceFixture, clock: Clock, journal: list[Any]) -> None:
        self.clock = clock
        self._journal = journal
        self._tables = {
            name: Table(fixture.tables.get(name, {}), d.key, journal) for name, d in self.tables.items()
        }
        self._audit: dict[str, list[Mapping[str, Any]]] = {k: [] for k in self.audit_keys}

    # -- state access for handlers

    def table(self, name: str) -> Table:
        return self._tables[name]

    def no_body_args(self, tdef: ToolDef, null: bool = False) -> Mapping[str, Any]:
        """The arguments of a call whose HTTP request carried no body (or, ``null``, JSON ``null``):
        none (the tool's defaults; a required one is then missing, as for ``{}``). The Claw-Eval
        profile answers as FastAPI."""
        return {}

    def emit(self, action_key: str, record: Mapping[str, Any]) -> None:
        """Append a record to an audit collection (rolled back if the call fails)."""
        coll = self._audit.setdefault(action_key, [])
        frozen = MappingProxyType(dict(record))
        coll.append(frozen)
        self._journal.append((coll, action_key, frozen, None))

    def audit_collections(self) -> dict[str, list[dict[str, Any]]]:
        return {k: [dict(r) for r in v] for k, v in self._audit.items()}

    def reset(self) -> None:
        for t in self._tables.values():
            t.reset()
        for coll in self._audit.values():
            coll.clear()

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Current rows of every table (plain JSON)."""
        return {name: t.rows() for name, t in self._tables.items()}

    # -- fixtures

    @classmethod
    def load_fixture(cls, records: Mapping[str, Any], source: str = "<spec>") -> ServiceFixture:
        """Validate initial records (table → rows) into a shared fixture, or raise with every issue.

        ``records`` keys may be table names or Claw-Eval fixture file names (``tickets.json``).
        """
        from coworkenv.errors import SpecError

        by_file = {f: name for name, d in cls.tables.items() for f in (d.fixture, *d.aliases)}
        issues: list[SpecIssue] = []
        tables: dict[str, Mapping[str, Mapping[str, Any]]] = {}
        for raw_key, rows in records.items():
            tname = raw_key if raw_key in cls.tables else by_file.get(raw_key)
            where = f"services.{cls.name}.{raw_key}"
            if tname is None:
                known = sorted(cls.tables)
                issues.append(
                    SpecIssue(where, f"unknown table for service {cls.name}; expected one of {known}")
                )
                continue
            tdef = cls.tables[tname]
            if tdef.wrapper is not None and isinstance(rows, Mapping):
                rows = rows.get(tdef.wrapper, [])  # noqa: PLW2901 - unwrap {wrapper: [...]}
            if not isinstance(rows, list):
                issues.append(SpecIssue(where, f"expected a list of records, got {type(rows).__name__}"))
                continue
            parsed: dict[str, Mapping[str, Any]] = dict(tables.get(tname, {}))
            for i, row in enumerate(rows):
                try:
                    rec = tdef.record.model_validate(row)
                except ValidationError as e:
                    for err in e.errors():
                        loc = ".".join(str(p) for p in err["loc"])
                        issues.append(SpecIssue(f"{where}[{i}].{loc}", err["msg"]))
                    continue
                data = rec.model_dump(mode="json", exclude_unset=True)
                ident = data.get(tdef.key)
                if ident is None:
                    issues.append(SpecIssue(f"{where}[{i}].{tdef.key}", "missing key field"))
                    continue
                if str(ident) in parsed:
                    issues.append(SpecIssue(f"{where}[{i}].{tdef.key}", f"duplicate id {ident!r}"))
                    continue
                parsed[str(ident)] = MappingProxyType(data)
            tables[tname] = MappingProxyType(parsed)
        if issues:
            raise SpecError(source, issues)
        return ServiceFixture(cls.name, MappingProxyType(tables))
