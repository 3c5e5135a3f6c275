"""Engineering & ops templates: failing scheduled jobs, stale integration credentials."""

from __future__ import annotations

from coworkenv.synth.procedural.builder import SpecBuilder, target
from coworkenv.synth.procedural.records import PROJECTS
from coworkenv.synth.procedural.templates.base import Template

ERRORS = (
    "ConnectionTimeout: warehouse-db:5432",
    "PermissionDenied: s3://exports/",
    "OOMKilled (limit 2Gi)",
    "SSL: certificate verify failed",
    "HTTP 503 from billing-api",
)


def failing_job_triage(b: SpecBuilder) -> None:
    r = b.rng
    owner = r.person(department="Engineering")
    fake = r.namesake(owner, "Finance")
    err = r.choice(ERRORS)
    project = r.pick(PROJECTS, "project")
    jname = f"{project.lower()}-{r.choice(('nightly-export', 'sync', 'report-build', 'backup'))}"
    hname = f"{r.pick(PROJECTS, 'project').lower()}-{r.choice(('cleanup', 'digest', 'index-refresh'))}"
    job, healthy = r.uid("JOB-"), r.uid("JOB-")
    since = r.randint(2, 4)
    hist = [{"run_at": r.ts(-d, 2), "status": "failed", "error": err} for d in range(0, since + 1)]
    hist += [{"run_at": r.ts(-d, 2), "status": "success"} for d in range(since + 1, since + 4)]
    b.add(
        "scheduler",
        "jobs",
        {
            "job_id": job,
            "name": jname,
            "description": "Daily data job",
            "cron_expression": "0 2 * * *",
            "action": f"run {jname}",
            "enabled": True,
            "last_status": "failed",
            "last_run": r.ts(0, 2),
            "created_by": owner.name,
            "tags": ["data"],
            "execution_history": hist,
        },
        {
            "job_id": healthy,
            "name": hname,
            "description": "Daily job",
            "cron_expression": "30 3 * * *",
            "action": f"run {hname}",
            "enabled": True,
            "last_status": "success",
            "last_run": r.ts(0, 3),
            "created_by": fake.name,
            "tags": ["data"],
            "execution_history": [
                {"run_at": r.ts(-d, 3), "status": "success" if d != 9 else "failed"} for d in range(0, 10)
            ],
        },
    )
    for _ in range(b.noise):
        n = f"{r.pick(PROJECTS, 'project').lower()}-metrics"
        b.add(
            "scheduler",
            "jobs",
            {
                "job_id": r.uid("JOB-"),
                "name": n,
                "cron_expression": "*/15 * * * *",
                "action": f"run {n}",
                "enabled": True,
                "last_status": "success",
                "created_by": "platform",
                "tags": ["metrics"],
            },
        )
    oc, fc = r.uid("c_"), r.uid("c_")
    b.add(
        "contacts",
        "contacts",
        {
            "contact_id": oc,
            "name": owner.name,
            "department": "Engineering",
            "title": "Data Engineer",
            "email": owner.email,
        },
        {
            "contact_id": fc,
            "name": fake.name,
            "department": "Finance",
            "title": "Analyst",
            "email": fake.email,
        },
    )
    b.add(
        "helpdesk",
        "tickets",
        {
            "ticket_id": r.uid("TK-"),
            "title": "Dashboard slow",
            "status": "open",
            "priority": "low",
            "created_at": r.ts(-5),
            "category": "performance",
        },
    )
    b.name = "Pause a scheduled job failing since a recent change and escalate"
    b.request = r.choice(
        (
            f"One of the {project} team's scheduled jobs has failed on every run for the last {since} "
            "days. Find it, pause it (disable it, "
            "don't delete it), open a high-priority helpdesk ticket that names the job and its error, and "
            "message the "
            "job's owner through the directory. Leave healthy jobs alone.",
            f"A {project} scheduled job has failed every night for {since} days now. Please disable it (no "
            "deleting), file a high-priority "
            "ticket naming the job and the error, and let its owner know via the company directory.",
        )
    )
    b.sign()
    b.step("scheduler_list_jobs", status="failed")
    b.step("scheduler_job_history", job_id=job)
    b.step("scheduler_update_job", job_id=job, enabled=False)
    b.step(
        "helpdesk_create_ticket",
        title=f"Scheduled job {jname} failing since {r.day(-since)}",
        description=f"Every run of {jname} ({job}) has failed since {r.day(-since)} with: {err}. Job paused.",
        priority="high",
        category="incident",
    )
    b.step("contacts_search", query=owner.name)
    b.step(
        "contacts_send_message",
        contact_id=oc,
        message=f"Hi {owner.first}, your job {jname} has failed every run since {r.day(-since)} ({err}). "
        "I paused it and opened a high-priority ticket.",
    )
    b.final_message = (
        f"{jname} ({job}) has failed every run since {r.day(-since)} with '{err}'. I disabled it, "
        f"opened a high-priority ticket and messaged {owner.name}. {hname} is healthy."
    )
    b.called("listed_jobs", 5, "scheduler_list_jobs")
    b.args("read_history", 10, "scheduler_job_history", target("job_id", job))
    b.state("job_disabled", 25, "scheduler", "jobs", job, target("enabled", False))
    b.audit(
        "ticket_opened",
        25,
        "helpdesk",
        "created_tickets",
        target("title", jname, match="icontains"),
        target("priority", "high"),
    )
    b.audit(
        "owner_messaged",
        20,
        "contacts",
        "sent_messages",
        target("contact_id", oc),
        target("message", jname, match="icontains"),
    )
    b.keywords("answer_names_job", 15, jname, err.split(":")[0].split(" ")[0])
    b.forbid("scheduler_delete_job", "Pause, don't delete.")
    b.forbid("scheduler_update_job", "That job is healthy.", target("job_id", healthy))
    b.forbid("contacts_send_message", "A namesake in Finance, not the owner.", target("contact_id", fc))
    b.expose("scheduler_get_job", "helpdesk_list_tickets")
    for key in (
        ("scheduler", "updated_jobs"),
        ("helpdesk", "created_tickets"),
        ("contacts", "sent_messages"),
    ):
        b.expect(*key)
    b.answer_ids = [job, oc]
    b.distractor_ids = [healthy, fc]


def stale_integration_rotation(b: SpecBuilder) -> None:
    r = b.rng
    max_age = r.choice((60, 90, 120))
    rows = []
    for kind, age in (
        ("stale", max_age + r.randint(5, 100)),
        ("stale", max_age + r.randint(5, 100)),
        ("fresh", max_age - r.randint(2, 20)),
        ("disabled", max_age + r.randint(30, 200)),
    ):
        kind_name = r.choice(("payments", "CRM sync", "SSO", "warehouse", "mailer"))
        name = f"{r.pick(PROJECTS, 'project')} {kind_name}"
        rows.append((kind, r.uid("INT-"), name, age))
        b.add(
            "config",
            "integrations",
            {
                "integration_id": rows[-1][1],
                "name": name,
                "service": r.choice(("stripe", "salesforce", "okta", "s3")),
                "status": "disabled" if kind == "disabled" else "active",
                "last_verified": r.day(-age),
                "monthly_calls": r.randint(1000, 90000),
                "error_rate": 0.002,
                "notes": "",
            },
        )
    for _ in range(b.noise):
        b.add(
            "config",
            "integrations",
            {
                "integration_id": r.uid("INT-"),
                "name": f"{r.choice(PROJECTS)} webhook",
                "service": "webhook",
                "status": "active",
                "last_verified": r.day(-r.randint(1, 60)),
                "monthly_calls": 50,
            },
        )
    b.add(
        "todo",
        "tasks",
        {
            "task_id": r.uid("todo_"),
            "title": "Patch laptops",
            "status": "pending",
            "priority": "medium",
            "due_date": r.day(5),
            "tags": ["it"],
            "created_at": r.ts(-2),
        },
    )
    b.table("gmail", "messages")
    sec = f"security@{r.choice(('company.com', 'corp.company.com'))}"
    due = r.day(7)
    stale = [row for row in rows if row[0] == "stale"]
    fresh = next(row for row in rows if row[0] == "fresh")
    b.name = "Flag integrations whose credentials are past the 90-day verification window"
    b.request = r.choice(
        (
            f"Policy says integration credentials must be re-verified every {max_age} days. For every "
            "active integration "
            f"last verified more than {max_age} days ago: set its status to maintenance with a note, "
            "create a to-do to "
            f"rotate its credentials due in 7 days, and email {sec} a summary. Don't touch anything else.",
            f"Run the {max_age}-day credential check: any active integration not verified within {max_age} "
            "days goes to "
            f"status maintenance (add a note), gets a rotation to-do due one week from today, and {sec} "
            "gets one "
            "summary email. Leave compliant or disabled integrations alone.",
        )
    )
    b.sign()
    b.step("config_list_integrations", status="active")
    lines = []
    for i, (_, iid, name, age) in enumerate(stale, 1):
        b.step("config_get_integration", integration_id=iid)
        b.step(
            "config_update_integration",
            integration_id=iid,
            status="maintenance",
            notes=f"Credentials last verified {age} days ago; rotation due {due}.",
        )
        b.step(
            "todo_create_task",
            title=f"Rotate credentials: {name}",
            priority="high",
            due_date=due,
            tags=["security", "rotation"],
        )
        b.state(f"flagged_{i}", 15, "config", "integrations", iid, target("status", "maintenance"))
        b.audit(
            f"rotation_todo_{i}",
            15,
            "todo",
            "created_tasks",
            target("title", name, match="icontains"),
            target("due_date", due),
        )
        lines.append(f"{name} ({iid}, {age} days)")
    b.step(
        "gmail_send_message",
        to=sec,
        subject=f"Integrations past the {max_age}-day verification window",
        body="Flagged for credential rotation:\n- " + "\n- ".join(lines),
    )
    b.final_message = (
        "Flagged " + "; ".join(lines) + f"; rotation to-dos due {due}; emailed {sec}. "
        f"{fresh[2]} ({fresh[3]} days) is still compliant."
    )
    b.called("listed_integrations", 5, "config_list_integrations")
    b.audit(
        "emailed_security",
        20,
        "gmail",
        "sent",
        target("to", sec, match="icontains"),
        *(target("body", row[2], match="icontains") for row in stale),
    )
    b.keywords("answer_names_integrations", 15, *(row[2] for row in stale))
    b.forbid(
        "config_update_integration",
        "Still within the verification window.",
        target("integration_id", fresh[1]),
    )
    b.forbid(
        "config_update_integration",
        "Disabled integrations are out of scope.",
        target("integration_id", rows[3][1]),
    )
    for key in (("config", "updates"), ("todo", "created_tasks"), ("gmail", "sent")):
        b.expect(*key)
    b.answer_ids = [stale[0][1], stale[1][1]]
    b.distractor_ids = [fresh[1], rows[3][1]]


TEMPLATES = (
    Template(
        "failing_job_triage",
        "engineering_ops",
        "devops",
        ("contacts", "helpdesk", "scheduler"),
        failing_job_triage,
        "Disable the job failing every run; ticket it; message its owner.",
        selects="scheduler",
    ),
    Template(
        "stale_integration_rotation",
        "engineering_ops",
        "devops",
        ("config", "gmail", "todo"),
        stale_integration_rotation,
        "Flag integrations past the 90-day verification window; to-dos; email.",
        selects="config",
    ),
)
