"""Claw-Eval profile: todo, scheduler and calendar, as Claw-Eval's mock services answer.

Contract (beyond :mod:`coworkenv.services.claw.base`): todo lists ``all`` tasks by default and
takes any status or priority text; scheduler filters on ``last_status``, ``enabled`` and a tag and
takes any cron text; new ids are ``<prefix>_<n+1>`` of the current row count; calendar shifts
events so the earliest starts one day after the frozen now at its own hour and minute, and lists
take ``date`` as ``YYYY-MM-DD`` (else 200 ``{"error": "Invalid date format: ..."}``). Audit keys
are Claw-Eval's (todo creations are not audited there, nor here).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, ClassVar

from coworkenv.services.claw.base import ClawService
from coworkenv.services.service import tool


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class ClawTodo(ClawService):
    name = "todo"
    key = "task_id"
    audit_keys = ("deleted", "updated_tasks")  # the order of Claw-Eval's audit body
    kind = "Task"

    @tool("/todo/tasks")
    def todo_list_tasks(self, status: str = "all") -> dict[str, Any]:
        """List tasks by status ('all' for every task)."""
        out = [dict(t) for t in self.rows if status == "all" or t["status"] == status]
        return {"tasks": out, "total": len(out)}

    @tool("/todo/tasks/update", write=True, audit="updated_tasks")
    def todo_update_task(
        self,
        task_id: str,
        title: str | None = None,
        priority: str | None = None,
        status: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Update a task's title, priority, status or tags."""
        if self.find(task_id) is None:
            return self.not_found(task_id)
        given = {"title": title, "priority": priority, "status": status, "tags": tags}
        updated = dict(self.rows.update(task_id, **{k: v for k, v in given.items() if v is not None}))
        self.emit("updated_tasks", updated)
        return {"status": "updated", "task": updated}

    @tool("/todo/tasks/create", write=True)
    def todo_create_task(
        self,
        title: str,
        description: str | None = None,
        priority: str = "medium",
        due_date: str | None = None,
    ) -> dict[str, Any]:
        """Create a task."""
        task: dict[str, Any] = {
            "task_id": f"todo_{len(self.rows) + 1:03d}",
            "title": title,
            "description": description or "",
            "status": "pending",
            "priority": priority,
            "due_date": due_date,
            "tags": [],
            "created_at": self.stamp(),
        }
        self.rows.append(task)
        return {"status": "created", "task": task}

    @tool("/todo/tasks/delete", write=True, audit="deleted")
    def todo_delete_task(self, task_id: str) -> dict[str, Any]:
        """Delete a task."""
        cur = self.find(task_id)
        if cur is None:
            return self.not_found(task_id)
        self.rows.delete(task_id)
        self.emit("deleted", cur)
        return {"status": "deleted", "task": dict(cur)}


class ClawScheduler(ClawService):
    name = "scheduler"
    key = "job_id"
    audit_keys = ("created_jobs", "updated_jobs", "deleted_jobs")
    kind = "Job"

    @tool("/scheduler/jobs")
    def scheduler_list_jobs(
        self, status: str | None = None, enabled: bool | None = None, tag: str | None = None
    ) -> dict[str, Any]:
        """List jobs, optionally by last status, enabled flag and tag."""
        out = []
        for j in self.rows:
            if status and j.get("last_status") != status:
                continue
            if enabled is not None and j.get("enabled") != enabled:
                continue
            if tag and tag not in j.get("tags", []):
                continue
            out.append(
                {
                    "job_id": j["job_id"],
                    "name": j["name"],
                    "cron_expression": j["cron_expression"],
                    "enabled": j["enabled"],
                    "last_status": j.get("last_status"),
                    "last_run": j.get("last_run"),
                    "next_run": j.get("next_run"),
                    "tags": j.get("tags", []),
                }
            )
        return {"jobs": out, "total": len(out)}

    @tool("/scheduler/jobs/get")
    def scheduler_get_job(self, job_id: str) -> dict[str, Any]:
        """Get a job by ID."""
        return self.get_row(job_id)

    @tool("/scheduler/jobs/create", write=True, audit="created_jobs")
    def scheduler_create_job(
        self,
        *,
        name: str,
        cron_expression: str,
        action: str,
        enabled: bool = True,
        tags: list[str] | None = None,
        created_by: str | None = None,
    ) -> dict[str, Any]:
        """Create a job."""
        job = {
            "job_id": f"JOB-{len(self.rows) + 1:03d}",
            "name": name,
            "cron_expression": cron_expression,
            "action": action,
            "enabled": enabled,
            "last_run": None,
            "next_run": None,
            "last_status": None,
            "created_by": created_by,
            "tags": tags or [],
            "created_at": self.stamp(),
            "execution_history": [],
        }
        self.rows.append(job)  # a list, as theirs: a key already taken after a delete is kept twice
        self.emit("created_jobs", job)
        return {"status": "created", "job": job}

    @tool("/scheduler/jobs/update", write=True, audit="updated_jobs")
    def scheduler_update_job(
        self,
        *,
        job_id: str,
        enabled: bool | None = None,
        cron_expression: str | None = None,
        name: str | None = None,
        action: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Update a job (enable/disable, schedule, name, action, tags)."""
        if self.find(job_id) is None:
            return self.not_found(job_id)
        given = {
            "enabled": enabled,
            "cron_expression": cron_expression,
            "name": name,
            "action": action,
            "tags": tags,
        }
        updated = dict(self.rows.update(job_id, **{k: v for k, v in given.items() if v is not None}))
        self.emit("updated_jobs", updated)
        return {"status": "updated", "job": updated}

    @tool("/scheduler/jobs/delete", write=True, audit="deleted_jobs")
    def scheduler_delete_job(self, job_id: str) -> dict[str, Any]:
        """Delete a job."""
        cur = self.find(job_id)
        if cur is None:
            return self.not_found(job_id)
        self.rows.delete(job_id)
        self.emit("deleted_jobs", cur)
        return {"status": "deleted", "job": dict(cur)}

    @tool("/scheduler/jobs/history")
    def scheduler_job_history(self, job_id: str, limit: int = 10) -> dict[str, Any]:
        """A job's execution history (newest first, as stored)."""
        j = self.find(job_id)
        if j is None:
            return self.not_found(job_id)
        history = list(j.get("execution_history", []))
        return {"job_id": job_id, "history": history[:limit], "total": len(history)}


def _day(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None


class ClawCalendar(ClawService):
    name = "calendar"
    key = "event_id"
    audit_keys = ("deleted", "created_events")
    kind = "Event"

    def seed(self) -> None:
        rows = list(self.rows)
        if not rows:
            return
        earliest = min(_parse(r["start_time"]) for r in rows)
        target = (self.now() + timedelta(days=1)).replace(
            hour=earliest.hour, minute=earliest.minute, second=0, microsecond=0
        )
        delta = target - earliest
        for r in rows:
            moved = {
                k: (_parse(r[k]) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")
                for k in ("start_time", "end_time")
                if r.get(k)
            }
            self.rows.seed({**r, **moved})

    def _on_day(self, start: datetime, days: int) -> list[dict[str, Any]]:
        end = start + timedelta(days=days)
        out = [dict(e) for e in self.rows if start <= _parse(e["start_time"]) < end]
        return sorted(out, key=lambda e: e["start_time"])

    # theirs: ``if req is None: req = ListEventsRequest(date="2026-03-02")``
    no_body: ClassVar[Mapping[str, Mapping[str, Any]]] = MappingProxyType(
        {"calendar_list_events": {"date": "2026-03-02"}}
    )

    @tool("/calendar/events")
    def calendar_list_events(self, date: str, days: int = 1) -> dict[str, Any]:
        """List events from ``date`` (YYYY-MM-DD) for ``days`` days."""
        start = _day(date)
        if start is None:
            return {"error": f"Invalid date format: {date}"}
        out = self._on_day(start, days)
        return {"events": out, "total": len(out)}

    @tool("/calendar/events/get")
    def calendar_get_event(self, event_id: str) -> dict[str, Any]:
        """Get an event by ID."""
        return self.get_row(event_id)

    @tool("/calendar/events/create", write=True, audit="created_events")
    def calendar_create_event(
        self,
        title: str,
        start_time: str,
        end_time: str,
        attendees: list[str] = [],  # noqa: B006 - never mutated; a body model's default, as theirs
        location: str = "",
    ) -> dict[str, Any]:
        """Create an event."""
        event = {
            "event_id": f"evt_{len(self.rows) + 1:03d}",
            "title": title,
            "start_time": start_time,
            "end_time": end_time,
            "attendees": list(attendees),
            "location": location,
            "recurring": False,
        }
        self.rows.append(event)
        self.emit("created_events", event)
        return {"status": "created", "event": event}

    @tool("/calendar/user_events")
    def calendar_get_user_events(self, user: str, date: str) -> dict[str, Any]:
        """A user's events on ``date`` (YYYY-MM-DD)."""
        start = _day(date)
        if start is None:
            return {"error": f"Invalid date format: {date}"}
        out = [
            e
            for e in self._on_day(start, 1)
            if user in e.get("attendees", []) or any(user in a for a in e.get("attendees", []))
        ]
        return {"events": out, "total": len(out), "user": user}

    @tool("/calendar/events/delete", write=True, audit="deleted")
    def calendar_delete_event(self, event_id: str) -> dict[str, Any]:
        """Delete an event."""
        cur = self.find(event_id)
        if cur is None:
            return self.not_found(event_id)
        self.rows.delete(event_id)
        self.emit("deleted", cur)
        return {"status": "deleted", "event": dict(cur)}
