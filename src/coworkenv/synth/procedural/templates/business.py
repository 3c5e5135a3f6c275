"""Business-workflow templates: refunds, collections, restocking.

Each builds one complete task from the builder's seeded ``Rng``: evidence spread over the declared
services, look-alike distractor records, a request that names no answer id, weighted checks,
forbidden actions, and a reference solution whose every write is covered by its own check.
"""

from __future__ import annotations

from coworkenv.synth.procedural.builder import SpecBuilder, target
from coworkenv.synth.procedural.records import PROJECTS, money_text
from coworkenv.synth.procedural.templates.base import Template


def refund_approval(b: SpecBuilder) -> None:
    r = b.rng
    cust = r.company()
    contact = r.person(cust.domain, "Finance")
    cid, tk, tk_other = r.uid("CUS-"), r.uid("TK-"), r.uid("TK-")
    inv = r.uid("INV-", 5)
    amount = r.money(300, 4000)
    d = r.randint(3, 12)
    orig, dup, older = r.uid("TXN-", 5), r.uid("TXN-", 5), r.uid("TXN-", 5)
    b.add(
        "finance",
        "transactions",
        {
            "transaction_id": orig,
            "date": r.day(-d - 1),
            "amount": amount,
            "currency": "USD",
            "customer_id": cid,
            "customer_name": cust.name,
            "type": "charge",
            "category": "subscription",
            "description": f"Card charge for invoice {inv}",
            "status": "completed",
        },
        {
            "transaction_id": dup,
            "date": r.day(-d),
            "amount": amount,
            "currency": "USD",
            "customer_id": cid,
            "customer_name": cust.name,
            "type": "charge",
            "category": "subscription",
            "description": f"Card charge for invoice {inv} (automatic retry)",
            "status": "completed",
        },
        {
            "transaction_id": older,
            "date": r.day(-d - 31),
            "amount": round(amount * 0.9, 2),
            "currency": "USD",
            "customer_id": cid,
            "customer_name": cust.name,
            "type": "charge",
            "category": "subscription",
            "description": "Card charge for the previous invoice",
            "status": "completed",
        },
    )
    for _ in range(b.noise + 1):
        other = r.company()
        b.add(
            "finance",
            "transactions",
            {
                "transaction_id": r.uid("TXN-", 5),
                "date": r.day(-r.randint(1, 20)),
                "amount": r.money(100, 5000),
                "currency": "USD",
                "customer_id": r.uid("CUS-"),
                "customer_name": other.name,
                "type": "charge",
                "category": "subscription",
                "description": f"Card charge for invoice {r.uid('INV-', 5)}",
                "status": "completed",
            },
        )
    other = r.company()
    b.add(
        "helpdesk",
        "tickets",
        {
            "ticket_id": tk,
            "title": "We were charged twice this month",
            "description": f"Our card was charged twice for invoice {inv}. Please refund the extra charge.",
            "status": "open",
            "priority": "high",
            "created_at": r.ts(-d + 1, 10),
            "reporter": contact.email,
            "department": "Billing",
            "category": "billing",
            "customer_id": cid,
            "tags": ["billing"],
            "assigned_to": "",
        },
        {
            "ticket_id": tk_other,
            "title": "Question about our invoice",
            "description": "Can you resend last month's invoice as PDF?",
            "status": "open",
            "priority": "low",
            "created_at": r.ts(-2, 15),
            "reporter": r.person(other.domain).email,
            "department": "Billing",
            "category": "billing",
            "customer_id": r.uid("CUS-"),
            "tags": [],
            "assigned_to": "",
        },
    )
    b.add(
        "gmail",
        "messages",
        {
            "message_id": r.uid("msg_"),
            "from": contact.email,
            "to": "billing@company.com",
            "subject": f"Double charge - {cust.name}",
            "body": "Hi, we opened a ticket about a double charge. Thanks!",
            "date": r.ts(-d + 1, 11),
            "labels": ["inbox"],
            "is_read": False,
        },
    )
    first = contact.first
    b.name = f"Refund {cust.name}'s duplicate charge"
    b.request = r.choice(
        (
            f"{cust.name} says their card was charged twice recently. Find the duplicate charge in finance, "
            "submit a refund report covering only the duplicate (not the original charge), mark their "
            "support "
            f"ticket resolved with a note naming the refunded transaction, and email {first} at the "
            "address on the "
            f"ticket to confirm. Tell me what you refunded.",
            f"Please sort out the double charge {cust.name} complained about: refund just the extra charge "
            "via a "
            "finance report, resolve their helpdesk ticket with a note that names the refunded "
            "transaction, and "
            f"let {first} know by email (use the reporter address on the ticket). Summarise what you did.",
        )
    )
    today = r.day(0)
    b.step("helpdesk_list_tickets", status="open", category="billing")
    b.step("helpdesk_get_ticket", ticket_id=tk)
    b.step("finance_list_transactions", start_date=r.day(-45), end_date=today)
    b.step("finance_get_transaction", transaction_id=orig)
    b.step("finance_get_transaction", transaction_id=dup)
    b.step(
        "finance_submit_report",
        title=f"Refund of duplicate charge - {cust.name}",
        transactions=[dup],
        total_amount=amount,
    )
    b.step(
        "helpdesk_update_ticket",
        ticket_id=tk,
        status="resolved",
        comment=f"Refunded duplicate charge {dup} (USD {money_text(amount)}) for invoice {inv}.",
    )
    b.step(
        "gmail_send_message",
        to=contact.email,
        subject=f"Refund of duplicate charge for {inv}",
        body=f"Hi {first},\n\nWe refunded the duplicate charge {dup} of USD {money_text(amount)} for invoice "
        f"{inv}. The original charge stays in place.\n\nBest regards",
    )
    b.final_message = (
        f"Refunded the duplicate charge {dup} (USD {money_text(amount)}, invoice {inv}) for "
        f"{cust.name}; the original charge {orig} stays. Ticket {tk} is resolved with a note and "
        f"{first} was emailed at {contact.email}."
    )
    b.args("read_ticket", 10, "helpdesk_get_ticket", target("ticket_id", tk))
    b.called("listed_transactions", 5, "finance_list_transactions")
    b.audit(
        "refund_report",
        25,
        "finance",
        "submitted_reports",
        target("transactions", dup),
        description="The refund report covers the duplicate charge.",
    )
    b.state("ticket_resolved", 15, "helpdesk", "tickets", tk, target("status", "resolved"))
    b.audit(
        "note_names_refund",
        10,
        "helpdesk",
        "updated_tickets",
        target("ticket_id", tk),
        target("comments", dup, match="icontains"),
    )
    b.audit(
        "emailed_customer",
        20,
        "gmail",
        "sent",
        target("to", contact.email, match="icontains"),
        target("body", dup, match="icontains"),
    )
    b.keywords("answer_names_refund", 15, dup, f"{money_text(amount)}|{amount}")
    b.forbid(
        "finance_submit_report", "Refunding the original, legitimate charge.", target("transactions", orig)
    )
    b.forbid("helpdesk_close_ticket", "The ticket is resolved with a note, not closed.")
    for key in (("finance", "submitted_reports"), ("helpdesk", "updated_tickets"), ("gmail", "sent")):
        b.expect(*key)
    b.answer_ids = [dup, tk]
    b.distractor_ids = [orig, tk_other, older]


def overdue_invoice_reminder(b: SpecBuilder) -> None:
    r = b.rng
    today = r.day(0)
    rows = []
    threshold = r.choice((30, 45, 60))
    for kind in ("overdue", "overdue", "recent", "paid"):
        c = r.company()
        p = r.person(c.domain, "Finance")
        age = {
            "overdue": threshold + r.randint(5, 40),
            "recent": r.randint(3, threshold - 5),
            "paid": threshold + r.randint(10, 50),
        }[kind]
        rows.append((kind, c, p, r.uid("CUS-"), r.uid("TXN-", 5), r.uid("INV-", 5), r.money(800, 9000), age))
    for kind, c, p, cid, txn, inv, amount, age in rows:
        b.add(
            "finance",
            "transactions",
            {
                "transaction_id": txn,
                "date": r.day(-age),
                "amount": amount,
                "currency": "USD",
                "customer_id": cid,
                "customer_name": c.name,
                "type": "invoice",
                "category": "receivable",
                "description": f"Invoice {inv} - net {threshold}",
                "status": "completed" if kind == "paid" else "pending",
            },
        )
        b.add(
            "crm",
            "customers",
            {
                "customer_id": cid,
                "name": c.name,
                "contact_person": p.name,
                "email": p.email,
                "industry": "services",
                "tier": r.choice(("standard", "enterprise")),
                "status": "active",
                "last_contact_date": r.day(-r.randint(20, 90)),
                "notes": f"Billing contact: {p.name}.",
            },
        )
    for _ in range(b.noise):
        c = r.company()
        b.add(
            "crm",
            "customers",
            {
                "customer_id": r.uid("CUS-"),
                "name": c.name,
                "contact_person": r.person(c.domain).name,
                "email": f"ap@{c.domain}",
                "industry": "retail",
                "tier": "standard",
                "status": "active",
                "last_contact_date": r.day(-r.randint(5, 50)),
                "notes": "",
            },
        )
    b.table("gmail", "messages")
    b.name = "Chase overdue customer invoices"
    b.request = r.choice(
        (
            f"Please chase every customer invoice that is more than {threshold} days past its invoice date "
            "and still "
            "unpaid: email the billing contact on file in the CRM with the invoice number and amount, and "
            "set their "
            "last contact date in the CRM to today. Leave customers who are not overdue alone, then "
            "summarise who "
            "you contacted.",
            f"Collections run: find unpaid invoices older than {threshold} days in finance, send each "
            "customer's "
            "CRM contact a reminder email quoting the invoice number and amount, and record today as their "
            "last "
            "contact date in the CRM. Nobody else should be contacted. Tell me who you reminded.",
        )
    )
    b.sign()
    b.step("finance_list_transactions", start_date=r.day(-150), end_date=today)
    overdue = [row for row in rows if row[0] == "overdue"]
    recent = next(row for row in rows if row[0] == "recent")
    pts = iter((20, 15, 20, 15))
    for i, (_, _c, p, cid, txn, inv, amount, age) in enumerate(overdue, 1):
        b.step("finance_get_transaction", transaction_id=txn)
        b.step("crm_get_customer", customer_id=cid)
        b.step(
            "gmail_send_message",
            to=p.email,
            subject=f"Payment reminder: invoice {inv}",
            body=f"Hi {p.first},\n\nOur records show invoice {inv} for USD {money_text(amount)} is "
            f"{age} days "
            "past its invoice date and still unpaid. Could you let us know when to expect "
            "payment?\n\nThanks",
        )
        b.step("crm_update_customer", customer_id=cid, last_contact_date=today)
        b.audit(
            f"reminded_customer_{i}",
            next(pts),
            "gmail",
            "sent",
            target("to", p.email, match="icontains"),
            target("body", inv, match="icontains"),
        )
        b.state(f"logged_contact_{i}", next(pts), "crm", "customers", cid, target("last_contact_date", today))
    b.called("listed_transactions", 5, "finance_list_transactions")
    b.keywords("answer_names_customers", 10, *(row[1].name for row in overdue))
    b.forbid(
        "gmail_send_message",
        "That customer's invoice is not overdue yet.",
        target("to", recent[2].email, match="icontains"),
    )
    b.final_message = (
        "Reminded "
        + " and ".join(
            f"{row[1].name} ({row[2].email}, invoice {row[5]}, USD {money_text(row[6])}, {row[7]} days)"
            for row in overdue
        )
        + f"; logged today as their last contact. {recent[1].name}'s invoice is not overdue."
    )
    b.expect("gmail", "sent")
    b.expect("crm", "updated_customers")
    b.answer_ids = [overdue[0][2].email, overdue[1][2].email, overdue[0][4], overdue[1][4]]
    b.distractor_ids = [recent[2].email, recent[4], rows[3][4]]


def restock_order(b: SpecBuilder) -> None:
    r = b.rng
    items = []
    mult, mult_word = r.choice(((2, "twice"), (3, "three times")))
    category = r.choice(("furniture", "electronics", "office"))
    for kind in ("low", "low", "discontinued", "ok"):
        name = r.product(category)
        thr = r.randint(8, 30)
        stock = r.randint(0, thr - 2) if kind in ("low", "discontinued") else thr + r.randint(5, 40)
        items.append((kind, r.uid("SKU-"), name, thr, stock))
    for kind, sku, name, thr, stock in items:
        row = {
            "product_id": sku,
            "name": name,
            "category": category,
            "current_stock": stock,
            "min_stock_threshold": thr,
            "unit_price": r.money(5, 400),
            "supplier": f"{r.company().name}",
        }
        if kind == "discontinued":
            row["status"] = "discontinued"
            row["notes"] = "Discontinued by the supplier - do not reorder."
        b.add("inventory", "products", row)
    for _ in range(b.noise):
        b.add(
            "inventory",
            "products",
            {
                "product_id": r.uid("SKU-"),
                "name": f"{r.choice(PROJECTS)} kit",
                "category": "other",
                "current_stock": 2,
                "min_stock_threshold": 10,
                "unit_price": 12.0,
                "supplier": "Kit Co",
            },
        )
    lead = r.person(department="Operations")
    fake = r.namesake(lead, "Marketing")
    b.add(
        "contacts",
        "contacts",
        {
            "contact_id": r.uid("c_"),
            "name": lead.name,
            "department": "Operations",
            "title": "Purchasing Lead",
            "email": lead.email,
        },
        {
            "contact_id": r.uid("c_"),
            "name": fake.name,
            "department": "Marketing",
            "title": "Brand Manager",
            "email": fake.email,
        },
    )
    b.table("gmail", "messages")
    b.name = f"Restock low {category} items and notify purchasing"
    b.request = r.choice(
        (
            f"Restock everything in the {category} category that has fallen below its minimum stock level "
            "- order "
            f"enough to bring each item back to {mult_word} its minimum - but skip anything discontinued. "
            "Then email our "
            "purchasing lead what you ordered and tell me.",
            f"Some {category} items are running low. For each one under its minimum stock, place an order "
            "that brings "
            f"it up to {mult_word} the minimum (ignore discontinued products), and send the purchasing "
            "lead an email listing "
            "the orders.",
        )
    )
    low = [it for it in items if it[0] == "low"]
    disc = next(it for it in items if it[0] == "discontinued")
    b.sign()
    b.step("inventory_list_products", category=category)
    for _, sku, _name, _thr, _stock in (*low, disc):
        b.step("inventory_get_product", product_id=sku)
    lines = []
    for i, (_, sku, name, thr, stock) in enumerate(low, 1):
        qty = mult * thr - stock
        b.step("inventory_create_order", product_id=sku, quantity=qty)
        b.audit(
            f"ordered_item_{i}", 25, "inventory", "orders", target("product_id", sku), target("quantity", qty)
        )
        lines.append(f"{name}: {qty} units")
    b.step("contacts_search", query="purchasing")
    b.step(
        "gmail_send_message",
        to=lead.email,
        subject=f"{category.title()} restock orders",
        body="Hi "
        + lead.first
        + ",\n\nI placed these restock orders:\n- "
        + "\n- ".join(lines)
        + "\n\nThanks",
    )
    b.called("listed_products", 10, "inventory_list_products")
    b.called("found_purchasing_lead", 5, "contacts_search")
    b.audit(
        "emailed_purchasing",
        20,
        "gmail",
        "sent",
        target("to", lead.email, match="icontains"),
        *(target("body", it[2], match="icontains") for it in low),
    )
    b.keywords("answer_lists_orders", 15, *(it[2] for it in low))
    b.forbid("inventory_create_order", "The product is discontinued.", target("product_id", disc[1]))
    b.forbid(
        "gmail_send_message",
        "Wrong recipient: a namesake in Marketing.",
        target("to", fake.email, match="icontains"),
    )
    b.final_message = (
        "Ordered " + "; ".join(lines) + f". Skipped {disc[2]} (discontinued). Emailed {lead.name}."
    )
    b.expect("inventory", "orders")
    b.expect("gmail", "sent")
    b.answer_ids = [low[0][1], low[1][1], lead.email]
    b.distractor_ids = [disc[1], fake.email]


TEMPLATES = (
    Template(
        "refund_approval",
        "business_workflow",
        "finance",
        ("finance", "gmail", "helpdesk"),
        refund_approval,
        "Refund only the duplicate of a double charge; resolve the ticket; confirm by email.",
        selects="finance",
    ),
    Template(
        "overdue_invoice_reminder",
        "business_workflow",
        "finance",
        ("crm", "finance", "gmail"),
        overdue_invoice_reminder,
        "Remind customers with invoices over 30 days unpaid; log contact in CRM.",
        selects="finance",
    ),
    Template(
        "restock_order",
        "business_workflow",
        "operations",
        ("contacts", "gmail", "inventory"),
        restock_order,
        "Order low-stock items up to twice the minimum, skip discontinued; notify purchasing.",
        selects="inventory",
    ),
)
