"""Anchor blocks: per service, the records a task selects from, the conditions that select them,
how an agent finds them, and the write that acts on a selected record.

Contract: ``ANCHORS[service]`` is an :class:`AnchorDef`. ``make(rng, item)`` returns a neutral
record about ``item`` (its company, external contact and topic); each of its conditions
(:mod:`~coworkenv.synth.procedural.compose.blocks`) then sets its field for the record's role. The
list call returns every planted record; ``act`` is the write on the selected records, and its
targets pin the record ids (so acting on a distractor fails its check).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from coworkenv.synth.procedural.compose.blocks import (
    TEMPORAL,
    Act,
    Cond,
    Item,
    Params,
    Row,
    absence,
    across,
    amount,
    owner,
    status,
    stock,
    temporal,
)
from coworkenv.synth.procedural.records import SAAS, Rng

__all__ = ["ACT_VARIANTS", "ANCHORS", "EXTRA_CONDS", "EXTRA_NEEDS", "TEMPORAL", "AnchorDef", "Item", "Params"]


@dataclass(frozen=True)
class AnchorDef:
    service: str
    table: str
    key: str
    prefix: str
    noun: str
    plural: str
    make: Callable[[Rng, Item], Row]
    conds: Mapping[str, Cond]
    list_call: Callable[[Rng, Params, str], tuple[str, Row]]
    get_tool: str
    act: Act
    text: str
    """A free-text field of the record (where a multi-turn task plants the stale reference)."""
    has_customer_id: bool = False

    def cond(self, kind: str) -> Cond:
        """The condition ``kind`` on this anchor: its own, or one a scenario asked for (EXTRA_CONDS)."""
        c = self.conds.get(kind) or EXTRA_CONDS.get((self.service, kind))
        if c is None:
            raise KeyError(f"{self.service} has no condition {kind!r}")
        return c


# ---------------------------------------------------------------- per-service anchors


def _h(rng: Rng, it: Item) -> Row:
    return {
        "ticket_id": it.rid,
        "title": f"{it.topic} {rng.choice(('sync failing', 'login errors', 'export stuck', 'slow reports'))}",
        "description": f"{it.company.name} reports a problem with {it.topic}.",
        "status": "open",
        "priority": "high",
        "created_at": rng.ts(-rng.randint(0, 3), 9),
        "reporter": it.contact.email,
        "department": "Support",
        "category": "technical",
        "customer_id": it.customer_id,
        "tags": [it.topic.lower()],
        "assigned_to": "",
    }


def _crm(rng: Rng, it: Item) -> Row:
    return {
        "customer_id": it.rid,
        "name": it.company.name,
        "contact_person": it.contact.name,
        "email": it.contact.email,
        "industry": rng.choice(("retail", "logistics", "health", "media")),
        "tier": "enterprise",
        "annual_revenue": rng.randint(50, 400) * 1000,
        "last_contact_date": rng.day(-rng.randint(1, 5)),
        "status": "active",
        "notes": f"{it.topic} rollout customer.",
    }


def _fin(rng: Rng, it: Item) -> Row:
    return {
        "transaction_id": it.rid,
        "date": rng.day(-rng.randint(1, 5)),
        "amount": rng.money(200, 900),
        "currency": "USD",
        "customer_id": it.customer_id,
        "customer_name": it.company.name,
        "type": "invoice",
        "category": "receivable",
        "description": f"Invoice for {it.topic} licences - {it.company.name}",
        "status": "unpaid",
    }


def _kb(rng: Rng, it: Item) -> Row:
    return {
        "article_id": it.rid,
        "title": f"{it.topic} {rng.choice(('setup guide', 'troubleshooting', 'FAQ', 'admin checklist'))}",
        "category": "how-to",
        "tags": [it.topic.lower()],
        "content": f"How to work with {it.topic} (written for {it.company.name}). Step 1: open the console.",
        "last_updated": rng.day(-rng.randint(1, 5)),
        "views": rng.randint(10, 900),
    }


def _cfg(rng: Rng, it: Item) -> Row:
    return {
        "integration_id": it.rid,
        "name": f"{it.topic} {rng.choice(SAAS)} connector",
        "service": rng.choice(("crm", "billing", "analytics", "storage")),
        "status": "active",
        "last_verified": rng.day(-rng.randint(1, 5)),
        "monthly_calls": rng.randint(100, 90000),
        "error_rate": 0.01,
        "notes": f"Used for {it.company.name}. Owner: {it.contact.email}",
    }


def _job(rng: Rng, it: Item) -> Row:
    return {
        "job_id": it.rid,
        "name": f"{it.topic.lower()}-{rng.choice(('backup', 'sync', 'report', 'cleanup'))}",
        "cron_expression": rng.choice(("0 2 * * *", "30 * * * *", "0 6 * * 1")),
        "action": f"run {it.topic.lower()} pipeline for {it.company.name}",
        "enabled": True,
        "last_status": "success",
        "last_run": rng.ts(-rng.randint(0, 1), 2),
        "created_by": it.contact.email,
        "tags": [it.topic.lower()],
    }


def _todo(rng: Rng, it: Item) -> Row:
    return {
        "task_id": it.rid,
        "title": f"{it.topic}: {rng.choice(('renewal paperwork', 'security review', 'data migration'))}",
        "description": f"For {it.company.name}.",
        "status": "pending",
        "priority": "medium",
        "due_date": rng.day(rng.randint(20, 40)),
        "tags": [it.topic.lower()],
        "created_at": rng.ts(-20),
    }


def _evt(rng: Rng, it: Item) -> Row:
    off = rng.randint(1, 10)
    return {
        "event_id": it.rid,
        "title": f"{it.company.name} {it.topic} {rng.choice(('review', 'QBR', 'renewal call'))}",
        "start_time": rng.ts(off, 15),
        "end_time": rng.ts(off, 16),
        "attendees": [it.contact.email, "me@company.com"],
        "organizer": "me@company.com",
    }


def _msg(rng: Rng, it: Item) -> Row:
    return {
        "message_id": it.rid,
        "from": it.contact.email,
        "to": "me@company.com",
        "subject": f"{it.topic} question from {it.company.name}",
        "body": f"Hi, could you help us with {it.topic}? Thanks, {it.contact.first}",
        "date": rng.ts(-rng.randint(0, 2), 10),
        "labels": ["inbox"],
        "is_read": False,
    }


def _note(rng: Rng, it: Item) -> Row:
    return {
        "note_id": it.rid,
        "title": f"{it.company.name} {it.topic} call",
        "created_at": rng.ts(-rng.randint(0, 2), 11),
        "participants": ["me", it.contact.name],
        "content": f"Discussed {it.topic} with {it.contact.name}.",
        "tags": [it.topic.lower()],
    }


def _doc(rng: Rng, it: Item) -> Row:
    return {
        "doc_id": it.rid,
        "title": f"{it.topic} {rng.choice(('design doc', 'runbook', 'summary'))} - {it.company.name}",
        "content": f"{it.topic} notes for {it.company.name}.",
        "folder": "projects",
        "author": it.contact.email,
        "created_at": rng.ts(-rng.randint(0, 2), 9),
        "tags": [it.topic.lower()],
    }


def _prod(rng: Rng, it: Item) -> Row:
    return {
        "product_id": it.rid,
        "name": f"{it.topic} {rng.choice(('module', 'kit', 'sensor', 'cable set'))}",
        "category": "components",
        "current_stock": 100,
        "min_stock_threshold": rng.randint(8, 30),
        "unit_price": rng.money(3, 90),
        "supplier": it.company.name,
    }


def _rss(rng: Rng, it: Item) -> Row:
    return {
        "article_id": it.rid,
        "title": f"{it.company.name} {rng.choice(('expands', 'launches', 'acquires'))} {it.topic} line",
        "source": rng.choice(("Industry Wire", "Market Daily", "Tech Ledger")),
        "category": "industry",
        "published_at": rng.ts(-rng.randint(0, 2), 7),
        "summary": f"News about {it.company.name}.",
        "content": f"{it.company.name} announced {it.topic} news.",
        "tags": [it.topic.lower()],
    }


def _ids(items: list[Item]) -> str:
    return ", ".join(it.rid for it in items)


def _per(  # noqa: PLR0917 - an Act's fields in order
    tool: str, audit: str, fld: str, verb: str, f: Callable[[Rng, Item, str, str], Row], text: str | None
) -> Act:
    return Act(tool, audit, fld, True, verb, lambda r, its, note, who: f(r, its[0], note, who), text)


_A: tuple[AnchorDef, ...] = (
    AnchorDef(
        "helpdesk",
        "tickets",
        "ticket_id",
        "TK-",
        "ticket",
        "tickets",
        _h,
        {
            "age": temporal("age", "created_at", True, "still open after more than {n} days"),
            "status": status("priority", ("critical", "high", "low"), "marked critical priority"),
            "owner": owner("assigned_to", "assigned to {owner}"),
        },
        lambda r, p, t: ("helpdesk_list_tickets", {"status": "open"}),
        "helpdesk_get_ticket",
        _per(
            "helpdesk_update_ticket",
            "updated_tickets",
            "ticket_id",
            "move it to in progress with a note",
            lambda r, it, note, who: {"ticket_id": it.rid, "status": "in_progress", "comment": note},
            "comments",
        ),
        "description",
        has_customer_id=True,
    ),
    AnchorDef(
        "crm",
        "customers",
        "customer_id",
        "CUS-",
        "customer account",
        "customer accounts",
        _crm,
        {
            "age": temporal("age", "last_contact_date", False, "not contacted in more than {n} days"),
            "status": status("status", ("at_risk", "watch", "active"), "marked at_risk"),
            "amount": amount("annual_revenue", "with annual revenue above USD {x}", cents=False),
        },
        lambda r, p, t: ("crm_list_customers", {}),
        "crm_get_customer",
        _per(
            "crm_update_customer",
            "updated_customers",
            "customer_id",
            "log a note on the account",
            lambda r, it, note, who: {"customer_id": it.rid, "notes": note},
            "notes",
        ),
        "notes",
    ),
    AnchorDef(
        "finance",
        "transactions",
        "transaction_id",
        "INV-",
        "unpaid invoice",
        "unpaid invoices",
        _fin,
        {
            "age": temporal("age", "date", False, "issued more than {n} days ago"),
            "amount": amount("amount", "for more than USD {x}"),
        },
        lambda r, p, t: (
            "finance_list_transactions",
            {"start_date": r.day(-(3 * p.days + 60)), "end_date": r.day(0)},
        ),
        "finance_get_transaction",
        Act(
            "finance_submit_report",
            "submitted_reports",
            "transactions",
            False,
            "submit one collections report covering exactly those invoices",
            lambda r, its, note, who: {
                "title": "Collections follow-up",
                "transactions": [it.rid for it in its],
                "total_amount": round(sum(float(it.record["amount"]) for it in its), 2),
            },
            None,
            "icontains",
        ),
        "description",
        has_customer_id=True,
    ),
    AnchorDef(
        "kb",
        "articles",
        "article_id",
        "KB-",
        "knowledge-base article",
        "knowledge-base articles",
        _kb,
        {"age": temporal("age", "last_updated", False, "not updated in more than {n} days")},
        lambda r, p, t: ("kb_search", {"query": t, "max_results": 20}),
        "kb_get_article",
        _per(
            "kb_update_article",
            "updates",
            "article_id",
            "append a dated review line to it",
            lambda r, it, note, who: {"article_id": it.rid, "content": f"{it.record['content']}\n\n{note}"},
            "content",
        ),
        "content",
    ),
    AnchorDef(
        "config",
        "integrations",
        "integration_id",
        "INT-",
        "integration",
        "integrations",
        _cfg,
        {
            "age": temporal(
                "age", "last_verified", False, "with credentials last verified more than {n} days ago"
            ),
            "status": status("status", ("error", "degraded", "active"), "in error status"),
        },
        lambda r, p, t: ("config_list_integrations", {}),
        "config_get_integration",
        _per(
            "config_update_integration",
            "updates",
            "integration_id",
            "disable it with a note",
            lambda r, it, note, who: {"integration_id": it.rid, "status": "disabled", "notes": note},
            None,
        ),
        "notes",
    ),
    AnchorDef(
        "scheduler",
        "jobs",
        "job_id",
        "JOB-",
        "scheduled job",
        "scheduled jobs",
        _job,
        {
            "status": status("last_status", ("failed", "warning", "success"), "whose last run failed"),
            "owner": owner("created_by", "owned by {owner}"),
            "age": temporal("age", "last_run", True, "that have not run in more than {n} days"),
        },
        lambda r, p, t: ("scheduler_list_jobs", {}),
        "scheduler_get_job",
        _per(
            "scheduler_update_job",
            "updated_jobs",
            "job_id",
            "pause it",
            lambda r, it, note, who: {"job_id": it.rid, "enabled": False},
            None,
        ),
        "action",
    ),
    AnchorDef(
        "todo",
        "tasks",
        "task_id",
        "todo_",
        "pending to-do",
        "pending to-dos",
        _todo,
        {
            "age": temporal("age", "due_date", False, "overdue by more than {n} days"),
            "upcoming": temporal("upcoming", "due_date", False, "due within the next {n} days"),
            "status": status("priority", ("high", "medium", "low"), "marked high priority"),
        },
        lambda r, p, t: ("todo_list_tasks", {"status": "pending"}),
        "todo_get_task",
        _per(
            "todo_update_task",
            "updated_tasks",
            "task_id",
            "set it to in progress",
            lambda r, it, note, who: {"task_id": it.rid, "status": "in_progress", "description": note},
            "description",
        ),
        "description",
    ),
    AnchorDef(
        "calendar",
        "events",
        "event_id",
        "evt_",
        "customer meeting",
        "customer meetings",
        _evt,
        {
            "upcoming": temporal("upcoming", "start_time", True, "starting within the next {n} days"),
            "owner": owner("organizer", "organized by {owner}"),
        },
        lambda r, p, t: ("calendar_list_events", {"start_date": r.day(0), "end_date": r.day(p.days + 14)}),
        "calendar_get_event",
        Act(
            "calendar_create_event",
            "created_events",
            "title",
            True,
            "book a 30-minute prep slot on the same morning (08:00 UTC), titled with the meeting id",
            lambda r, its, note, who: {
                "title": f"Prep for {its[0].rid}",
                "start_time": f"{str(its[0].record['start_time'])[:10]}T08:00:00Z",
                "end_time": f"{str(its[0].record['start_time'])[:10]}T08:30:00Z",
                "attendees": ["me@company.com"],
            },
            None,
            "icontains",
        ),
        "title",
    ),
    AnchorDef(
        "gmail",
        "messages",
        "message_id",
        "msg_",
        "customer email",
        "customer emails",
        _msg,
        {
            "age": temporal("age", "date", True, "received more than {n} days ago"),
            "recent": temporal("recent", "date", True, "received in the last {n} days"),
        },
        lambda r, p, t: ("gmail_list_messages", {"days_back": 3 * p.days + 60, "max_results": 50}),
        "gmail_get_message",
        _per(
            "gmail_reply",
            "sent",
            "in_reply_to",
            "reply to it",
            lambda r, it, note, who: {"message_id": it.rid, "body": note},
            "body",
        ),
        "body",
    ),
    AnchorDef(
        "notes",
        "notes",
        "note_id",
        "note_",
        "call note",
        "call notes",
        _note,
        {
            "recent": temporal("recent", "created_at", True, "from the last {n} days"),
            "owner": owner("participants", "that {owner} attended", as_list=True, by_name=True),
        },
        lambda r, p, t: ("notes_list", {"max_results": 50}),
        "notes_get",
        _per(
            "notes_share",
            "shared",
            "note_id",
            "share it with {who}",
            lambda r, it, note, who: {"note_id": it.rid, "recipients": [who]},
            None,
        ),
        "content",
    ),
    AnchorDef(
        "documents",
        "documents",
        "doc_id",
        "DOC-",
        "project document",
        "project documents",
        _doc,
        {
            "age": temporal("age", "created_at", True, "created more than {n} days ago"),
            "owner": owner("author", "written by {owner}"),
        },
        lambda r, p, t: ("documents_list", {"query": t}),
        "documents_get",
        Act(
            "documents_create",
            "created_documents",
            "content",
            False,
            "write one summary document listing them by id",
            lambda r, its, note, who: {"title": "Review list", "content": f"{note}\nDocuments: {_ids(its)}"},
            "content",
            "icontains",
        ),
        "content",
    ),
    AnchorDef(
        "inventory",
        "products",
        "product_id",
        "SKU-",
        "stocked product",
        "stocked products",
        _prod,
        {"amount": stock()},
        lambda r, p, t: ("inventory_list_products", {}),
        "inventory_get_product",
        _per(
            "inventory_create_order",
            "orders",
            "product_id",
            "order enough to reach twice the threshold",
            lambda r, it, note, who: {
                "product_id": it.rid,
                "quantity": 2 * int(it.record["min_stock_threshold"]) - int(it.record["current_stock"]),
            },
            None,
        ),
        "name",
    ),
    AnchorDef(
        "rss",
        "articles",
        "article_id",
        "art_",
        "news article",
        "news articles",
        _rss,
        {"recent": temporal("recent", "published_at", True, "published in the last {n} days")},
        lambda r, p, t: ("rss_list_articles", {"max_results": 50}),
        "rss_get_article",
        Act(
            "rss_publish",
            "published",
            "content",
            False,
            "publish one internal bulletin listing them by id, addressed to {who}",
            lambda r, its, note, who: {
                "title": "Market watch",
                "content": f"{note}\nArticles: {_ids(its)}",
                "recipients": [who],
            },
            "content",
            "icontains",
        ),
        "content",
    ),
)

ANCHORS: Mapping[str, AnchorDef] = MappingProxyType({a.service: a for a in _A})


def _tag(tag: str) -> Act:
    return Act(
        "helpdesk_update_ticket",
        "updated_tickets",
        "ticket_id",
        True,
        f"tag it {tag} (keeping its current tags) with a note",
        lambda r, its, note, who: {
            "ticket_id": its[0].rid,
            "tags": [*its[0].record.get("tags", []), tag],
            "comment": note,
        },
        "comments",
        pins=(("tags", tag),),
    )


def _reassign(_: str) -> Act:
    return Act(
        "helpdesk_update_ticket",
        "updated_tickets",
        "ticket_id",
        True,
        "reassign it to {who} with a note",
        lambda r, its, note, who: {"ticket_id": its[0].rid, "assigned_to": who, "comment": note},
        "comments",
        pins=(("assigned_to", "{who}"),),
    )


def _close(_: str) -> Act:
    return Act(
        "helpdesk_close_ticket",
        "closed",
        "ticket_id",
        True,
        "close it with a resolution note",
        lambda r, its, note, who: {"ticket_id": its[0].rid, "resolution": note},
        "resolution",
    )


def _run(_: str) -> Act:
    return Act(
        "scheduler_run_job",
        "runs",
        "job_id",
        True,
        "trigger a run of it now",
        lambda r, its, note, who: {"job_id": its[0].rid},
        None,
    )


def _cancel(_: str) -> Act:
    return Act(
        "calendar_delete_event",
        "deleted",
        "event_id",
        True,
        "cancel it (delete the event)",
        lambda r, its, note, who: {"event_id": its[0].rid},
        None,
    )


ACT_VARIANTS: Mapping[tuple[str, str], Callable[[str], Act]] = MappingProxyType(
    {
        ("helpdesk", "tag"): _tag,
        ("helpdesk", "reassign"): _reassign,
        ("helpdesk", "close"): _close,
        ("scheduler", "run"): _run,
        ("calendar", "delete"): _cancel,
    }
)
"""Writes on the selected records other than the anchor's own act, chosen by the scenario
(``(service, action)`` → a builder taking the scenario's value, e.g. the tag to add)."""


EXTRA_CONDS: Mapping[tuple[str, str], Cond] = MappingProxyType(
    {
        ("helpdesk", "absence"): absence(
            "assigned_to", "assigned to someone who is out of office today (their leave is in the calendar)"
        ),
        ("scheduler", "absence"): absence(
            "created_by", "owned by someone who is out of office today (their leave is in the calendar)"
        ),
        ("helpdesk", "tier"): across(
            "tier", "customer_id", "from a customer on the {tier} tier (tier on their CRM account)"
        ),
        ("finance", "tier"): across(
            "tier", "customer_id", "billed to a customer on the {tier} tier (tier on their CRM account)"
        ),
        ("finance", "duplicate"): across(
            "duplicate",
            "amount",
            "that duplicates an earlier charge: same customer, same amount, within {n} days of it "
            "(list only the later charge of each pair)",
        ),
        ("helpdesk", "no_match"): across(
            "no_match",
            "category",
            "whose category has no matching knowledge-base article (search the KB by category)",
        ),
    }
)
EXTRA_NEEDS: Mapping[str, str] = MappingProxyType(
    {"absence": "calendar", "tier": "crm", "no_match": "kb", "duplicate": "finance"}
)
"""The service a scenario-only condition reads besides the anchor's (it must be in the slot)."""
"""Conditions only a scenario asks for, needing another service (absence: the calendar's leave
events). The seeded pools never draw them, so plans that do not ask build exactly as before."""
