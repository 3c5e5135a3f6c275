"""Claw-Eval profile: gmail, contacts, notes, rss and config, as Claw-Eval's mock services answer.

Contract (beyond :mod:`coworkenv.services.claw.base`): gmail shifts every message date by one
offset so the newest is one day before the trial's frozen now (dates written
``%Y-%m-%dT%H:%M:%SZ``); its audit keys are ``sent_messages`` and ``drafts``. Contacts search is a
case-sensitive substring of the name (and of the department when given). Notes list the first
``max_results`` notes. RSS feeds are derived from the articles. Config lists integrations without
their secrets and answers them in full by id.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from coworkenv.services.claw.base import ClawService, summary
from coworkenv.services.service import tool


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class ClawGmail(ClawService):
    name = "gmail"
    key = "message_id"
    audit_keys = ("sent_messages", "drafts")  # the order of Claw-Eval's audit body
    kind = "Message"

    def seed(self) -> None:
        rows = list(self.rows)
        if not rows:
            return
        delta = (self.now() - timedelta(days=1)) - max(_parse(r["date"]) for r in rows)
        for r in rows:
            self.rows.seed({**r, "date": (_parse(r["date"]) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")})

    @tool("/gmail/messages")
    def gmail_list_messages(self, days_back: int = 7, max_results: int = 20) -> dict[str, Any]:
        """Get the list of messages in the inbox."""
        cutoff = self.now() - timedelta(days=days_back)
        fields = ("message_id", "from", "subject", "date", "is_read", "labels")
        out = [summary(m, fields) for m in self.rows if _parse(m["date"]) >= cutoff]
        out = out[:max_results]
        return {"messages": out, "total": len(out)}

    @tool("/gmail/messages/get")
    def gmail_get_message(self, message_id: str) -> dict[str, Any]:
        """Get the detailed content of an email by its message ID."""
        return self.get_row(message_id)

    @tool("/gmail/send", write=True, audit="sent_messages")
    def gmail_send_message(self, to: str, subject: str, body: str) -> dict[str, Any]:
        """Send an email."""
        msg = self.record("sent_messages", to=to, subject=subject, body=body)
        return {"status": "sent", "message": msg}

    @tool("/gmail/drafts/save", write=True, audit="drafts")
    def gmail_save_draft(
        self, to: str, subject: str, body: str, reply_to_message_id: str | None = None
    ) -> dict[str, Any]:
        """Save an email as a draft (not sent)."""
        draft = self.record(
            "drafts",
            to=to,
            subject=subject,
            body=body,
            reply_to_message_id=reply_to_message_id,
        )
        return {"status": "draft_saved", "draft": draft}


class ClawContacts(ClawService):
    name = "contacts"
    key = "contact_id"
    kind = "Contact"

    @tool("/contacts/search")
    def contacts_search(self, query: str, department: str | None = None) -> dict[str, Any]:
        """Search contacts by name (and department)."""
        out = [
            dict(c)
            for c in self.rows
            if query in c["name"] and (department is None or department in c["department"])
        ]
        return {"contacts": out, "total": len(out)}

    @tool("/contacts/get")
    def contacts_get(self, contact_id: str) -> dict[str, Any]:
        """Get a contact's details by ID."""
        return self.get_row(contact_id)

    @tool("/contacts/send_message", write=True, audit="sent_messages")
    def contacts_send_message(self, contact_id: str, message: str) -> dict[str, Any]:
        """Send a message to a contact."""
        record = self.record("sent_messages", contact_id=contact_id, message=message)
        return {"status": "sent", "record": record}


class ClawNotes(ClawService):
    name = "notes"
    key = "note_id"
    kind = "Note"

    @tool("/notes/list")
    def notes_list(self, max_results: int = 10) -> dict[str, Any]:
        """List meeting notes."""
        fields = ("note_id", "title", "created_at", "participants", "duration_minutes")
        out = [summary(n, fields) for n in list(self.rows)[:max_results]]
        return {"notes": out, "total": len(out)}

    @tool("/notes/get")
    def notes_get(self, note_id: str) -> dict[str, Any]:
        """Get a note by ID."""
        return self.get_row(note_id)

    @tool("/notes/share", write=True, audit="shared")
    def notes_share(self, note_id: str, recipients: list[str]) -> dict[str, Any]:
        """Share a note with recipients."""
        record = self.record("shared", note_id=note_id, recipients=recipients)
        return {"status": "shared", "record": record}


class ClawRss(ClawService):
    name = "rss"
    key = "article_id"
    kind = "Article"

    @tool("/rss/feeds")
    def rss_list_feeds(self, category: str | None = None) -> dict[str, Any]:
        """List feeds (derived from the articles' sources)."""
        feeds: dict[str, dict[str, Any]] = {}
        for a in self.rows:
            src, cat = a["source"], a["category"]
            if category and cat != category:
                continue
            feed = feeds.setdefault(src, {"source": src, "categories": [], "article_count": 0})
            if cat not in feed["categories"]:
                feed["categories"].append(cat)
            feed["article_count"] += 1
        out = list(feeds.values())
        return {"feeds": out, "total": len(out)}

    @tool("/rss/articles")
    def rss_list_articles(
        self, source: str | None = None, category: str | None = None, max_results: int = 20
    ) -> dict[str, Any]:
        """List articles, optionally by source and category."""
        fields = ("article_id", "title", "source", "category", "published_at", "summary", "word_count")
        out = [
            summary(a, fields)
            for a in self.rows
            if not (source and a["source"] != source) and not (category and a["category"] != category)
        ]
        out = out[:max_results]
        return {"articles": out, "total": len(out)}

    @tool("/rss/articles/get")
    def rss_get_article(self, article_id: str) -> dict[str, Any]:
        """Get an article by ID."""
        return self.get_row(article_id)

    @tool("/rss/publish", write=True, audit="published")
    def rss_publish(
        self,
        title: str,
        content: str,
        recipients: list[str] = [],  # noqa: B006 - never mutated; a body model's default, as theirs
    ) -> dict[str, Any]:
        """Publish a newsletter."""
        record = self.record("published", title=title, content=content, recipients=list(recipients))
        return {"status": "published", "record": record}


class ClawConfig(ClawService):
    name = "config"
    key = "integration_id"
    audit_keys = ("updates", "notifications")
    kind = "Integration"

    @tool("/config/integrations")
    def config_list_integrations(self, status: str | None = None) -> dict[str, Any]:
        """List integrations (summaries, without secrets)."""
        fields = (
            "integration_id",
            "name",
            "service",
            "status",
            "last_verified",
            "monthly_calls",
            "error_rate",
        )
        out = [summary(i, fields) for i in self.rows if not (status and i["status"] != status)]
        return {"integrations": out, "total": len(out)}

    @tool("/config/integrations/get")
    def config_get_integration(self, integration_id: str) -> dict[str, Any]:
        """Get an integration's full configuration."""
        return self.get_row(integration_id)

    @tool("/config/integrations/update", write=True, audit="updates")
    def config_update_integration(
        self, integration_id: str, status: str | None = None, notes: str | None = None
    ) -> dict[str, Any]:
        """Update an integration's status or notes."""
        cur = self.find(integration_id)
        if cur is None:
            return self.not_found(integration_id)
        changes: dict[str, Any] = {}
        if status:
            changes["status"] = status
        if notes:
            changes["notes"] = notes
        updated = self.rows.update(integration_id, **changes) if changes else cur
        given = {"integration_id": integration_id, "status": status, "notes": notes}
        self.emit(
            "updates",
            {
                "integration_id": integration_id,
                "changes": {k: v for k, v in given.items() if v is not None},
                "timestamp": self.stamp(),
            },
        )
        return {"status": "updated", "integration": dict(updated)}

    @tool("/config/notify", write=True, audit="notifications")
    def config_send_notification(self, to: str, subject: str, body: str) -> dict[str, Any]:
        """Send a notification."""
        record = self.record("notifications", to=to, subject=subject, body=body)
        return {"status": "sent", "notification": record}
