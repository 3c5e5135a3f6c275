"""Interactive-advice templates (multi-turn): information only the user can give.

The reference reads first, then waits for the scripted user's reply (a ``UserTurn`` equal to one
of ``user_sim.replies``), and only then writes. The user-only value (a project code, a time slot,
which tool to cancel) appears in no record and not in the request; ``answer_ids[0]`` is that value
and ``distractor_ids[0]`` a plausible wrong one that *is* in the records.
"""

from __future__ import annotations

from datetime import timedelta

from coworkenv.synth.procedural.builder import SpecBuilder, target
from coworkenv.synth.procedural.records import CITIES, PROJECTS, SAAS, money_text
from coworkenv.synth.procedural.templates.base import Template

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _user(b: SpecBuilder, persona: str, goal: str, reply: str, triggers: tuple[str, ...]) -> None:
    b.user_sim = {
        "persona": persona,
        "goal": goal,
        "replies": [{"text": reply, "triggers": list(triggers)}],
        "fallback": reply,
        "max_user_turns": 3,
    }
    b.tags.append("clarification")


def expense_report_mt(b: SpecBuilder) -> None:
    r = b.rng
    city = r.pick(CITIES, "city")
    start = -r.randint(6, 12)
    code, old_code = f"PRJ-{r.randint(1000, 4999)}", f"PRJ-{r.randint(5000, 9999)}"
    trip = [
        ("Flight", r.money(250, 900), 0),
        ("Hotel", r.money(300, 1200), 2),
        ("Meals", r.money(40, 160), 1),
    ]
    ids = []
    for kind, amount, off in trip:
        tid = r.uid("TXN-", 5)
        ids.append(tid)
        b.add(
            "finance",
            "transactions",
            {
                "transaction_id": tid,
                "date": r.day(start + off),
                "amount": amount,
                "currency": "USD",
                "type": "expense",
                "category": "travel",
                "description": f"{kind} - {city}",
                "status": "completed",
            },
        )
    prior = r.uid("TXN-", 5)
    b.add(
        "finance",
        "transactions",
        {
            "transaction_id": prior,
            "date": r.day(start - 60),
            "amount": r.money(200, 800),
            "currency": "USD",
            "type": "expense",
            "category": "travel",
            "description": f"Hotel - {city} (project {old_code})",
            "status": "reported",
        },
        {
            "transaction_id": r.uid("TXN-", 5),
            "date": r.day(start + 1),
            "amount": r.money(20, 90),
            "currency": "USD",
            "type": "expense",
            "category": "personal",
            "description": "Gym membership",
            "status": "completed",
        },
    )
    for _ in range(b.noise):
        b.add(
            "finance",
            "transactions",
            {
                "transaction_id": r.uid("TXN-", 5),
                "date": r.day(-r.randint(1, 40)),
                "amount": r.money(10, 300),
                "currency": "USD",
                "type": "expense",
                "category": "office",
                "description": "Office supplies",
                "status": "completed",
            },
        )
    ev = r.uid("evt_")
    b.add(
        "calendar",
        "events",
        {
            "event_id": ev,
            "title": f"Trip: {city}",
            "start_time": r.ts(start, 6),
            "end_time": r.ts(start + 2, 20),
            "attendees": ["me@company.com"],
            "organizer": "me@company.com",
            "location": city,
        },
        {
            "event_id": r.uid("evt_"),
            "title": f"{r.choice(PROJECTS)} planning",
            "start_time": r.ts(-1, 10),
            "end_time": r.ts(-1, 11),
            "attendees": ["me@company.com"],
            "organizer": "me@company.com",
        },
    )
    total = round(sum(a for _, a, _ in trip), 2)
    title = f"{city} trip {r.day(start)} to {r.day(start + 2)} - {code}"
    reply = f"Bill it to project code {code}, please - that's the client project the trip was for."
    _user(
        b,
        f"You are the employee who travelled to {city}. You answer briefly. The trip belongs to project "
        f"{code}; say so only when asked about the project, code, cost centre or who to bill.",
        f"An expense report for the {city} trip billed to {code}.",
        reply,
        ("project", "code", "cost", "bill", "charge", "budget", "which", "account"),
    )
    b.name = f"File the {city} trip expense report (project code from the user)"
    b.request = r.choice(
        (
            f"Please file the expense report for my recent trip to {city}. Include only that trip's "
            "expenses.",
            f"Can you submit an expense report for my {city} trip last week? Just the trip costs, nothing "
            "else.",
        )
    )
    b.sign()
    b.step("calendar_list_events", start_date=r.day(start - 3), end_date=r.day(0))
    b.step("finance_list_transactions", start_date=r.day(start - 3), end_date=r.day(0))
    b.ask(reply)
    b.step("finance_submit_report", title=title, transactions=ids, total_amount=total)
    b.final_message = (
        f"Submitted '{title}' with {len(ids)} expenses (flight, hotel, meals) totalling USD "
        f"{money_text(total)}, billed to {code}."
    )
    b.called("checked_calendar", 10, "calendar_list_events")
    for kind, tid in zip(("flight", "hotel", "meals"), ids, strict=True):
        b.audit(f"report_has_{kind}", 10, "finance", "submitted_reports", target("transactions", tid))
    b.audit("report_total", 15, "finance", "submitted_reports", target("total_amount", total))
    b.audit(
        "report_billed_to_code",
        25,
        "finance",
        "submitted_reports",
        target("title", code, match="icontains"),
        description="Only the user knows the project code.",
    )
    b.keywords("answer_confirms", 20, code, f"{money_text(total)}|{total}")
    b.forbid(
        "finance_submit_report",
        "The earlier trip's hotel was already reported.",
        target("transactions", prior),
    )
    b.expose("finance_get_transaction", "calendar_get_event")
    b.expect("finance", "submitted_reports")
    b.judge_rubric = "Asks which project to bill before submitting; includes only the three trip expenses."
    b.answer_ids = [code, *ids]
    b.distractor_ids = [old_code, prior]


def meeting_booking_mt(b: SpecBuilder) -> None:
    r = b.rng
    dept = r.choice(("Design", "Marketing", "Finance", "Legal"))
    peer = r.person(department=dept)
    fake = r.namesake(peer, "Sales")
    extra = r.person(department="Engineering")
    topic = r.choice(
        ("onboarding redesign", "Q3 roadmap", "pricing experiment", "vendor review", "launch plan")
    )
    monday = r.date_of(7 - r.date_of(0).weekday())
    b.add(
        "contacts",
        "contacts",
        *(
            {
                "contact_id": r.uid("c_"),
                "name": p.name,
                "department": p.department,
                "title": "Specialist",
                "email": p.email,
            }
            for p in (peer, fake, extra)
        ),
    )
    day_i = r.randint(1, 3)
    slot_day = monday + timedelta(days=day_i)
    hour, minute = r.choice(((10, 30), (11, 0), (14, 30), (15, 0), (16, 0)))
    slot = f"{slot_day.isoformat()}T{hour:02d}:{minute:02d}"
    busy: list[str] = []
    for d in range(5):
        day = monday + timedelta(days=d)
        h = 9 if d != day_i else 13
        ev = {
            "event_id": r.uid("evt_"),
            "title": f"{r.choice(PROJECTS)} review",
            "start_time": f"{day.isoformat()}T{h:02d}:00:00Z",
            "end_time": f"{day.isoformat()}T{h + 1:02d}:00:00Z",
            "attendees": ["me@company.com", peer.email],
            "organizer": "me@company.com",
        }
        busy.append(str(ev["start_time"])[:16])
        b.add("calendar", "events", ev)
    minutes = r.choice((30, 45))
    end_min = hour * 60 + minute + minutes
    reply = (
        f"{WEEKDAYS[slot_day.weekday()]} works best - book it for {hour:02d}:{minute:02d} UTC on "
        f"{slot_day.isoformat()}. And please add {extra.name} from Engineering too."
    )
    _user(
        b,
        f"You are a busy manager. You want the meeting on {slot_day.isoformat()} at "
        f"{hour:02d}:{minute:02d} UTC "
        f"and want {extra.name} from Engineering invited; share this only when asked about time or "
        "attendees.",
        f"A {minutes}-minute '{topic}' meeting at {slot} UTC with {peer.name} and {extra.name}.",
        reply,
        ("when", "time", "slot", "day", "prefer", "availab", "free", "works", "schedule", "who", "invite"),
    )
    b.name = f"Book a {topic} meeting after asking the user for the slot"
    b.request = r.choice(
        (
            f"Set up a {minutes}-minute meeting next week with {peer.first} from {dept} about the {topic}.",
            f"Please book {minutes} minutes next week with {peer.first} ({dept}) to discuss the {topic}.",
        )
    )
    b.sign()
    b.step("contacts_search", query=peer.first, department=dept)
    b.step(
        "calendar_list_events",
        start_date=monday.isoformat(),
        end_date=(monday + timedelta(days=4)).isoformat(),
    )
    b.ask(reply)
    b.step("contacts_search", query=extra.name)
    b.step(
        "calendar_create_event",
        title=topic.capitalize(),
        start_time=f"{slot}:00Z",
        end_time=f"{slot_day.isoformat()}T{end_min // 60:02d}:{end_min % 60:02d}:00Z",
        attendees=[peer.email, extra.email],
    )
    b.final_message = (
        f"Booked '{topic.capitalize()}' on {WEEKDAYS[slot_day.weekday()]} {slot_day.isoformat()} at "
        f"{hour:02d}:{minute:02d} UTC for {minutes} minutes with {peer.name} ({dept}) and {extra.name}."
    )
    b.audit(
        "booked_user_slot",
        35,
        "calendar",
        "created_events",
        target("start_time", slot, match="icontains"),
        description="Only the user can say which free slot they want.",
    )
    b.args("invited_peer", 15, "calendar_create_event", target("attendees", peer.email, match="icontains"))
    b.audit(
        "invited_extra", 20, "calendar", "created_events", target("attendees", extra.email, match="icontains")
    )
    b.called("looked_up_contact", 10, "contacts_search")
    b.called("checked_calendar", 10, "calendar_list_events")
    b.keywords(
        "answer_confirms",
        10,
        f"{slot_day.isoformat()}|{WEEKDAYS[slot_day.weekday()]}",
        f"{hour:02d}:{minute:02d}",
    )
    b.forbid(
        "calendar_create_event",
        "Wrong person: a namesake in Sales.",
        target("attendees", fake.email, match="icontains"),
    )
    b.forbid("calendar_delete_event", "Existing meetings must not be removed.")
    b.expect("calendar", "created_events")
    b.answer_ids = [slot, peer.email, extra.email]
    b.distractor_ids = [busy[0], fake.email]


def subscription_advice_mt(b: SpecBuilder) -> None:
    r = b.rng
    tools = [r.pick(SAAS, "saas") for _ in range(3 + min(b.noise, 2))]
    prices = {t: r.randint(8, 60) * 10 for t in tools}
    biggest = max(tools, key=lambda t: (prices[t], t))
    unused = r.choice([t for t in tools if t != biggest])
    team = r.choice(("design", "marketing", "support", "data"))
    ids: dict[str, str] = {}
    for t in tools:
        for m in (1, 2):
            tid = r.uid("TXN-", 5)
            ids.setdefault(t, tid)
            b.add(
                "finance",
                "transactions",
                {
                    "transaction_id": tid,
                    "date": r.day(-30 * m + r.randint(0, 5)),
                    "amount": float(prices[t]),
                    "currency": "USD",
                    "type": "expense",
                    "category": "software",
                    "description": f"Monthly subscription - {t}",
                    "status": "completed",
                },
            )
    b.add(
        "todo",
        "tasks",
        {
            "task_id": r.uid("todo_"),
            "title": "Renew domain names",
            "status": "pending",
            "priority": "medium",
            "due_date": r.day(20),
            "tags": ["it"],
            "created_at": r.ts(-3),
        },
    )
    due = r.day(7)
    monthly = prices[unused]
    reply = (
        f"The {team} team moved off {unused} last month - nobody uses it any more. {biggest} is the priciest "
        f"but the whole company relies on it, so keep that."
    )
    _user(
        b,
        f"You are the operations lead. You know the {team} team stopped using {unused} and that {biggest} is "
        "essential; share this only when asked which tools are still used or needed.",
        f"Cancel the unused {unused} subscription.",
        reply,
        ("use", "using", "need", "team", "which", "still", "essential", "rely"),
    )
    b.name = "Advise which software subscription to cancel (usage known only to the user)"
    b.request = r.choice(
        (
            "Our software spend keeps creeping up. Look at our recurring subscriptions, tell me which one "
            "we should "
            "cancel and what it would save per year, and add a high-priority to-do to cancel it within a "
            "week.",
            "Which of our monthly software subscriptions should we drop? Check the charges, recommend one "
            "with its "
            "yearly saving, and put a high-priority to-do on my list to cancel it, due in a week.",
        )
    )
    b.sign()
    b.step("finance_list_transactions", start_date=r.day(-70), end_date=r.day(0))
    b.ask(reply)
    b.step("finance_get_transaction", transaction_id=ids[unused])
    b.step(
        "todo_create_task",
        title=f"Cancel {unused} subscription",
        priority="high",
        due_date=due,
        tags=["software", "cost"],
    )
    b.final_message = (
        f"Recommend cancelling {unused}: USD {monthly} per month, about USD {monthly * 12} per year, and "
        f"the {team} team no longer uses it. Keep {biggest} (priciest, but company-wide). Added a "
        f"high-priority to-do due {due}."
    )
    b.called("reviewed_spend", 10, "finance_list_transactions")
    b.args("checked_charge", 10, "finance_get_transaction", target("transaction_id", ids[unused]))
    b.audit(
        "todo_cancels_unused",
        35,
        "todo",
        "created_tasks",
        target("title", unused, match="icontains"),
        description="Which tool is unused is only known to the user.",
    )
    b.audit(
        "todo_priority_due", 15, "todo", "created_tasks", target("priority", "high"), target("due_date", due)
    )
    b.keywords("answer_recommends", 30, unused, f"{monthly * 12:,}|{monthly * 12}")
    b.forbid(
        "todo_create_task",
        "The most expensive tool is used company-wide.",
        target("title", biggest, match="icontains"),
    )
    b.expose("todo_list_tasks")
    b.expect("todo", "created_tasks")
    b.answer_ids = [unused]
    b.distractor_ids = [biggest]


TEMPLATES = (
    Template(
        "expense_report_mt",
        "interactive_advice",
        "multi_turn",
        ("calendar", "finance"),
        expense_report_mt,
        "File a trip's expenses; only the user knows the project code.",
        multi_turn=True,
        selects="finance",
    ),
    Template(
        "meeting_booking_mt",
        "interactive_advice",
        "multi_turn",
        ("calendar", "contacts"),
        meeting_booking_mt,
        "Book a meeting; the user picks the slot and adds an attendee.",
        multi_turn=True,
        selects="calendar",
    ),
    Template(
        "subscription_advice_mt",
        "interactive_advice",
        "multi_turn",
        ("finance", "todo"),
        subscription_advice_mt,
        "Recommend a subscription to cancel once the user says what is unused.",
        multi_turn=True,
        selects="finance",
    ),
)
