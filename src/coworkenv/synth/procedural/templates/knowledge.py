"""Knowledge & content templates: KB-guided ticket handling, news digests, meeting action items."""

from __future__ import annotations

from coworkenv.synth.procedural.builder import SpecBuilder, target
from coworkenv.synth.procedural.records import CITIES, PROJECTS
from coworkenv.synth.procedural.templates.base import Template

TOPICS = (
    (
        "SSO certificate renewal",
        "sso",
        "identity-oncall",
        "1) Download the new IdP certificate. 2) Upload it under Security > SSO. 3) Test a login. 4) "
        "Remove the old one.",
    ),
    (
        "webhook signature failures",
        "webhooks",
        "integrations-team",
        "1) Confirm the signing secret version. 2) Rotate the secret. 3) Replay failed deliveries. 4) "
        "Monitor for 1 hour.",
    ),
    (
        "data export timeouts",
        "exports",
        "data-platform",
        "1) Split the export by month. 2) Enable async export. 3) Share the download link. 4) Confirm "
        "completion.",
    ),
    (
        "MFA device reset",
        "mfa",
        "identity-oncall",
        "1) Verify identity by callback. 2) Revoke the old device. 3) Send an enrolment link. 4) Confirm "
        "login.",
    ),
    (
        "API rate-limit errors",
        "api",
        "api-platform",
        "1) Check the plan's quota. 2) Enable burst credits. 3) Advise exponential backoff. 4) Review "
        "usage in 24 h.",
    ),
)

NEWS = ("cloud security", "supply chain", "renewable energy", "fintech", "robotics", "healthcare AI")


def kb_ticket_resolution(b: SpecBuilder) -> None:
    r = b.rng
    topic, cat, team, procedure = r.choice(TOPICS)
    at_risk, healthy = r.company(), r.company()
    cid, cid2 = r.uid("CUS-"), r.uid("CUS-")
    p1, p2 = r.person(at_risk.domain), r.person(healthy.domain)
    b.add(
        "crm",
        "customers",
        {
            "customer_id": cid,
            "name": at_risk.name,
            "contact_person": p1.name,
            "email": p1.email,
            "industry": "services",
            "tier": "enterprise",
            "status": "at_risk",
            "last_contact_date": r.day(-12),
            "notes": "Renewal in 6 weeks; two escalations this quarter.",
        },
        {
            "customer_id": cid2,
            "name": healthy.name,
            "contact_person": p2.name,
            "email": p2.email,
            "industry": "retail",
            "tier": "enterprise",
            "status": "active",
            "last_contact_date": r.day(-3),
            "notes": "Healthy, expanding.",
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
                "email": f"it@{c.domain}",
                "industry": "media",
                "tier": "standard",
                "status": r.choice(("active", "churned")),
                "last_contact_date": r.day(-40),
            },
        )
    tk, tk2 = r.uid("TK-"), r.uid("TK-")
    b.add(
        "helpdesk",
        "tickets",
        {
            "ticket_id": tk,
            "title": f"Urgent: {topic}",
            "description": f"We need help with {topic}; users are blocked.",
            "status": "open",
            "priority": "critical",
            "created_at": r.ts(-1, 8),
            "reporter": p1.email,
            "department": "Support",
            "category": cat,
            "customer_id": cid,
            "tags": [cat],
            "assigned_to": "",
        },
        {
            "ticket_id": tk2,
            "title": f"{topic.capitalize()} question",
            "description": f"Issue with {topic}.",
            "status": "open",
            "priority": "critical",
            "created_at": r.ts(0, 7),
            "reporter": p2.email,
            "department": "Support",
            "category": cat,
            "customer_id": cid2,
            "tags": [cat],
            "assigned_to": "",
        },
    )
    for _ in range(b.noise):
        b.add(
            "helpdesk",
            "tickets",
            {
                "ticket_id": r.uid("TK-"),
                "title": "Invoice PDF request",
                "status": "open",
                "priority": "low",
                "created_at": r.ts(-4),
                "category": "billing",
                "customer_id": cid,
                "reporter": p1.email,
            },
        )
    kb, kb_old = r.uid("KB-"), r.uid("KB-")
    b.add(
        "kb",
        "articles",
        {
            "article_id": kb,
            "title": f"{topic.capitalize()}: current procedure",
            "category": cat,
            "tags": [cat],
            "content": f"Use for {topic}. {procedure} Keep the ticket in_progress with {team} until "
            "confirmed.",
            "last_updated": r.day(-r.randint(10, 60)),
            "views": r.randint(50, 400),
        },
        {
            "article_id": kb_old,
            "title": f"{topic.capitalize()} (legacy) - DEPRECATED",
            "category": cat,
            "tags": [cat, "deprecated"],
            "content": "DEPRECATED - do not use. Legacy steps for the v1 console.",
            "last_updated": r.day(-r.randint(300, 600)),
            "views": r.randint(500, 2000),
        },
    )
    b.name = f"KB-guided handling of an at-risk account's {topic} ticket"
    b.request = r.choice(
        (
            f"One of the accounts our CRM flags as at risk has an open critical ticket about {topic}. Find "
            "that ticket, "
            "look up the current procedure in the knowledge base (ignore anything deprecated), and update "
            "the ticket: "
            f"set it to in_progress, assign it to {team}, and add an internal note that cites the article. "
            "Do not close "
            "it. Tell me which ticket and article you used.",
            f"An at-risk customer (see the CRM) is blocked by {topic}. Please locate their open critical "
            "ticket, apply "
            "the current KB procedure (not the deprecated one): move the ticket to in_progress, assign "
            f"{team}, and "
            "leave an internal note citing the article. Report the ticket and article ids.",
        )
    )
    b.sign()
    b.step("crm_list_customers", status="at_risk")
    b.step("helpdesk_list_tickets", status="open", priority="critical")
    b.step("helpdesk_get_ticket", ticket_id=tk)
    b.step("kb_search", query=topic)
    b.step("kb_get_article", article_id=kb)
    b.step(
        "helpdesk_update_ticket",
        ticket_id=tk,
        status="in_progress",
        assigned_to=team,
        comment=f"Following {kb}: {procedure}",
    )
    b.final_message = (
        f"Updated {tk} ({at_risk.name}, at risk): in_progress, assigned to {team}, with a note "
        f"citing {kb}. Ignored the deprecated {kb_old} and {healthy.name}'s ticket {tk2}."
    )
    b.called("listed_crm", 5, "crm_list_customers")
    b.args("read_ticket", 10, "helpdesk_get_ticket", target("ticket_id", tk))
    b.args("read_current_article", 15, "kb_get_article", target("article_id", kb))
    b.state("ticket_in_progress", 20, "helpdesk", "tickets", tk, target("status", "in_progress"))
    b.state("ticket_assigned", 20, "helpdesk", "tickets", tk, target("assigned_to", team))
    b.audit(
        "note_cites_article",
        15,
        "helpdesk",
        "updated_tickets",
        target("ticket_id", tk),
        target("comments", kb, match="icontains"),
    )
    b.keywords("answer_names_ids", 15, tk, kb)
    b.forbid("helpdesk_close_ticket", "The ticket stays open until the customer confirms.")
    b.forbid(
        "helpdesk_update_ticket",
        "The healthy account's ticket is not the one asked about.",
        target("ticket_id", tk2),
    )
    b.expose("crm_get_customer", "kb_get_article")
    b.expect("helpdesk", "updated_tickets")
    b.answer_ids = [tk, kb, cid]
    b.distractor_ids = [tk2, kb_old, cid2]


def news_digest(b: SpecBuilder) -> None:
    r = b.rng
    topic = r.choice(NEWS)
    others = [t for t in NEWS if t != topic]
    fresh = []
    for i in range(3):
        aid = r.uid("art_")
        title = (
            f"{r.choice(CITIES)} {r.choice(('firms', 'regulators', 'startups', 'researchers'))} "
            f"{r.choice(('bet on', 'rethink', 'scale up', 'warn about'))} {topic} #{r.randint(10, 99)}"
        )
        source = r.choice(("Daily Ledger", "Tech Wire", "Market Pulse", "Signal Weekly"))
        b.add(
            "rss",
            "articles",
            {
                "article_id": aid,
                "title": title,
                "source": source,
                "category": topic,
                "published_at": r.ts(-i - 1, 7 + i),
                "summary": f"Summary of {title}.",
                "content": f"{title}. Full story.",
                "tags": [topic],
            },
        )
        fresh.append((aid, title, source))
    stale = r.uid("art_")
    stale_title = f"{topic.capitalize()} outlook for the year"
    b.add(
        "rss",
        "articles",
        {
            "article_id": stale,
            "title": stale_title,
            "source": "Tech Wire",
            "category": topic,
            "published_at": r.ts(-r.randint(15, 40)),
            "summary": "Older piece.",
            "content": "Older piece.",
            "tags": [topic],
        },
    )
    for _ in range(b.noise):
        t = r.choice(others)
        b.add(
            "rss",
            "articles",
            {
                "article_id": r.uid("art_"),
                "title": f"Weekly {t} roundup",
                "source": "Tech Wire",
                "category": t,
                "published_at": r.ts(-2),
                "summary": "Other topic.",
                "tags": [t],
            },
        )
    folder = r.choice(("digests", "research", "briefings"))
    b.add(
        "documents",
        "documents",
        {
            "doc_id": r.uid("DOC-"),
            "title": f"{topic.capitalize()} digest (old)",
            "content": stale_title,
            "folder": folder,
            "author": "me",
            "created_at": r.ts(-30),
            "tags": ["digest"],
        },
    )
    week = r.day(-(r.date_of(0).weekday()))
    title = f"{topic.capitalize()} digest - week of {week}"
    b.name = f"Weekly {topic} news digest"
    b.request = r.choice(
        (
            f"Put together a digest of the {topic} news from our feeds published in the last 7 days, as a "
            "document "
            f"titled '{title}' in the {folder} folder: one line per article with its title and source. "
            "Don't publish "
            "it anywhere yet. Tell me how many articles made it in.",
            f"Could you compile this week's {topic} articles (last 7 days only) from the RSS feeds into a "
            "new document "
            f"'{title}' (folder: {folder}), listing each article's title and source? Keep it internal - no "
            "publishing.",
        )
    )
    b.sign()
    b.step("rss_list_articles", category=topic)
    for aid, _, _ in fresh:
        b.step("rss_get_article", article_id=aid)
    body = "\n".join(f"- {t} ({s})" for _, t, s in fresh)
    b.step("documents_create", title=title, content=body, folder=folder, tags=["digest", topic])
    b.final_message = (
        f"Created '{title}' in {folder} with 3 articles:\n{body}\nSkipped the older '{stale_title}'."
    )
    b.called("listed_articles", 10, "rss_list_articles")
    for i, (aid, _, _) in enumerate(fresh, 1):
        b.args(f"read_article_{i}", 8, "rss_get_article", target("article_id", aid))
    b.audit(
        "digest_lists_articles",
        36,
        "documents",
        "created_documents",
        *(target("content", t, match="icontains") for _, t, _ in fresh),
    )
    b.audit(
        "digest_titled_and_filed",
        15,
        "documents",
        "created_documents",
        target("title", title),
        target("folder", folder),
    )
    b.keywords("answer_counts", 15, "3|three", title)
    b.forbid("rss_publish", "The digest is internal; nothing may be published yet.")
    b.forbid(
        "documents_create",
        "The stale article is older than 7 days.",
        target("content", stale_title, match="icontains"),
    )
    b.expose("documents_list")
    b.expect("documents", "created_documents")
    b.answer_ids = [fresh[0][0], fresh[1][0], fresh[2][0]]
    b.distractor_ids = [stale]


def meeting_action_items(b: SpecBuilder) -> None:
    r = b.rng
    project = r.pick(PROJECTS, "project")
    me = r.person(department="Engineering")
    peer = r.person(department="Design")
    fake = r.namesake(peer, "Legal")
    acts = r.sample(
        (
            "update the rollout checklist",
            "draft the customer FAQ",
            "review the load-test results",
            "book the launch retro room",
            "refresh the pricing page copy",
            "migrate the staging dashboards",
        ),
        4,
    )
    due1, due2, due3 = r.randint(2, 6), r.randint(7, 12), r.randint(3, 9)
    latest, old = r.uid("note_"), r.uid("note_")
    b.add(
        "notes",
        "notes",
        {
            "note_id": latest,
            "title": f"{project} weekly sync",
            "created_at": r.ts(-1, 15),
            "participants": [me.name, peer.name],
            "tags": [project.lower(), "sync"],
            "content": f"Action items:\n- {me.name} to {acts[0]} by {r.day(due1)}\n- {me.name} to "
            f"{acts[1]} by "
            f"{r.day(due2)}\n- {peer.name} to {acts[2]} by {r.day(due3)}\nThe item to {acts[3]} from the "
            "previous sync is cancelled.",
        },
        {
            "note_id": old,
            "title": f"{project} weekly sync",
            "created_at": r.ts(-8, 15),
            "participants": [me.name, peer.name],
            "tags": [project.lower(), "sync"],
            "content": f"Action items:\n- {me.name} to {acts[3]} by {r.day(2)}",
        },
    )
    for _ in range(b.noise):
        b.add(
            "notes",
            "notes",
            {
                "note_id": r.uid("note_"),
                "title": f"{r.choice(CITIES)} hiring chat",
                "created_at": r.ts(-3),
                "participants": [me.name],
                "content": "No actions.",
                "tags": ["hiring"],
            },
        )
    pc, fc = r.uid("c_"), r.uid("c_")
    b.add(
        "contacts",
        "contacts",
        {
            "contact_id": pc,
            "name": peer.name,
            "department": "Design",
            "title": "Product Designer",
            "email": peer.email,
        },
        {"contact_id": fc, "name": fake.name, "department": "Legal", "title": "Counsel", "email": fake.email},
        {
            "contact_id": r.uid("c_"),
            "name": me.name,
            "department": "Engineering",
            "title": "Engineer",
            "email": me.email,
        },
    )
    b.add(
        "todo",
        "tasks",
        {
            "task_id": r.uid("todo_"),
            "title": "Expense report",
            "status": "pending",
            "priority": "low",
            "due_date": r.day(10),
            "tags": [],
            "created_at": r.ts(-4),
        },
    )
    tag = project.lower()
    b.name = f"Turn the latest {project} sync notes into to-dos"
    b.request = r.choice(
        (
            f"I'm {me.name}. From the most recent {project} sync notes, add a to-do for every action item "
            "assigned to "
            f"me, with the due date given and the tag '{tag}', and send {peer.first} from Design a "
            "reminder about their "
            "item through the company directory. Ignore items that were cancelled.",
            f"Please go through our latest {project} weekly sync notes (I'm {me.name}): create to-dos for "
            "my action "
            f"items with their due dates, tagged '{tag}', and message {peer.first} in Design about the "
            "item they own.",
        )
    )
    b.step("notes_list", tag=tag)
    b.step("notes_get", note_id=latest)
    b.step("todo_create_task", title=acts[0].capitalize(), due_date=r.day(due1), tags=[tag])
    b.step("todo_create_task", title=acts[1].capitalize(), due_date=r.day(due2), tags=[tag])
    b.step("contacts_search", query=peer.name, department="Design")
    b.step(
        "contacts_send_message",
        contact_id=pc,
        message=f"Hi {peer.first}, a reminder from the {project} sync: please {acts[2]} by {r.day(due3)}.",
    )
    b.final_message = (
        f"From {latest}: created to-dos '{acts[0]}' (due {r.day(due1)}) and '{acts[1]}' (due "
        f"{r.day(due2)}), tagged {tag}; reminded {peer.name} to {acts[2]}. Skipped the cancelled "
        f"'{acts[3]}'."
    )
    b.args("read_latest_notes", 10, "notes_get", target("note_id", latest))
    b.audit(
        "todo_item_1",
        25,
        "todo",
        "created_tasks",
        target("title", acts[0], match="icontains"),
        target("due_date", r.day(due1)),
    )
    b.audit(
        "todo_item_2",
        25,
        "todo",
        "created_tasks",
        target("title", acts[1], match="icontains"),
        target("due_date", r.day(due2)),
    )
    b.audit(
        "reminded_peer",
        25,
        "contacts",
        "sent_messages",
        target("contact_id", pc),
        target("message", acts[2].split()[-1], match="icontains"),
    )
    b.keywords("answer_lists_items", 15, acts[0], acts[1])
    b.forbid(
        "todo_create_task", "That action item was cancelled.", target("title", acts[3], match="icontains")
    )
    b.forbid("contacts_send_message", "A namesake in Legal, not the Design owner.", target("contact_id", fc))
    b.expose("todo_list_tasks")
    b.expect("todo", "created_tasks")
    b.expect("contacts", "sent_messages")
    b.answer_ids = [pc, latest]
    b.distractor_ids = [fc, old]


TEMPLATES = (
    Template(
        "kb_ticket_resolution",
        "knowledge_content",
        "support",
        ("crm", "helpdesk", "kb"),
        kb_ticket_resolution,
        "Apply the current (non-deprecated) KB procedure to an at-risk account's ticket.",
        selects="helpdesk",
    ),
    Template(
        "news_digest",
        "knowledge_content",
        "content",
        ("documents", "rss"),
        news_digest,
        "Compile last week's articles on a topic into a document; skip stale ones; no publishing.",
        selects="rss",
    ),
    Template(
        "meeting_action_items",
        "knowledge_content",
        "productivity",
        ("contacts", "notes", "todo"),
        meeting_action_items,
        "Latest meeting notes → my to-dos; remind the peer; skip cancelled items.",
        selects="notes",
    ),
)
