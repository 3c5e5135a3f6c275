"""Claw-Eval profile: helpdesk, crm, finance, inventory and kb, as Claw-Eval's mock services answer.

Contract (beyond :mod:`coworkenv.services.claw.base`): filters compare exact values (helpdesk
lists ``open`` tickets by default); finance compares dates as strings; kb search matches any shared
token (lower-cased words, character bigrams, single CJK characters) of the query and an article's
title, tags and content. Audit keys are Claw-Eval's.
"""

from __future__ import annotations

from typing import Any

from coworkenv.services.claw.base import ClawService, summary
from coworkenv.services.service import tool


class ClawHelpdesk(ClawService):
    name = "helpdesk"
    key = "ticket_id"
    audit_keys = ("closed", "updated_tickets")  # the order of Claw-Eval's audit body
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
        return self.get_row(ticket_id)

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
        return self.get_row(customer_id)

    @tool("/crm/export", write=True, audit="exported_reports")
    def crm_export_report(self, title: str, customer_ids: list[str], summary: str) -> dict[str, Any]:
        """Export a customer report."""
        report = self.record("exported_reports", title=title, customer_ids=customer_ids, summary=summary)
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
        return self.get_row(transaction_id)

    @tool("/finance/report/submit", write=True, audit="submitted_reports")
    def finance_report_submit(
        self, title: str, transactions: list[str], total_amount: float
    ) -> dict[str, Any]:
        """Submit an expense report."""
        report = self.record(
            "submitted_reports",
            title=title,
            transactions=transactions,
            total_amount=total_amount,
        )
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
        return self.get_row(product_id)

    @tool("/inventory/orders/create", write=True, audit="orders")
    def inventory_create_order(
        self, product_id: str, quantity: int, supplier: str | None = None
    ) -> dict[str, Any]:
        """Create a purchase order."""
        order = self.record("orders", product_id=product_id, quantity=quantity, supplier=supplier)
        return {"status": "created", "order": order}


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
        return self.get_row(article_id)

    @tool("/kb/articles/update", write=True, audit="updates")
    def kb_update_article(self, article_id: str, content: str) -> dict[str, Any]:
        """Replace an article's content."""
        if self.find(article_id) is None:
            return self.not_found(article_id)
        self.rows.update(article_id, content=content, last_updated=self.now().strftime("%Y-%m-%d"))
        self.emit("updates", {"article_id": article_id, "timestamp": self.stamp()})
        return {"status": "updated", "article_id": article_id}
