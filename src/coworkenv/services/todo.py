"""Todo: to-do items. Claw-Eval compatible (routes under ``/todo``, audit collections
``updated_tasks`` and ``deleted``), plus ``created_tasks`` (which Claw-Eval's tasks expect but its
mock service never fills).

Statuses and priorities are checked against the usual values plus any value already present in the
task's fixture, so a typo is an error instead of a silently empty list or a junk record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, parse_time, tool


class TodoItem(Record):
    task_id: str
    title: str = ""
    description: str = ""
    status: str = "pending"
    priority: str = "medium"
    due_date: str | None = None
    tags: list[str] = Field(default_factory=list)
    created_at: str = ""


_STATUSES = ("pending", "in_progress", "completed", "blocked", "cancelled")
_PRIORITIES = ("low", "medium", "high", "urgent")
# what the write tools' schemas list (an enum), so a value the schema does not list is refused
Status = Literal["pending", "in_progress", "completed", "blocked", "cancelled"]
Priority = Literal["low", "medium", "high", "urgent"]
_ID = Annotated[str, Field(description="Task ID")]


class Todo(Service):
    name = "todo"
    title = "To-do list"
    tables: ClassVar[Mapping[str, TableDef]] = {"tasks": TableDef(TodoItem, "task_id", "tasks.json")}
    audit_keys = ("deleted", "updated_tasks", "created_tasks")

    def _allowed(self, field: str, usual: tuple[str, ...]) -> list[str]:
        present = {str(t.get(field)) for t in self.table("tasks") if t.get(field)}
        return [*usual, *sorted(present - set(usual))]

    def _check(self, field: str, value: str | None, usual: tuple[str, ...]) -> None:
        if value is not None and value not in (allowed := self._allowed(field, usual)):
            raise invalid(f"{field} must be one of {allowed}, got {value!r}")

    @staticmethod
    def _check_due(due_date: str | None) -> None:
        if due_date and parse_time(due_date) is None:
            raise invalid(f"due_date must be YYYY-MM-DD, got {due_date!r}")

    @tool("/todo/tasks")
    def todo_list_tasks(
        self,
        status: Annotated[str | None, Field(description="all/pending/in_progress/completed")] = "all",
        priority: Annotated[str | None, Field(description="Filter by priority (high/medium/low)")] = None,
    ) -> dict[str, Any]:
        """List to-do items, filtered by status and priority."""
        if status == "all":
            status = None
        self._check("status", status, _STATUSES)
        self._check("priority", priority, _PRIORITIES)
        out = [
            dict(t)
            for t in self.table("tasks")
            if (status is None or t.get("status", "pending") == status)
            and (priority is None or t.get("priority", "medium") == priority)
        ]
        return {"tasks": out, "total": len(out)}

    @tool("/todo/tasks/get")
    def todo_get_task(self, task_id: _ID) -> dict[str, Any]:
        """Get to-do item details."""
        return dict(self.table("tasks").require(task_id, "Task"))

    @tool("/todo/tasks/create", write=True, audit="created_tasks")
    def todo_create_task(
        self,
        title: Annotated[str, Field(description="Task title", min_length=1)],
        description: Annotated[str | None, Field(description="Task description")] = None,
        priority: Annotated[Priority, Field(description="Priority")] = "medium",
        due_date: Annotated[str | None, Field(description="Due date (YYYY-MM-DD)")] = None,
        tags: Annotated[list[str] | None, Field(description="List of tags")] = None,
    ) -> dict[str, Any]:
        """Create a new to-do item (status pending)."""
        self._check("priority", priority, _PRIORITIES)
        self._check_due(due_date)
        tasks = self.table("tasks")
        n = len(tasks) + 1
        while f"todo_{n:03d}" in tasks:
            n += 1
        item = {
            "task_id": f"todo_{n:03d}", "title": title, "description": description or "", "status": "pending",
            "priority": priority, "due_date": due_date, "tags": list(tags or []),
            "created_at": self.clock.now().isoformat(),
        }
        stored = dict(tasks.put(item))
        self.emit("created_tasks", stored)
        return {"status": "created", "task": stored}

    @tool("/todo/tasks/update", write=True, audit="updated_tasks")
    def todo_update_task(
        self,
        *,
        task_id: _ID,
        title: Annotated[str | None, Field(description="New title", min_length=1)] = None,
        priority: Annotated[Priority | None, Field(description="New priority")] = None,
        status: Annotated[Status | None, Field(description="New status")] = None,
        tags: Annotated[list[str] | None, Field(description="Tag list (replaces the current tags)")] = None,
        description: Annotated[str | None, Field(description="New description")] = None,
        due_date: Annotated[str | None, Field(description="New due date (YYYY-MM-DD)")] = None,
    ) -> dict[str, Any]:
        """Update a to-do item (title, priority, status, tags, description, due date)."""
        tasks = self.table("tasks")
        tasks.require(task_id, "Task")
        self._check("status", status, _STATUSES)
        self._check("priority", priority, _PRIORITIES)
        self._check_due(due_date)
        changes = {
            k: v
            for k, v in (("title", title), ("priority", priority), ("status", status), ("tags", tags),
                         ("description", description), ("due_date", due_date))
            if v is not None
        }
        if not changes:
            raise invalid("nothing to update: give title, priority, status, tags, description or due_date")
        updated = dict(tasks.update(task_id, **changes))
        self.emit("updated_tasks", updated)
        return {"status": "updated", "task": updated}

    @tool("/todo/tasks/delete", write=True, audit="deleted")
    def todo_delete_task(self, task_id: _ID) -> dict[str, Any]:
        """Permanently delete a to-do item."""
        tasks = self.table("tasks")
        removed = dict(tasks.require(task_id, "Task"))
        tasks.delete(task_id)
        self.emit("deleted", removed)
        return {"status": "deleted", "task": removed}
