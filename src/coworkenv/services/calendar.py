"""Calendar: events with attendees. Claw-Eval compatible (routes under ``/calendar``, audit
collections ``created_events`` and ``deleted``).

Dates are interpreted against the trial clock: ``calendar_list_events`` with no date lists today's
(``mock_today``) events. An event belongs to the day of its start time as written (its own UTC
offset), so ``09:00+08:00`` is on the day it says. Claw-Eval shifts its fixture dates to "next week"
at load time; we do not (the task's ``mock_today`` plays that role).
Creating an event does not check conflicts (Claw-Eval does not either); the agent must do that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime, timedelta
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, parse_time, tool


class Event(Record):
    event_id: str
    title: str = ""
    start_time: str = ""
    end_time: str = ""
    attendees: list[str] = Field(default_factory=list)
    location: str = ""
    organizer: str = ""
    description: str = ""
    status: str = ""
    recurring: bool = False


_ID = Annotated[str, Field(description="Event ID")]


def _day(value: str, field: str) -> date:
    parsed = parse_time(value)
    if parsed is None:
        raise invalid(f"{field} must be a date (YYYY-MM-DD), got {value!r}")
    return parsed.date()


def _in_window(events: Iterable[Mapping[str, Any]], lo: date, hi: date) -> list[dict[str, Any]]:
    """Events starting on a day in ``[lo, hi)``, sorted by start time (unparseable starts skipped)."""
    hits: list[tuple[datetime, dict[str, Any]]] = []
    for e in events:
        start = parse_time(e.get("start_time"))
        if start is not None and lo <= start.date() < hi:
            hits.append((start, dict(e)))
    hits.sort(key=lambda h: h[0])
    return [e for _, e in hits]


def _involves(event: Mapping[str, Any], user: str) -> bool:
    who = user.strip().lower()
    people = [*event.get("attendees", []), event.get("organizer", "")]
    return any(who == str(p).lower() or who in str(p).lower() for p in people if p)


class Calendar(Service):
    name = "calendar"
    title = "Calendar"
    tables: ClassVar[Mapping[str, TableDef]] = {"events": TableDef(Event, "event_id", "events.json")}
    audit_keys = ("deleted", "created_events")

    @tool("/calendar/events")
    def calendar_list_events(
        self,
        date: Annotated[str | None, Field(description="Query date (YYYY-MM-DD); default today")] = None,
        days: Annotated[int, Field(description="Number of days to query", ge=1, le=366)] = 1,
        start_date: Annotated[str | None, Field(description="Start date (YYYY-MM-DD)")] = None,
        end_date: Annotated[str | None, Field(description="End date, inclusive (YYYY-MM-DD)")] = None,
    ) -> dict[str, Any]:
        """List calendar events in a date range: ``date`` + ``days``, or ``start_date``..``end_date``."""
        first = start_date if start_date is not None else date
        lo = _day(first, "start_date" if start_date is not None else "date") if first else self.clock.today
        if end_date is not None:
            last = _day(end_date, "end_date")
            if last < lo:
                raise invalid(f"end_date {last} is before the start date {lo}")
            hi = last + timedelta(days=1)
        else:
            hi = lo + timedelta(days=days)
        events = _in_window(self.table("events"), lo, hi)
        return {"events": events, "total": len(events)}

    @tool("/calendar/events/get")
    def calendar_get_event(self, event_id: _ID) -> dict[str, Any]:
        """Get details of a single event."""
        return dict(self.table("events").require(event_id, "Event"))

    @tool("/calendar/user_events")
    def calendar_get_user_events(
        self,
        user: Annotated[str, Field(description="User name or email address", min_length=1)],
        date: Annotated[str, Field(description="Query date (YYYY-MM-DD)")],
    ) -> dict[str, Any]:
        """Get a user's events (as attendee or organizer) on a given date."""
        day = _day(date, "date")
        window = _in_window(self.table("events"), day, day + timedelta(days=1))
        events = [e for e in window if _involves(e, user)]
        return {"events": events, "total": len(events), "user": user}

    @tool("/calendar/events/create", write=True, audit="created_events")
    def calendar_create_event(
        self,
        title: Annotated[str, Field(description="Event title", min_length=1)],
        start_time: Annotated[str, Field(description="Start time (ISO 8601)")],
        end_time: Annotated[str, Field(description="End time (ISO 8601)")],
        attendees: Annotated[list[str] | None, Field(description="Attendees (names or emails)")] = None,
        location: Annotated[str, Field(description="Location")] = "",
    ) -> dict[str, Any]:
        """Create a new calendar event (no conflict check: look at the calendars first)."""
        start, end = parse_time(start_time), parse_time(end_time)
        if start is None or end is None:
            raise invalid("start_time and end_time must be ISO 8601 times, e.g. 2026-03-02T14:30:00Z")
        if end <= start:
            raise invalid(f"end_time {end_time} must be after start_time {start_time}")
        events = self.table("events")
        n = len(events) + 1
        while f"evt_{n:03d}" in events:
            n += 1
        event = {
            "event_id": f"evt_{n:03d}", "title": title, "start_time": start_time, "end_time": end_time,
            "attendees": list(attendees or []), "location": location, "recurring": False,
        }
        stored = dict(events.put(event))
        self.emit("created_events", stored)
        return {"status": "created", "event": stored}

    @tool("/calendar/events/delete", write=True, audit="deleted")
    def calendar_delete_event(self, event_id: _ID) -> dict[str, Any]:
        """Delete a calendar event."""
        events = self.table("events")
        removed = dict(events.require(event_id, "Event"))
        events.delete(event_id)
        self.emit("deleted", removed)
        return {"status": "deleted", "event": removed}
