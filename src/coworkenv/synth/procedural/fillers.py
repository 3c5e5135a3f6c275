"""Noise records for services a slot names but its template does not use.

Contract: ``fill(b, service)`` adds ``b.noise`` unrelated, valid records to ``service`` and
exposes its read tools, so a slot may ask for more services than the template needs (the services
stage requires initial records for every service). Raises ``KeyError`` for a service it cannot
fill (the generator turns that into a clear slot error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coworkenv.synth.procedural.builder import SpecBuilder
from coworkenv.synth.procedural.records import CITIES, PROJECTS


def _ticket(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    p = b.rng.person("client.example")
    return (
        "helpdesk",
        "tickets",
        {
            "ticket_id": b.rng.uid("TK-"),
            "title": f"Question about {b.rng.choice(PROJECTS)} export",
            "description": "How do I schedule a weekly export?",
            "status": "open",
            "priority": "low",
            "created_at": b.rng.ts(-b.rng.randint(1, 20)),
            "reporter": p.email,
            "department": "Support",
            "category": "how-to",
            "tags": [],
            "assigned_to": "",
        },
    )


def _message(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    p = b.rng.person()
    return (
        "gmail",
        "messages",
        {
            "message_id": b.rng.uid("msg_"),
            "from": p.email,
            "to": "me@company.com",
            "subject": f"{b.rng.choice(CITIES)} office update",
            "body": "FYI: the office kitchen is being renovated.",
            "date": b.rng.ts(-b.rng.randint(1, 10)),
            "labels": ["inbox"],
            "is_read": True,
        },
    )


def _contact(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    p = b.rng.person()
    return (
        "contacts",
        "contacts",
        {
            "contact_id": b.rng.uid("c_"),
            "name": p.name,
            "department": p.department,
            "title": "Specialist",
            "email": p.email,
            "phone": f"+1-555-{b.rng.randint(1000, 9999)}",
        },
    )


def _customer(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    c = b.rng.company()
    p = b.rng.person(c.domain)
    return (
        "crm",
        "customers",
        {
            "customer_id": b.rng.uid("CUS-"),
            "name": c.name,
            "contact_person": p.name,
            "email": p.email,
            "industry": "services",
            "tier": "standard",
            "status": "active",
            "last_contact_date": b.rng.day(-b.rng.randint(5, 60)),
            "notes": "Quiet account.",
        },
    )


def _article(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "kb",
        "articles",
        {
            "article_id": b.rng.uid("KB-"),
            "title": f"Setting up {b.rng.choice(PROJECTS)} notifications",
            "category": "how-to",
            "tags": ["notifications"],
            "content": "Open Settings > Notifications.",
            "last_updated": b.rng.day(-b.rng.randint(30, 300)),
            "views": b.rng.randint(5, 500),
        },
    )


def _txn(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "finance",
        "transactions",
        {
            "transaction_id": b.rng.uid("TXN-"),
            "date": b.rng.day(-b.rng.randint(1, 60)),
            "amount": b.rng.money(20, 400),
            "currency": "USD",
            "type": "expense",
            "category": "office",
            "description": "Office supplies",
            "status": "completed",
        },
    )


def _document(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "documents",
        "documents",
        {
            "doc_id": b.rng.uid("DOC-"),
            "title": f"{b.rng.choice(PROJECTS)} onboarding guide",
            "content": "Welcome aboard.",
            "folder": "general",
            "author": "hr",
            "created_at": b.rng.ts(-90),
            "tags": [],
        },
    )


def _event(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    off = b.rng.randint(-3, 10)
    return (
        "calendar",
        "events",
        {
            "event_id": b.rng.uid("evt_"),
            "title": f"{b.rng.choice(PROJECTS)} standup",
            "start_time": b.rng.ts(off, 8, 30),
            "end_time": b.rng.ts(off, 8, 45),
            "attendees": ["team@company.com"],
            "organizer": "team@company.com",
        },
    )


def _todo(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "todo",
        "tasks",
        {
            "task_id": b.rng.uid("todo_"),
            "title": f"Review {b.rng.choice(PROJECTS)} backlog",
            "status": "pending",
            "priority": "low",
            "due_date": b.rng.day(b.rng.randint(3, 30)),
            "tags": [],
            "created_at": b.rng.ts(-5),
        },
    )


def _note(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "notes",
        "notes",
        {
            "note_id": b.rng.uid("note_"),
            "title": f"{b.rng.choice(CITIES)} offsite ideas",
            "created_at": b.rng.ts(-b.rng.randint(3, 40)),
            "participants": ["me"],
            "content": "Brainstorm only.",
            "tags": ["offsite"],
        },
    )


def _product(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "inventory",
        "products",
        {
            "product_id": b.rng.uid("SKU-"),
            "name": f"Spare part {b.rng.randint(100, 999)}",
            "category": "spares",
            "current_stock": 50,
            "min_stock_threshold": 10,
            "unit_price": 4.5,
            "supplier": "Parts Co",
        },
    )


def _rss(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "rss",
        "articles",
        {
            "article_id": b.rng.uid("art_"),
            "title": f"{b.rng.choice(CITIES)} opens new tech hub",
            "source": "City Wire",
            "category": "local",
            "published_at": b.rng.ts(-b.rng.randint(1, 30)),
            "summary": "A new hub opened.",
            "content": "A new hub opened downtown.",
            "tags": ["local"],
        },
    )


def _integration(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "config",
        "integrations",
        {
            "integration_id": b.rng.uid("INT-"),
            "name": f"{b.rng.choice(PROJECTS)} analytics sink",
            "service": "analytics",
            "status": "active",
            "last_verified": b.rng.day(-b.rng.randint(5, 40)),
            "monthly_calls": b.rng.randint(100, 9000),
            "error_rate": 0.01,
        },
    )


def _job(b: SpecBuilder) -> tuple[str, str, dict[str, Any]]:
    return (
        "scheduler",
        "jobs",
        {
            "job_id": b.rng.uid("JOB-"),
            "name": f"{b.rng.choice(PROJECTS).lower()}-cache-warmup",
            "cron_expression": "0 * * * *",
            "action": "warm cache",
            "enabled": True,
            "last_status": "success",
            "last_run": b.rng.ts(0, 11),
            "created_by": "platform@company.com",
            "tags": ["cache"],
        },
    )


FILLERS: dict[str, tuple[Callable[[SpecBuilder], tuple[str, str, dict[str, Any]]], tuple[str, ...]]] = {
    "helpdesk": (_ticket, ("helpdesk_list_tickets", "helpdesk_get_ticket")),
    "gmail": (_message, ("gmail_list_messages", "gmail_get_message")),
    "contacts": (_contact, ("contacts_search", "contacts_get")),
    "crm": (_customer, ("crm_list_customers", "crm_get_customer")),
    "kb": (_article, ("kb_search", "kb_get_article")),
    "finance": (_txn, ("finance_list_transactions", "finance_get_transaction")),
    "documents": (_document, ("documents_list", "documents_get")),
    "calendar": (_event, ("calendar_list_events", "calendar_get_event")),
    "todo": (_todo, ("todo_list_tasks", "todo_get_task")),
    "notes": (_note, ("notes_list", "notes_get")),
    "inventory": (_product, ("inventory_list_products", "inventory_get_product")),
    "rss": (_rss, ("rss_list_articles", "rss_get_article")),
    "config": (_integration, ("config_list_integrations", "config_get_integration")),
    "scheduler": (_job, ("scheduler_list_jobs", "scheduler_get_job")),
}


def fill(b: SpecBuilder, service: str) -> None:
    make, tools = FILLERS[service]
    for _ in range(b.noise):
        svc, table, row = make(b)
        b.add(svc, table, row)
    b.expose(*tools)
