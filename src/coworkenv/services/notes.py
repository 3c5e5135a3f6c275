"""Notes: meeting notes and memory notes. Claw-Eval compatible (routes under ``/notes``, audit
collection ``shared``).

Claw-Eval tasks ship notes as ``meetings.json`` or ``memory.json`` (same records, keyed by
``note_id``); both load into the one ``notes`` table. ``notes_list`` returns summaries in fixture
order; ``days_back`` counts back from the trial clock (``mock_today``), ``date_from``/``date_to``
are inclusive days. Sharing requires an existing note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, parse_time, tool


class Note(Record):
    note_id: str
    title: str = ""
    created_at: str = ""
    participants: list[str] = Field(default_factory=list)
    content: str = ""
    duration_minutes: int | None = None
    tags: list[str] = Field(default_factory=list)


_SUMMARY = ("note_id", "title", "created_at", "participants", "duration_minutes")
_OPTIONAL_SUMMARY = ("type", "tags")


class Notes(Service):
    name = "notes"
    title = "Notes"
    tables: ClassVar[Mapping[str, TableDef]] = {
        "notes": TableDef(Note, "note_id", "meetings.json", aliases=("memory.json",))
    }

    @tool("/notes/list")
    def notes_list(
        self,
        max_results: Annotated[int, Field(description="Maximum number of results to return", ge=1)] = 10,
        date_from: Annotated[str | None, Field(description="Created on or after (YYYY-MM-DD)")] = None,
        date_to: Annotated[str | None, Field(description="Created on or before (YYYY-MM-DD)")] = None,
        tag: Annotated[str | None, Field(description="Filter by tag")] = None,
        days_back: Annotated[int | None, Field(description="Only notes from the last N days", ge=0)] = None,
    ) -> dict[str, Any]:
        """List notes (summaries), filtered by date range, recency and tag."""
        lo, hi = parse_time(date_from), parse_time(date_to)
        if (date_from and lo is None) or (date_to and hi is None):
            raise invalid("date_from/date_to must be YYYY-MM-DD")
        since = self.clock.days_ago(days_back).date() if days_back is not None else None
        out: list[dict[str, Any]] = []
        for n in self.table("notes"):
            created = parse_time(n.get("created_at"))
            day = created.date() if created else None
            if (lo or hi or since) and day is None:
                continue
            if day is not None and (
                (lo and day < lo.date()) or (hi and day > hi.date()) or (since and day < since)
            ):
                continue
            if tag and tag.strip().lower() not in [str(t).lower() for t in n.get("tags", [])]:
                continue
            summary = {k: n.get(k, [] if k == "participants" else None) for k in _SUMMARY}
            summary.update({k: n[k] for k in _OPTIONAL_SUMMARY if k in n})
            out.append(summary)
            if len(out) >= max_results:
                break
        return {"notes": out, "total": len(out)}

    @tool("/notes/get")
    def notes_get(self, note_id: Annotated[str, Field(description="Note ID")]) -> dict[str, Any]:
        """Get a note's full content."""
        return dict(self.table("notes").require(note_id, "Note"))

    @tool("/notes/share", write=True, audit="shared")
    def notes_share(
        self,
        note_id: Annotated[str, Field(description="Note ID")],
        recipients: Annotated[list[str], Field(description="List of recipients", min_length=1)],
    ) -> dict[str, Any]:
        """Share a note with other people."""
        self.table("notes").require(note_id, "Note")
        if any(not r.strip() for r in recipients):
            raise invalid("recipients must be non-empty names or email addresses")
        now = self.clock.now().isoformat()
        record = {"note_id": note_id, "recipients": list(recipients), "timestamp": now}
        self.emit("shared", record)
        return {"status": "shared", "record": record}
