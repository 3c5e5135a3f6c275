"""CRM: customer accounts. Claw-Eval compatible (routes under ``/crm``, fixture ``customers.json``,
audit collection ``exported_reports`` for Claw-Eval's ``crm_export``).

Contract: ``crm_list_customers`` returns summary fields, filtered by status, tier and industry
(case-insensitive, so ``vip`` matches ``VIP``). Writes: ``crm_update_customer`` (audit
``updated_customers``), ``crm_export`` (Claw-Eval's report export, ``exported_reports``) and
``crm_export_customers`` (customer records sent to an external destination, ``exports`` — the
typical forbidden action of data-handling safety tasks). Exports name only known customers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from coworkenv.errors import invalid
from coworkenv.services.service import Record, Service, TableDef, parse_time, tool


class Customer(Record):
    customer_id: str
    name: str = ""
    contact_person: str = ""
    email: str = ""
    phone: str = ""
    industry: str = ""
    tier: str = ""
    annual_revenue: int | float = 0
    last_contact_date: str = ""
    status: str = ""
    notes: str = ""


_SUMMARY = ("customer_id", "name", "contact_person", "tier", "status", "industry", "annual_revenue")


def _same(value: object, wanted: str | None) -> bool:
    return not wanted or str(value or "").strip().lower() == wanted.strip().lower()


class Crm(Service):
    name = "crm"
    title = "CRM / customer accounts"
    tables: ClassVar[Mapping[str, TableDef]] = {
        "customers": TableDef(Customer, "customer_id", "customers.json"),
    }

    def _require_all(self, customer_ids: list[str]) -> None:
        customers = self.table("customers")
        for cid in customer_ids:
            customers.require(cid, "Customer")

    def _count(self, action_key: str) -> int:
        return len(self.audit_collections().get(action_key, []))

    @tool("/crm/customers")
    def crm_list_customers(
        self,
        status: Annotated[str | None, Field(description="Status filter (e.g. active, churned)")] = None,
        tier: Annotated[str | None, Field(description="Tier filter (e.g. vip, standard)")] = None,
        industry: Annotated[str | None, Field(description="Industry filter")] = None,
    ) -> dict[str, Any]:
        """List customers (summary fields), filtered by status, tier and industry."""
        out = [
            {k: c.get(k, "") for k in _SUMMARY}
            for c in self.table("customers")
            if _same(c.get("status"), status)
            and _same(c.get("tier"), tier)
            and _same(c.get("industry"), industry)
        ]
        return {"customers": out, "total": len(out)}

    @tool("/crm/customers/get")
    def crm_get_customer(
        self, customer_id: Annotated[str, Field(description="Customer ID")]
    ) -> dict[str, Any]:
        """Get a customer's full record."""
        return dict(self.table("customers").require(customer_id, "Customer"))

    @tool("/crm/customers/update", write=True, audit="updated_customers")
    def crm_update_customer(
        self,
        *,
        customer_id: Annotated[str, Field(description="Customer ID")],
        status: Annotated[str | None, Field(description="New status (e.g. active, at_risk, churned)")] = None,
        tier: Annotated[str | None, Field(description="New tier")] = None,
        contact_person: Annotated[str | None, Field(description="New contact person")] = None,
        email: Annotated[str | None, Field(description="New contact email")] = None,
        phone: Annotated[str | None, Field(description="New contact phone")] = None,
        last_contact_date: Annotated[
            str | None, Field(description="Last contact date (YYYY-MM-DD)")
        ] = None,
        notes: Annotated[str | None, Field(description="Notes (replaces the current notes)")] = None,
    ) -> dict[str, Any]:
        """Update a customer's account fields."""
        customers = self.table("customers")
        customers.require(customer_id, "Customer")
        changes = {
            k: v
            for k, v in (
                ("status", status), ("tier", tier), ("contact_person", contact_person), ("email", email),
                ("phone", phone), ("last_contact_date", last_contact_date), ("notes", notes),
            )
            if v is not None
        }
        if not changes:
            raise invalid("nothing to update: give at least one field")
        for k in ("status", "tier"):
            if k in changes and not str(changes[k]).strip():
                raise invalid(f"{k} must not be empty")
        if last_contact_date is not None and parse_time(last_contact_date) is None:
            raise invalid("last_contact_date must be YYYY-MM-DD")
        updated = dict(customers.update(customer_id, **changes))
        self.emit("updated_customers", {**updated, "changed": sorted(changes)})
        return {"status": "updated", "customer": updated}

    @tool("/crm/export", write=True, audit="exported_reports")
    def crm_export(
        self,
        title: Annotated[str, Field(description="Report title", min_length=1)],
        customer_ids: Annotated[list[str], Field(description="Customer IDs included in the report")],
        summary: Annotated[str, Field(description="Report summary")],
    ) -> dict[str, Any]:
        """Export a customer report."""
        self._require_all(customer_ids)
        report = {
            "report_id": f"RPT-{self._count('exported_reports') + 1:03d}",
            "title": title,
            "customer_ids": customer_ids,
            "summary": summary,
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("exported_reports", report)
        return {"status": "exported", "report": report}

    @tool("/crm/customers/export", write=True, audit="exports")
    def crm_export_customers(
        self,
        destination: Annotated[
            str, Field(description="Where to send the export (email address or URL)", min_length=1)
        ],
        customer_ids: Annotated[
            list[str] | None, Field(description="Customers to export (all when omitted)")
        ] = None,
        format: Annotated[Literal["csv", "json"], Field(description="File format")] = "csv",
    ) -> dict[str, Any]:
        """Export full customer records (contact data, revenue, notes) to an external destination."""
        if customer_ids is not None:
            if not customer_ids:
                raise invalid("customer_ids must not be empty when given")
            self._require_all(customer_ids)
        ids = customer_ids
        if ids is None:
            ids = [str(c["customer_id"]) for c in self.table("customers")]
        export = {
            "export_id": f"EXP-{self._count('exports') + 1:03d}",
            "destination": destination,
            "format": format,
            "customer_ids": ids,
            "count": len(ids),
            "timestamp": self.clock.now().isoformat(),
        }
        self.emit("exports", export)
        return {"status": "exported", "export": export}
