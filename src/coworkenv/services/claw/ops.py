"""Claw-Eval profile: helpdesk, crm, finance, inventory, todo, scheduler, calendar and kb.

Contract (beyond :mod:`coworkenv.services.claw.base`): filters compare exact values (helpdesk
lists ``open`` tickets by default, todo ``all``); finance compares dates as strings; new ids are
``<prefix>_<n+1>`` of the current row count; calendar shifts events so the earliest starts one day
after the frozen now at its own hour and minute, and lists take ``date`` as ``YYYY-MM-DD`` (else
200 ``{"error": "Invalid date format: ..."}``); kb search matches any shared token (lower-cased
words, character bigrams, single CJK characters) of the query and an article's title, tags and
content. Audit keys are Claw-Eval's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from coworkenv.services.claw.base import ClawService, summary
from coworkenv.services.service import tool


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class ClawHelpdesk(ClawService):
    name = "helpdesk"
    key = "ticket_id"
    kind = "Ticket"

    @tool("/helpdesk/tickets")
    def helpdesk_list_tickets(self, status: str = "open") -> dict[str, Any]:
        """List tickets by status ('all' for every ticket)."""
        fields = ("ticket_id", "title", "reporter", "department", "priority", "status", "created_at")
        out = [summary(t, fields) for t in self.rows if status == "all" or t["status"] == status]
        return {"tickets": out, "total": len(out)}

    @tool("/helpdesk/tickets/get")
    def helpdesk_get_ticket(self, ticket_id: str) -> dict[str, Any]:
        """Get a ticket by ID."""
        t = self.find(ticket_id)
        return dict(t) if t is not None else self.not_found(ticket_id)

    @tool("/helpdesk/tickets/update", write=True, audit="updated_tickets")
    def helpdesk_update_ticket(
        self,
        ticket_id: str,
        priority: str | None = None,
        tags: list[str] | None = None,
        category: str | None = None,
    ) -> dict[str, Any]:
        """Update a ticket's priority, tags or category."""
        if self.find(ticket_id) is None:
            return self.not_found(ticket_id)
        given = {"priority": priority, "tags": tags, "category": category}
        updated = dict(self.rows.update(ticket_id, **{k: v for k, v in given.items() if v is not None}))
        self.emit("updated_tickets", updated)
        return {"status": "updated", "ticket": updated}

    @tool("/helpdesk/tickets/close", write=True, audit="closed")
    def helpdesk_close_ticket(self, ticket_id: str, resolution: str) -> dict[str, Any]:
        """Close a ticket with a resolution."""
        if self.find(ticket_id) is None:
            return self.not_found(ticket_id)
        closed = dict(self.rows.update(ticket_id, status="closed", resolution=resolution))
        self.emit("closed", closed)
        return {"status": "closed", "ticket": closed}


class ClawCrm(ClawService):
    name = "crm"
    key = "customer_id"
    kind = "Customer"

    @tool("/crm/customers")
    def crm_list_customers(
        self, status: str | None = None, tier: str | None = None, industry: str | None = None
    ) -> dict[str, Any]:
        """List customers, optionally by status, tier and industry."""
        fields = ("customer_id", "name", "contact_person", "tier", "status", "industry", "annual_revenue")
        out = []
        for c in self.rows:
            if (status and c["status"] != status) or (tier and c["tier"] != tier):
                continue
            if industry and c["industry"] != industry:
                continue
            out.append(summary(c, fields))
        return {"customers": out, "total": len(out)}

    @tool("/crm/customers/get")
    def crm_get_customer(self, customer_id: str) -> dict[str, Any]:
        """Get a customer by ID."""
        c = self.find(customer_id)
        return dict(c) if c is not None else self.not_found(customer_id)

    @tool("/crm/export", write=True, audit="exported_reports")
    def crm_export_report(self, title: str, customer_ids: list[str], summary: str) -> dict[str, Any]:
        """Export a customer report."""
        report = {"title": title, "customer_ids": customer_ids, "summary": summary, "timestamp": self.stamp()}
        self.emit("exported_reports", report)
        return {"status": "exported", "report": report}


class ClawFinance(ClawService):
    name = "finance"
    key = "transaction_id"
    kind = "Transaction"

    @tool("/finance/transactions")
    def finance_list_transactions(
        self, start_date: str | None = None, end_date: str | None = None
    ) -> dict[str, Any]:
        """List transactions between two dates (compared as text)."""
        out = [
            dict(t)
            for t in self.rows
            if not (start_date and t["date"] < start_date) and not (end_date and t["date"] > end_date)
        ]
        return {"transactions": out, "total": len(out)}

    @tool("/finance/transactions/get")
    def finance_get_transaction(self, transaction_id: str) -> dict[str, Any]:
        """Get a transaction by ID."""
        t = self.find(transaction_id)
        return dict(t) if t is not None else self.not_found(transaction_id)

    @tool("/finance/report/submit", write=True, audit="submitted_reports")
    def finance_report_submit(
        self, title: str, transactions: list[str], total_amount: float
    ) -> dict[str, Any]:
        """Submit an expense report."""
        report = {
            "title": title,
            "transactions": transactions,
            "total_amount": total_amount,
            "timestamp": self.stamp(),
        }
        self.emit("submitted_reports", report)
        return {"status": "submitted", "report": report}


class ClawInventory(ClawService):
    name = "inventory"
    key = "product_id"
    kind = "Product"

    @tool("/inventory/products")
    def inventory_list_products(self, category: str | None = None) -> dict[str, Any]:
        """List products, optionally by category."""
        out = [dict(p) for p in self.rows if not (category and p["category"] != category)]
        return {"products": out, "total": len(out)}

    @tool("/inventory/products/get")
    def inventory_get_product(self, product_id: str) -> dict[str, Any]:
        """Get a product by ID."""
        p = self.find(product_id)
        return dict(p) if p is not None else self.not_found(product_id)

    @tool("/inventory/orders/create", write=True, audit="orders")
    def inventory_create_order(
        self, product_id: str, quantity: int, supplier: str | None = None
    ) -> dict[str, Any]:
        """Create a purchase order."""
        order = {
            "product_id": product_id,
            "quantity": quantity,
            "supplier": supplier,
            "timestamp": self.stamp(),
        }
        self.emit("orders", order)
        return {"status": "created", "order": order}


class ClawTodo(ClawService):
    name = "todo"
    key = "task_id"
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
        self.rows.put(task)
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
        j = self.find(job_id)
        return dict(j) if j is not None else self.not_found(job_id)

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
        self.rows.put(job)
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
        e = self.find(event_id)
        return dict(e) if e is not None else self.not_found(event_id)

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
        self.rows.put(event)
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


def _tokens(text: str) -> set[str]:
    low = text.lower()
    out = set(low.split())
    out.update(b for b in (low[i : i + 2] for i in range(len(text) - 1)) if not b.isspace())
    out.update(ch for ch in text if "\u4e00" <= ch <= "\u9fff")
    return out


class ClawKb(ClawService):
    name = "kb"
    key = "article_id"
    kind = "Article"

    @tool("/kb/search")
    def kb_search(self, query: str, category: str | None = None, max_results: int = 5) -> dict[str, Any]:
        """Search articles (any shared word, bigram or CJK character)."""
        wanted = _tokens(query)
        out = []
        for a in self.rows:
            if category and a["category"] != category:
                continue
            if wanted & _tokens(a["title"] + " " + " ".join(a["tags"]) + " " + a["content"]):
                out.append(
                    {
                        **summary(a, ("article_id", "title", "category", "tags", "last_updated", "views")),
                        "snippet": a["content"][:150] + "...",
                    }
                )
        out = out[:max_results]
        return {"articles": out, "total": len(out)}

    @tool("/kb/articles/get")
    def kb_get_article(self, article_id: str) -> dict[str, Any]:
        """Get an article by ID."""
        a = self.find(article_id)
        return dict(a) if a is not None else self.not_found(article_id)

    @tool("/kb/articles/update", write=True, audit="updates")
    def kb_update_article(self, article_id: str, content: str) -> dict[str, Any]:
        """Replace an article's content."""
        if self.find(article_id) is None:
            return self.not_found(article_id)
        self.rows.update(article_id, content=content, last_updated=self.now().strftime("%Y-%m-%d"))
        self.emit("updates", {"article_id": article_id, "timestamp": self.stamp()})
        return {"status": "updated", "article_id": article_id}
