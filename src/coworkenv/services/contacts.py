"""Contacts: a company directory. Claw-Eval compatible (routes under ``/contacts``, fixture
``contacts.json``, audit collection ``sent_messages``).

Contract: ``contacts_search`` returns every contact matching any query term (see
:func:`coworkenv.services.kb.search_terms`) in name (3 points), email (2), title or department (1),
best first, so "David Zhang" also finds "David Chang" and "Dave Zhang" — the near namesakes
disambiguation tasks are built on. ``department`` is a case-insensitive substring filter.
Claw-Eval's task T075 routes ``contacts_search`` at ``/gmail/contacts/search`` (an endpoint its gmail
server lacks); here the tool has the one route ``/contacts/search``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.kb import score_fields, search_terms
from coworkenv.services.service import Record, Service, TableDef, tool


class Contact(Record):
    contact_id: str
    name: str
    department: str = ""
    title: str = ""
    email: str = ""
    phone: str = ""
    location: str = ""
    notes: str = ""
    responsibilities: list[str] = Field(default_factory=list)


class Contacts(Service):
    name = "contacts"
    title = "Contacts directory"
    tables: ClassVar[Mapping[str, TableDef]] = {"contacts": TableDef(Contact, "contact_id", "contacts.json")}

    @tool("/contacts/search")
    def contacts_search(
        self,
        query: Annotated[str, Field(description="Search keyword (name, email or title)")],
        department: Annotated[str | None, Field(description="Filter by department")] = None,
        max_results: Annotated[int, Field(description="Maximum number of results", ge=1)] = 10,
    ) -> dict[str, Any]:
        """Search contacts by name (also email and title); closest matches first."""
        terms = search_terms(query)
        if not terms:
            raise invalid("query must contain at least one search term")
        dept = (department or "").strip().lower()
        scored: list[tuple[float, int, dict[str, Any]]] = []
        for i, c in enumerate(self.table("contacts")):
            if dept and dept not in str(c.get("department", "")).lower():
                continue
            score = score_fields(terms, [
                (3, str(c.get("name", ""))),
                (2, str(c.get("email", ""))),
                (1, f"{c.get('title', '')} {c.get('department', '')}"),
            ])
            if score > 0:
                scored.append((-score, i, dict(c)))
        scored.sort(key=lambda t: (t[0], t[1]))
        out = [c for _, _, c in scored[:max_results]]
        return {"contacts": out, "total": len(out)}

    @tool("/contacts/get")
    def contacts_get(self, contact_id: Annotated[str, Field(description="Contact ID")]) -> dict[str, Any]:
        """Get detailed contact information by ID."""
        return dict(self.table("contacts").require(contact_id, "Contact"))

    @tool("/contacts/send_message", write=True, audit="sent_messages")
    def contacts_send_message(
        self,
        contact_id: Annotated[str, Field(description="Contact ID")],
        message: Annotated[str, Field(description="Message content")],
    ) -> dict[str, Any]:
        """Send a message to a contact."""
        contact = self.table("contacts").require(contact_id, "Contact")
        if not message.strip():
            raise invalid("message must not be empty")
        record = {
            "contact_id": contact_id,
            "name": contact.get("name", ""),
            "email": contact.get("email", ""),
            "message": message,
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("sent_messages", record)
        return {"status": "sent", "record": record}
