"""Helpdesk: support tickets. Claw-Eval compatible (routes under ``/helpdesk``, audit collections
``updated_tickets`` and ``closed``), plus ticket creation and comments for built-in tasks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, parse_time, tool


class Ticket(Record):
    ticket_id: str
    title: str = ""
    description: str = ""
    status: str = "open"
    priority: str = "medium"
    created_at: str = ""
    reporter: str = ""
    department: str = ""
    category: str = ""
    customer_id: str = ""
    tags: list[str] = Field(default_factory=list)
    assigned_to: str = ""


_SUMMARY = ("ticket_id", "title", "reporter", "department", "priority", "status", "created_at")
# the statuses an update may set (its schema's enum): closing takes helpdesk_close_ticket, with a resolution
UpdateStatus = Literal["open", "in_progress", "pending", "resolved"]
_PRIORITIES = ("low", "medium", "high", "critical", "urgent")


class Helpdesk(Service):
    name = "helpdesk"
    title = "Helpdesk / ticketing"
    tables: ClassVar[Mapping[str, TableDef]] = {"tickets": TableDef(Ticket, "ticket_id", "tickets.json")}

    @tool("/helpdesk/tickets")
    def helpdesk_list_tickets(
        self,
        *,
        status: Annotated[
            str, Field(description="Ticket status filter (open/in_progress/closed/all)")
        ] = "open",
        priority: Annotated[str | None, Field(description="Priority filter")] = None,
        category: Annotated[str | None, Field(description="Category filter")] = None,
        date_from: Annotated[str | None, Field(description="Created on or after (YYYY-MM-DD)")] = None,
        date_to: Annotated[str | None, Field(description="Created on or before (YYYY-MM-DD)")] = None,
    ) -> dict[str, Any]:
        """List tickets (summary fields), filtered by status, priority, category and creation date."""
        lo, hi = parse_time(date_from), parse_time(date_to)
        if (date_from and lo is None) or (date_to and hi is None):
            raise invalid("date_from/date_to must be YYYY-MM-DD")
        out = []
        for t in self.table("tickets"):
            if status != "all" and t.get("status") != status:
                continue
            if priority and str(t.get("priority", "")).lower() != priority.lower():
                continue
            if category and str(t.get("category", "")).lower() != category.lower():
                continue
            created = parse_time(t.get("created_at"))
            if lo and (created is None or created < lo):
                continue
            if hi and (created is None or created.date() > hi.date()):
                continue
            out.append({k: t.get(k, "") for k in _SUMMARY})
        return {"tickets": out, "total": len(out)}

    @tool("/helpdesk/tickets/get")
    def helpdesk_get_ticket(
        self, ticket_id: Annotated[str, Field(description="Ticket ID")]
    ) -> dict[str, Any]:
        """Get ticket details."""
        return dict(self.table("tickets").require(ticket_id, "Ticket"))

    @tool("/helpdesk/tickets/update", write=True, audit="updated_tickets")
    def helpdesk_update_ticket(
        self,
        *,
        ticket_id: Annotated[str, Field(description="Ticket ID")],
        priority: Annotated[str | None, Field(description="New priority")] = None,
        tags: Annotated[list[str] | None, Field(description="Tag list (replaces the current tags)")] = None,
        category: Annotated[str | None, Field(description="Category")] = None,
        assigned_to: Annotated[str | None, Field(description="Assignee")] = None,
        status: Annotated[
            UpdateStatus | None, Field(description="New status (to close: helpdesk_close_ticket)")
        ] = None,
        comment: Annotated[str | None, Field(description="Internal note appended to the ticket")] = None,
    ) -> dict[str, Any]:
        """Update a ticket (priority, tags, category, assignment, status, internal note)."""
        tickets = self.table("tickets")
        cur = tickets.require(ticket_id, "Ticket")
        if priority is not None and priority.lower() not in _PRIORITIES:
            raise invalid(f"priority must be one of {list(_PRIORITIES)}")
        changes: dict[str, Any] = {
            k: v
            for k, v in (
                ("priority", priority),
                ("tags", tags),
                ("category", category),
                ("assigned_to", assigned_to),
                ("status", status),
            )
            if v is not None
        }
        if comment:
            changes["comments"] = [
                *cur.get("comments", []),
                {"at": self.clock.now().isoformat(), "text": comment},
            ]
        updated = dict(tickets.update(ticket_id, **changes))
        self.emit("updated_tickets", updated)
        return {"status": "updated", "ticket": updated}

    @tool("/helpdesk/tickets/close", write=True, audit="closed")
    def helpdesk_close_ticket(
        self,
        *,
        ticket_id: Annotated[str, Field(description="Ticket ID")],
        resolution: Annotated[str, Field(description="Resolution notes")],
    ) -> dict[str, Any]:
        """Close a ticket with resolution notes."""
        tickets = self.table("tickets")
        if tickets.require(ticket_id, "Ticket").get("status") == "closed":
            raise invalid(f"Ticket {ticket_id} is already closed")
        closed = dict(tickets.update(ticket_id, status="closed", resolution=resolution))
        self.emit("closed", closed)
        return {"status": "closed", "ticket": closed}

    @tool("/helpdesk/tickets/create", write=True, audit="created_tickets")
    def helpdesk_create_ticket(
        self,
        *,
        title: Annotated[str, Field(description="Short summary", min_length=1)],
        description: Annotated[str, Field(description="Details")] = "",
        priority: Annotated[str, Field(description="low/medium/high/critical")] = "medium",
        customer_id: Annotated[str, Field(description="Customer ID, if any")] = "",
        category: Annotated[str, Field(description="Category")] = "",
    ) -> dict[str, Any]:
        """Create a new ticket."""
        if priority.lower() not in _PRIORITIES:
            raise invalid(f"priority must be one of {list(_PRIORITIES)}")
        tickets = self.table("tickets")
        n = len(tickets) + 1
        while f"TK-N{n:03d}" in tickets:
            n += 1
        rec = {
            "ticket_id": f"TK-N{n:03d}",
            "title": title,
            "description": description,
            "priority": priority,
            "status": "open",
            "customer_id": customer_id,
            "category": category,
            "created_at": self.clock.now().isoformat(),
            "tags": [],
        }
        stored = dict(tickets.put(rec))
        self.emit("created_tickets", stored)
        return {"status": "created", "ticket": stored}
