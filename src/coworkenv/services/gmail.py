"""Gmail: an inbox of messages. Claw-Eval compatible (routes under ``/gmail``, fixture ``inbox.json``).

Contract: ``gmail_list_messages`` returns the messages dated within ``days_back`` days of the mock
clock's now (never wall time), in fixture order, at most ``max_results``; sending appends to the
audit collection ``sent`` and saving a draft to ``drafts`` (the action keys Claw-Eval's
``expected_actions`` use; Claw-Eval's own ``GET /gmail/audit`` calls the first ``sent_messages``).
Reading never changes state; ``gmail_mark_read`` and ``gmail_reply`` are additions for built-in tasks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, field_validator

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, parse_time, tool


class Message(Record):
    """One inbox message. ``from`` is a Python keyword, so the field is ``from_`` aliased to it."""

    model_config = ConfigDict(
        extra="allow", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )

    message_id: str
    from_: str = Field(default="", alias="from")
    to: str = ""
    subject: str = ""
    body: str = ""
    date: str
    labels: list[str] = Field(default_factory=list)
    is_read: bool = False

    @field_validator("date")
    @classmethod
    def _iso_date(cls, v: str) -> str:
        if parse_time(v) is None:
            raise ValueError(f"date must be an ISO date or datetime, got {v!r}")
        return v


_SUMMARY = ("message_id", "from", "subject", "date", "is_read", "labels")
_ADDRESS = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$")


def _check_recipients(to: str) -> None:
    """Each comma/semicolon-separated recipient must be an address (``Name <a@b.c>`` accepted)."""
    parts = [p.strip() for p in re.split(r"[,;]", to) if p.strip()]
    if not parts:
        raise invalid("to must name at least one recipient email address")
    for p in parts:
        m = re.search(r"<([^<>]+)>\s*$", p)
        addr = m.group(1).strip() if m else p
        if not _ADDRESS.match(addr):
            raise invalid(f"recipient {p!r} is not an email address")


class Gmail(Service):
    name = "gmail"
    title = "Email (Gmail)"
    tables: ClassVar[Mapping[str, TableDef]] = {"messages": TableDef(Message, "message_id", "inbox.json")}

    def _next_id(self, action_key: str, prefix: str) -> str:
        return f"{prefix}_{len(self.audit_collections().get(action_key, [])) + 1:03d}"

    @tool("/gmail/messages")
    def gmail_list_messages(
        self,
        days_back: Annotated[int, Field(description="Fetch emails from this many recent days", ge=0)] = 7,
        max_results: Annotated[int, Field(description="Maximum number of results to return", ge=1)] = 20,
    ) -> dict[str, Any]:
        """Get the list of messages in the inbox received in the last ``days_back`` days."""
        cutoff = self.clock.days_ago(days_back)
        out = []
        for m in self.table("messages"):
            when = parse_time(m.get("date"))
            if when is None or when < cutoff:
                continue
            out.append({k: m.get(k) for k in _SUMMARY})
        out = out[:max_results]
        return {"messages": out, "total": len(out)}

    @tool("/gmail/messages/get")
    def gmail_get_message(
        self, message_id: Annotated[str, Field(description="Message ID")]
    ) -> dict[str, Any]:
        """Get the detailed content of an email by its message ID."""
        return dict(self.table("messages").require(message_id, "Message"))

    @tool("/gmail/send", write=True, audit="sent")
    def gmail_send_message(
        self,
        to: Annotated[str, Field(description="Recipient email address (comma-separated for several)")],
        subject: Annotated[str, Field(description="Email subject")],
        body: Annotated[str, Field(description="Email body")],
    ) -> dict[str, Any]:
        """Send an email."""
        _check_recipients(to)
        msg = {
            "message_id": self._next_id("sent", "sent"),
            "to": to,
            "subject": subject,
            "body": body,
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("sent", msg)
        return {"status": "sent", "message": msg}

    @tool("/gmail/drafts/save", write=True, audit="drafts")
    def gmail_save_draft(
        self,
        to: Annotated[str, Field(description="Recipient email address")],
        subject: Annotated[str, Field(description="Email subject")],
        body: Annotated[str, Field(description="Email body")],
        reply_to_message_id: Annotated[
            str | None, Field(description="ID of the message this replies to")
        ] = None,
    ) -> dict[str, Any]:
        """Save an email as a draft (not sent)."""
        if not to.strip():
            raise invalid("to must not be empty")
        if reply_to_message_id is not None:
            self.table("messages").require(reply_to_message_id, "Message")
        draft = {
            "draft_id": self._next_id("drafts", "draft"),
            "to": to,
            "subject": subject,
            "body": body,
            "reply_to_message_id": reply_to_message_id,
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("drafts", draft)
        return {"status": "draft_saved", "draft": draft}

    @tool("/gmail/messages/reply", write=True, audit="sent")
    def gmail_reply(
        self,
        message_id: Annotated[str, Field(description="ID of the message to reply to")],
        body: Annotated[str, Field(description="Reply body", min_length=1)],
    ) -> dict[str, Any]:
        """Reply to a message: sends to its sender with a ``Re:`` subject."""
        orig = self.table("messages").require(message_id, "Message")
        to = str(orig.get("from", ""))
        _check_recipients(to)
        subject = str(orig.get("subject", ""))
        if not subject.lower().startswith("re:"):
            subject = f"Re: {subject}"
        msg = {
            "message_id": self._next_id("sent", "sent"),
            "to": to,
            "subject": subject,
            "body": body,
            "in_reply_to": message_id,
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("sent", msg)
        return {"status": "sent", "message": msg}

    @tool("/gmail/messages/mark_read", write=True, audit="marked_read")
    def gmail_mark_read(
        self,
        message_id: Annotated[str, Field(description="Message ID")],
        is_read: Annotated[bool, Field(description="True to mark read, false to mark unread")] = True,
    ) -> dict[str, Any]:
        """Mark a message read (or unread)."""
        messages = self.table("messages")
        messages.require(message_id, "Message")
        updated = dict(messages.update(message_id, is_read=is_read))
        self.emit("marked_read", {"message_id": message_id, "is_read": is_read})
        return {"status": "updated", "message_id": message_id, "is_read": updated["is_read"]}
