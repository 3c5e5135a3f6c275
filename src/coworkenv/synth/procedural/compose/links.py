"""Join blocks: evidence in other services that an answer record leads to through a shared entity.

Contract: each ``link_<service>(ctx)`` plants the joined records for every answer *and* every
distractor (so following a distractor leads somewhere plausible), adds the reads a careful agent
makes, one check pinning the join, and what it reveals to the writes: ``crm`` — the customer record
by its id (account contact, account manager); ``contacts`` — the colleague's address, with a
same-first-name look-alike in another department; ``kb`` — the procedure to cite, beside a
deprecated look-alike; ``notes``/``documents`` — the policy that sets the threshold and the
escalation contact, beside a superseded version with another threshold.
"""

from __future__ import annotations

from collections.abc import Callable

from coworkenv.synth.procedural.builder import target
from coworkenv.synth.procedural.compose.anchors import TEMPORAL, Item
from coworkenv.synth.procedural.compose.blocks import Row
from coworkenv.synth.procedural.compose.context import Ctx
from coworkenv.synth.procedural.records import Person, Rng


def crm_account(r: Rng, it: Item, tier: str, manager: Person) -> Row:
    """The CRM account behind an answer or distractor record (its customer, tier, manager)."""
    return {
        "customer_id": it.customer_id,
        "name": it.company.name,
        "contact_person": it.contact.name,
        "email": it.contact.email,
        "industry": r.choice(("retail", "logistics", "health", "media")),
        "tier": tier,
        "status": "active",
        "last_contact_date": r.day(-r.randint(3, 40)),
        "notes": f"Account manager: {manager.name}.",
    }


def link_crm(ctx: Ctx) -> None:
    r, b, p = ctx.r, ctx.b, ctx.p
    planted = [] if ctx.tiers else [*ctx.items, *ctx.near]  # a tier condition planted them already
    for it in planted:
        b.add(
            "crm", "customers", crm_account(r, it, "enterprise", p.owner if it in ctx.items else p.namesake)
        )
    if not ctx.anchor.has_customer_id:
        ctx.reads.append(("crm_list_customers", {}))
    for it in ctx.items if not ctx.tiers else ():
        ctx.reads.append(("crm_get_customer", {"customer_id": it.customer_id}))
    b.args("read_account", 6, "crm_get_customer", target("customer_id", ctx.items[0].customer_id))
    if "contacts" in ctx.rc.links:
        ctx.who_phrase = "the account manager named on their CRM record (address in contacts)"
    else:
        ctx.customer_recipient = True
        ctx.who_phrase = "the customer contact on their CRM record"


def link_contacts(ctx: Ctx) -> None:
    r, b, p = ctx.r, ctx.b, ctx.p
    # an absent owner's contact record names their backup (the namesake's names another): the
    # writes go to the backup found there, not to someone the request names
    away = "absence" in ctx.rc.conds and ctx.who is not None and ctx.who not in (p.owner, p.namesake)
    backups = {p.owner.name: ctx.who, p.namesake.name: r.person(department=p.namesake.department)}
    for person in (p.owner, p.namesake):
        row = {
            "contact_id": r.uid("c_"),
            "name": person.name,
            "department": person.department,
            "title": "Account manager" if person is p.owner else "Analyst",
            "email": person.email,
            "phone": f"+1-555-{r.randint(1000, 9999)}",
        }
        backup = backups[person.name]
        if away and backup is not None:
            row["notes"] = f"Backup while away: {backup.name} ({backup.email})"
        b.add("contacts", "contacts", row)
    ctx.owner_contact = b.records["contacts"]["contacts"][-2]["contact_id"]
    if away:
        for backup in backups.values():
            assert backup is not None
            b.add(
                "contacts",
                "contacts",
                {
                    "contact_id": r.uid("c_"),
                    "name": backup.name,
                    "department": backup.department,
                    "title": "Engineer",
                    "email": backup.email,
                    "phone": f"+1-555-{r.randint(1000, 9999)}",
                },
            )
        ctx.who_phrase = "their backup (named on the absent colleague's contact record)"
    ctx.reads.append(("contacts_search", {"query": p.owner.name}))
    b.called("looked_up_colleague", 5, "contacts_search")
    ctx.customer_recipient = False
    if not ctx.who_phrase:
        ctx.who_phrase = f"{p.owner.name} from {p.owner.department} (address in contacts)"


def link_kb(ctx: Ctx) -> None:
    r, b = ctx.r, ctx.b
    good, old = r.uid("KB-"), r.uid("KB-")
    steps = "1) confirm the account owner, 2) record the finding on the record, 3) notify the owner"
    b.add(
        "kb",
        "articles",
        {
            "article_id": good,
            "title": f"{ctx.topic} escalation procedure",
            "category": "procedure",
            "tags": [ctx.topic.lower(), "procedure"],
            "content": f"Current procedure for {ctx.topic} escalations: {steps}. Cite this article id.",
            "last_updated": r.day(-r.randint(5, 30)),
            "views": r.randint(50, 500),
        },
        {
            "article_id": old,
            "title": f"{ctx.topic} escalation procedure (deprecated)",
            "category": "procedure",
            "tags": [ctx.topic.lower(), "deprecated"],
            "content": "DEPRECATED - replaced by the current escalation procedure. Do not cite.",
            "last_updated": r.day(-r.randint(400, 700)),
            "views": r.randint(500, 2000),
        },
    )
    ctx.reads.append(("kb_search", {"query": f"{ctx.topic} escalation procedure"}))
    ctx.reads.append(("kb_get_article", {"article_id": good}))
    b.args("read_procedure", 6, "kb_get_article", target("article_id", good))
    ctx.cite = good
    ctx.clauses.append(
        f"Cite the current {ctx.topic} escalation procedure from the knowledge base in each note."
    )


def _policy(ctx: Ctx, service: str) -> None:
    r, b, p = ctx.r, ctx.b, ctx.p
    a = ctx.anchor
    title = f"{ctx.topic} {a.noun} policy"
    limited = [k for k in ctx.rc.conds if k in TEMPORAL or k == "amount"]
    rule = " and ".join(a.cond(k).phrase(p) for k in limited) if limited else "as listed"
    old_days = p.days * 2 if p.days < 60 else p.days // 2
    old_p = type(p)(old_days, p.amount * 2, p.namesake, p.owner, p.other)
    old_rule = " and ".join(a.cond(k).phrase(old_p) for k in limited) if limited else "as listed"
    ids = []
    for t, rule_text, contact, tag in (
        (title, rule, p.owner, "current"),
        (f"{title} (superseded)", old_rule, p.namesake, "superseded"),
    ):
        rid = r.uid("note_" if service == "notes" else "DOC-")
        ids.append(rid)
        body = f"{tag.upper()}: act on {a.plural} {rule_text}. Escalation contact: {contact.name}."
        if service == "notes":
            row = {
                "note_id": rid,
                "title": t,
                "created_at": r.ts(-r.randint(5, 60)),
                "participants": ["me"],
                "content": body,
                "tags": ["policy", tag],
            }
        else:
            row = {
                "doc_id": rid,
                "title": t,
                "content": body,
                "folder": "policies",
                "author": "ops",
                "created_at": r.ts(-r.randint(5, 60)),
                "tags": ["policy", tag],
            }
        b.add(service, "notes" if service == "notes" else "documents", row)
    if service == "notes":
        ctx.reads += [("notes_list", {"tag": "policy"}), ("notes_get", {"note_id": ids[0]})]
    else:
        ctx.reads += [("documents_list", {"query": "policy"}), ("documents_get", {"doc_id": ids[0]})]
    b.args("read_policy", 6, f"{service}_get", target("note_id" if service == "notes" else "doc_id", ids[0]))
    ctx.policy_title = title
    if "contacts" in ctx.rc.links and "crm" not in ctx.rc.links:
        ctx.who_phrase = "the escalation contact the policy names (address in contacts)"


LINKERS: dict[str, Callable[[Ctx], None]] = {
    "crm": link_crm,
    "contacts": link_contacts,
    "kb": link_kb,
    "notes": lambda c: _policy(c, "notes"),
    "documents": lambda c: _policy(c, "documents"),
}
