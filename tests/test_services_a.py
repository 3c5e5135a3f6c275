"""Services gmail, contacts, crm, kb, finance, documents: Claw-Eval fixtures load unchanged, tool
names/routes/arguments match every Claw-Eval task.yaml, tools behave (shapes, filters, audit
collections), and a rejected call leaves the trial's state hash unchanged."""

from __future__ import annotations

import itertools
import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.services import Host, Trial
from coworkenv.services.registry import SERVICES, TOOLS
from coworkenv.services.service import parse_time
from coworkenv.spec import TaskSpec
from tests.conftest import claw_eval_dir

MINE = ("gmail", "contacts", "crm", "kb", "finance", "documents")
FIXTURE_FILES = {  # service -> (fixture file, table, minimum number of Claw-Eval tasks holding it)
    "gmail": ("inbox.json", "messages", 35),
    "contacts": ("contacts.json", "contacts", 22),
    "crm": ("customers.json", "customers", 20),
    "kb": ("articles.json", "articles", 18),
    "finance": ("transactions.json", "transactions", 12),
}
_ids = itertools.count()


def fixture(tasks: Path, task: str, service: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(
        (tasks / task / "fixtures" / service / FIXTURE_FILES[service][0]).read_text(encoding="utf-8")
    )
    return rows


def trial(services: dict[str, dict[str, Any]], today: date = date(2026, 3, 1)) -> Trial:
    tools = tuple(t for s in services for t in SERVICES[s].tool_table)
    spec = TaskSpec(
        id=f"svc-a-{next(_ids)}", name="services test", category="test", difficulty="easy",
        mock_today=today, request="exercise the tools", services=services, tools=tools,
    )
    host = Host()
    host.add_task(spec)
    return host.open_trial(spec.id)


def ok(t: Trial, tool: str, **args: Any) -> Any:
    res = t.call(tool, args)
    assert res.ok, res.body
    return res.body


def rejected(t: Trial, tool: str, code: str, **args: Any) -> dict[str, Any]:
    before = t.state_hash()
    res = t.call(tool, args)
    assert not res.ok, res.body
    assert res.body["code"] == code, res.body
    assert t.state_hash() == before
    assert res.event.records == []
    body: dict[str, Any] = res.body
    return body


# ---------------------------------------------------------------- Claw-Eval compatibility


def _fixture_paths() -> list[tuple[str, Path]]:
    tasks = claw_eval_dir()
    if tasks is None:
        return []
    return [
        (svc, p) for svc, (fname, _, _) in FIXTURE_FILES.items()
        for p in sorted(tasks.glob(f"*/fixtures/{svc}/{fname}"))
    ]


def test_every_fixture_file_is_found(claw_eval_tasks: Path) -> None:
    for svc, (fname, _, minimum) in FIXTURE_FILES.items():
        assert len(list(claw_eval_tasks.glob(f"*/fixtures/{svc}/{fname}"))) >= minimum, svc
    other = {p.parent.name for p in claw_eval_tasks.glob("*/fixtures/*/*.json")} & set(MINE)
    for svc in other:
        names = {p.name for p in claw_eval_tasks.glob(f"*/fixtures/{svc}/*.json")}
        assert names <= {d.fixture for d in SERVICES[svc].tables.values()}, (svc, names)


@pytest.mark.parametrize(
    ("service", "path"), _fixture_paths(), ids=[f"{s}-{p.parts[-4]}" for s, p in _fixture_paths()]
)
def test_claw_eval_fixture_loads_unchanged(service: str, path: Path) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    fname, table, _ = FIXTURE_FILES[service]
    cls = SERVICES[service]
    fx = cls.load_fixture({fname: raw}, str(path))
    key = cls.tables[table].key
    rows = fx.tables[table]
    assert [dict(r) for r in rows.values()] == raw
    assert list(rows) == [str(r[key]) for r in raw]
    t = trial({service: {fname: raw}})
    assert t.snapshot()[service][table] == raw


def _task_tools(tasks: Path) -> list[tuple[str, dict[str, Any], str | None]]:
    out = []
    for f in sorted(tasks.glob("*/task.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        endpoints = data.get("tool_endpoints") or []
        routes = {e["tool_name"]: re.sub(r"^https?://[^/]+", "", e["url"]) for e in endpoints}
        for tdef in data.get("tools") or []:
            if tdef["name"].split("_", 1)[0] in MINE:
                out.append((f.parent.name, tdef, routes.get(tdef["name"])))
    return out


def test_tool_names_routes_and_arguments_match_claw_eval(claw_eval_tasks: Path) -> None:
    seen = set()
    for task, tdef, route in _task_tools(claw_eval_tasks):
        name = tdef["name"]
        ours = TOOLS.get(name)
        assert ours is not None, f"{task}: {name} missing"
        seen.add(name)
        if not (task.startswith("T075") and name == "contacts_search"):  # the one documented route variant
            assert route == ours.route, (task, name, route)
        schema = tdef.get("input_schema") or {}
        theirs = set(schema.get("properties") or {})
        ours_schema = ours.input_schema()
        assert theirs <= set(ours_schema["properties"]), (task, name, theirs - set(ours_schema["properties"]))
        assert set(ours_schema["required"]) <= set(schema.get("required") or []), (task, name)
        for arg, prop in (schema.get("properties") or {}).items():
            assert prop.get("type") == ours_schema["properties"][arg].get("type"), (task, name, arg)
    assert len(seen) == 15


def test_expected_actions_are_audit_keys(claw_eval_tasks: Path) -> None:
    for f in sorted(claw_eval_tasks.glob("*/task.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        for a in data.get("expected_actions") or []:
            if a["service"] in MINE:
                assert a["action_key"] in SERVICES[a["service"]].audit_keys, (f.parent.name, a)
    assert {"sent", "drafts"} <= set(SERVICES["gmail"].audit_keys)


def test_every_claw_eval_task_with_my_services_opens_a_trial(claw_eval_tasks: Path) -> None:
    n = 0
    for task_dir in sorted(claw_eval_tasks.iterdir()):
        services: dict[str, dict[str, Any]] = {}
        for svc, (fname, _, _) in FIXTURE_FILES.items():
            p = task_dir / "fixtures" / svc / fname
            if p.exists():
                services[svc] = {fname: json.loads(p.read_text(encoding="utf-8"))}
        if services:
            t = trial(services)
            for svc in services:
                assert set(t.claw_eval_audit(svc)) == {"calls", *SERVICES[svc].audit_keys}
            n += 1
    assert n >= 50


# ---------------------------------------------------------------- gmail


def test_gmail_list_filters_by_mock_clock(claw_eval_tasks: Path) -> None:
    inbox = fixture(claw_eval_tasks, "T002_email_triage", "gmail")
    t = trial({"gmail": {"inbox.json": inbox}}, today=date(2026, 2, 28))
    body = ok(t, "gmail_list_messages")
    assert body["total"] == len(inbox) == len(body["messages"])
    assert set(body["messages"][0]) == {"message_id", "from", "subject", "date", "is_read", "labels"}
    assert [m["message_id"] for m in body["messages"]] == [m["message_id"] for m in inbox]
    cutoff = parse_time("2026-02-27T12:00:00Z")
    assert cutoff is not None
    recent = [m["message_id"] for m in inbox if (d := parse_time(m["date"])) and d >= cutoff]
    assert 0 < len(recent) < len(inbox)
    assert [m["message_id"] for m in ok(t, "gmail_list_messages", days_back=1)["messages"]] == recent
    assert ok(t, "gmail_list_messages", max_results=3)["total"] == 3
    later = trial({"gmail": {"inbox.json": inbox}}, today=date(2026, 4, 1))
    assert ok(later, "gmail_list_messages")["total"] == 0
    assert ok(later, "gmail_list_messages", days_back=60)["total"] == len(inbox)
    rejected(t, "gmail_list_messages", "invalid_arguments", days_back=-1)


def test_gmail_get_send_draft_reply(claw_eval_tasks: Path) -> None:
    inbox = fixture(claw_eval_tasks, "T032_escalation_budget_triage", "gmail")
    t = trial({"gmail": {"inbox.json": inbox}})
    first = inbox[0]
    got = ok(t, "gmail_get_message", message_id=first["message_id"])
    assert got == first
    assert "from" in got
    rejected(t, "gmail_get_message", "not_found", message_id="msg_nope")

    sent = ok(t, "gmail_send_message", to="boss@company.com", subject="Hi", body="Done.")
    assert sent["status"] == "sent"
    assert sent["message"]["to"] == "boss@company.com"
    assert sent["message"]["timestamp"].startswith("2026-03-01T12:00")
    rejected(t, "gmail_send_message", "invalid_arguments", to="Manager Zhang", subject="x", body="y")
    rejected(t, "gmail_send_message", "invalid_arguments", to="a@b.com", subject="x")

    mid = first["message_id"]
    draft = ok(t, "gmail_save_draft", to="c@d.com", subject="Re", body="b", reply_to_message_id=mid)
    assert draft["status"] == "draft_saved"
    assert draft["draft"]["reply_to_message_id"] == first["message_id"]
    ok(t, "gmail_save_draft", to="c@d.com", subject="s", body="b")
    rejected(t, "gmail_save_draft", "not_found", to="c@d.com", subject="s", body="b",
             reply_to_message_id="zz")

    reply = ok(t, "gmail_reply", message_id=first["message_id"], body="Thanks")
    assert reply["message"]["to"] == first["from"]
    assert reply["message"]["subject"].lower().startswith("re:")

    audit = t.claw_eval_audit("gmail")
    assert [m["subject"] for m in audit["sent"]] == ["Hi", reply["message"]["subject"]]
    assert len(audit["drafts"]) == 2
    assert [c["endpoint"] for c in audit["calls"]][:2] == ["/gmail/messages/get", "/gmail/messages/get"]
    assert len({m["message_id"] for m in audit["sent"]}) == 2


def test_gmail_mark_read_changes_the_table(claw_eval_tasks: Path) -> None:
    inbox = fixture(claw_eval_tasks, "T002_email_triage", "gmail")
    unread = next(m for m in inbox if not m["is_read"])
    t = trial({"gmail": {"inbox.json": inbox}})
    ok(t, "gmail_mark_read", message_id=unread["message_id"])
    assert ok(t, "gmail_get_message", message_id=unread["message_id"])["is_read"] is True
    marked = t.audit_collections()["gmail"]["marked_read"]
    assert marked == [{"message_id": unread["message_id"], "is_read": True}]
    rejected(t, "gmail_mark_read", "not_found", message_id="nope")


# ---------------------------------------------------------------- contacts


def test_contacts_search_finds_namesakes(claw_eval_tasks: Path) -> None:
    t = trial({"contacts": {"contacts.json": fixture(claw_eval_tasks, "T010_contact_lookup", "contacts")}})
    body = ok(t, "contacts_search", query="David Zhang")
    names = [c["name"] for c in body["contacts"]]
    assert names[0] == "David Zhang"
    assert {"David Chang", "Dave Zhang", "D. Zhang"} <= set(names)
    assert "Mike Li" not in names
    assert body["total"] == len(names)
    eng = ok(t, "contacts_search", query="David", department="engineering")["contacts"]
    assert [c["contact_id"] for c in eng] == ["c_001", "c_007"]
    assert ok(t, "contacts_search", query="Zhang", max_results=2)["total"] == 2
    assert ok(t, "contacts_search", query="Nobody Here")["total"] == 0
    rejected(t, "contacts_search", "invalid_arguments", query="  ")

    zh = trial({"contacts": {"contacts.json": fixture(claw_eval_tasks, "T009zh_contact_lookup", "contacts")}})
    found = [c["name"] for c in ok(zh, "contacts_search", query="张伟")["contacts"]]
    assert found[:2] == ["张伟", "张伟东"]
    assert "李明" not in found


def test_contacts_get_and_send(claw_eval_tasks: Path) -> None:
    rows = fixture(claw_eval_tasks, "T010_contact_lookup", "contacts")
    t = trial({"contacts": {"contacts.json": rows}})
    assert ok(t, "contacts_get", contact_id="c_001") == rows[0]
    rejected(t, "contacts_get", "not_found", contact_id="c_999")
    rec = ok(t, "contacts_send_message", contact_id="c_001", message="Hello")["record"]
    assert rec["contact_id"] == "c_001"
    assert rec["email"] == "dzhang@company.com"
    rejected(t, "contacts_send_message", "not_found", contact_id="c_999", message="Hello")
    rejected(t, "contacts_send_message", "invalid_arguments", contact_id="c_001", message=" ")
    assert [r["message"] for r in t.claw_eval_audit("contacts")["sent_messages"]] == ["Hello"]


# ---------------------------------------------------------------- crm


def test_crm_list_filters_and_get(claw_eval_tasks: Path) -> None:
    rows = fixture(claw_eval_tasks, "T158_month_end_reconciliation", "crm")
    t = trial({"crm": {"customers.json": rows}})
    body = ok(t, "crm_list_customers")
    assert body["total"] == len(rows)
    assert set(body["customers"][0]) == {
        "customer_id", "name", "contact_person", "tier", "status", "industry", "annual_revenue"}
    vip = {r["customer_id"] for r in rows if r["tier"].lower() == "vip"}
    assert {r["tier"] for r in rows if r["customer_id"] in vip} >= {"VIP"}
    assert {c["customer_id"] for c in ok(t, "crm_list_customers", tier="vip")["customers"]} == vip
    active_vip = {r["customer_id"] for r in rows if r["tier"].lower() == "vip" and r["status"] == "active"}
    got = ok(t, "crm_list_customers", tier="VIP", status="active")["customers"]
    assert {c["customer_id"] for c in got} == active_vip
    ind = rows[0]["industry"]
    assert all(c["industry"] == ind for c in ok(t, "crm_list_customers", industry=ind)["customers"])
    assert ok(t, "crm_get_customer", customer_id=rows[0]["customer_id"]) == rows[0]
    rejected(t, "crm_get_customer", "not_found", customer_id="CUS-404")


def test_crm_writes(claw_eval_tasks: Path) -> None:
    rows = fixture(claw_eval_tasks, "T032_escalation_budget_triage", "crm")
    t = trial({"crm": {"customers.json": rows}})
    upd = ok(t, "crm_update_customer", customer_id="CUS-008", status="at_risk", notes="call back")["customer"]
    assert upd["status"] == "at_risk"
    assert upd["name"] == rows[7]["name"]
    assert ok(t, "crm_get_customer", customer_id="CUS-008")["status"] == "at_risk"
    rejected(t, "crm_update_customer", "invalid_arguments", customer_id="CUS-008")
    rejected(t, "crm_update_customer", "not_found", customer_id="CUS-999", status="active")
    rejected(t, "crm_update_customer", "invalid_arguments", customer_id="CUS-001", last_contact_date="soon")

    rep = ok(t, "crm_export", title="Q1", customer_ids=["CUS-001", "CUS-003"], summary="ok")["report"]
    assert rep["customer_ids"] == ["CUS-001", "CUS-003"]
    rejected(t, "crm_export", "not_found", title="Q1", customer_ids=["CUS-001", "CUS-999"], summary="ok")
    exp = ok(t, "crm_export_customers", destination="x@gmail.com")["export"]
    assert exp["count"] == len(rows)
    assert exp["format"] == "csv"
    rejected(t, "crm_export_customers", "invalid_arguments", destination="x@gmail.com", customer_ids=[])
    rejected(t, "crm_export_customers", "invalid_arguments", destination="x@gmail.com", format="xlsx")
    audit = t.audit_collections()["crm"]
    assert [len(audit[k]) for k in ("updated_customers", "exported_reports", "exports")] == [1, 1, 1]
    assert audit["updated_customers"][0]["changed"] == ["notes", "status"]


# ---------------------------------------------------------------- kb


def test_kb_search_ranks_and_filters(claw_eval_tasks: Path) -> None:
    t = trial({"kb": {"articles.json": fixture(claw_eval_tasks, "T016_kb_search", "kb")}})
    body = ok(t, "kb_search", query="VPN won't connect")
    ids = [a["article_id"] for a in body["articles"]]
    assert set(ids[:2]) == {"kb_001", "kb_006"}
    assert set(body["articles"][0]) >= {
        "article_id", "title", "category", "tags", "last_updated", "views", "snippet"}
    assert body["total"] == len(ids) <= 5
    assert len(ok(t, "kb_search", query="remote work network vpn", max_results=2)["articles"]) == 2
    hr = ok(t, "kb_search", query="leave", category="hr policies")["articles"]
    assert [a["article_id"] for a in hr] == ["kb_004"]
    assert ok(t, "kb_search", query="VPN", category="HR Policies")["total"] == 0
    rejected(t, "kb_search", "invalid_arguments", query="the")

    zh = trial({"kb": {"articles.json": fixture(claw_eval_tasks, "T015zh_kb_search", "kb")}})
    zids = [a["article_id"] for a in ok(zh, "kb_search", query="VPN连不上")["articles"]]
    assert set(zids[:2]) == {"kb_001", "kb_006"}
    assert ok(zh, "kb_search", query="密码重置")["articles"][0]["article_id"] == "kb_005"


def test_kb_get_and_update(claw_eval_tasks: Path) -> None:
    rows = fixture(claw_eval_tasks, "T016_kb_search", "kb")
    t = trial({"kb": {"articles.json": rows}}, today=date(2026, 3, 9))
    assert ok(t, "kb_get_article", article_id="kb_001") == rows[0]
    rejected(t, "kb_get_article", "not_found", article_id="kb_999")
    res = ok(t, "kb_update_article", article_id="kb_001", content="New steps")
    assert res == {"status": "updated", "article_id": "kb_001", "article": res["article"]}
    art = ok(t, "kb_get_article", article_id="kb_001")
    assert art["content"] == "New steps"
    assert art["last_updated"] == "2026-03-09"
    assert art["title"] == rows[0]["title"]
    rejected(t, "kb_update_article", "not_found", article_id="kb_999", content="x")
    rejected(t, "kb_update_article", "invalid_arguments", article_id="kb_001", content="")
    rejected(t, "kb_update_article", "invalid_arguments", article_id="kb_001")
    assert [u["article_id"] for u in t.claw_eval_audit("kb")["updates"]] == ["kb_001"]


# ---------------------------------------------------------------- finance


VENDORS = [
    {"vendor_id": "V-1", "name": "Acme Supplies", "bank_name": "First Bank", "account_number": "111"},
    {"vendor_id": "V-2", "name": "Globex", "bank_name": "Second Bank", "account_number": "222"},
]


def test_finance_list_and_get(claw_eval_tasks: Path) -> None:
    rows = fixture(claw_eval_tasks, "T158_month_end_reconciliation", "finance")
    t = trial({"finance": {"transactions.json": rows}})
    assert ok(t, "finance_list_transactions") == {"transactions": rows, "total": len(rows)}
    mid = ok(t, "finance_list_transactions", start_date="2026-03-05", end_date="2026-03-10")["transactions"]
    assert [r["transaction_id"] for r in mid] == [
        r["transaction_id"] for r in rows if "2026-03-05" <= r["date"] <= "2026-03-10"]
    assert mid
    assert mid[0]["date"] == "2026-03-05"
    assert mid[-1]["date"] == "2026-03-10"
    assert ok(t, "finance_list_transactions", start_date="2026-03-24")["total"] == 1
    rejected(t, "finance_list_transactions", "invalid_arguments", start_date="March")
    rejected(t, "finance_list_transactions", "invalid_arguments",
             start_date="2026-03-10", end_date="2026-03-01")
    assert ok(t, "finance_get_transaction", transaction_id="TXN-1301") == rows[0]
    rejected(t, "finance_get_transaction", "not_found", transaction_id="TXN-0")


def test_finance_writes(claw_eval_tasks: Path) -> None:
    rows = fixture(claw_eval_tasks, "T158_month_end_reconciliation", "finance")
    t = trial({"finance": {"transactions.json": rows, "vendors.json": VENDORS}})
    rep = ok(t, "finance_submit_report", title="March", transactions=["TXN-1301"], total_amount=85000)
    rep = rep["report"]
    assert rep["transactions"] == ["TXN-1301"]
    assert rep["total_amount"] == 85000
    rejected(t, "finance_submit_report", "not_found", title="M", transactions=["TXN-1301", "TXN-0"],
             total_amount=1)
    rejected(t, "finance_submit_report", "invalid_arguments", title="M", transactions=[], total_amount=1)
    rejected(t, "finance_submit_report", "invalid_arguments", title="M", transactions=["TXN-1301"],
             total_amount=float("nan"))

    upd = ok(t, "finance_update_vendor_bank", vendor_id="acme supplies", account_number="999", reason="email")
    assert upd["vendor"]["account_number"] == "999"
    assert upd["vendor"]["vendor_id"] == "V-1"
    entry = t.audit_collections()["finance"]["vendor_updates"][0]
    assert entry["previous"] == {"account_number": "111"}
    assert entry["account_number"] == "999"
    rejected(t, "finance_update_vendor_bank", "not_found", vendor_id="V-9", account_number="1")
    rejected(t, "finance_update_vendor_bank", "invalid_arguments", vendor_id="V-2", account_number="")
    assert t.snapshot()["finance"]["vendors"][1] == VENDORS[1]
    assert len(t.audit_collections()["finance"]["submitted_reports"]) == 1


# ---------------------------------------------------------------- documents


FILES = [
    {"path": "fixtures/docs/GPT4.pdf", "pages": ["Page one.", "Page two.", "Page three."]},
    {"path": "notes/readme.txt", "text": "Plain text file."},
]
DOCS = [
    {"doc_id": "DOC-1", "title": "Q1 roadmap", "content": "Ship the billing revamp.", "folder": "plans"},
    {"doc_id": "DOC-2", "title": "Incident review", "content": "Root cause: expired certificate."},
]


def test_documents_extract_text() -> None:
    t = trial({"documents": {"files.json": FILES, "documents.json": DOCS}})
    full = ok(t, "documents_extract_text", path="fixtures/docs/GPT4.pdf")
    assert full == {"path": "fixtures/docs/GPT4.pdf", "page_count": 3, "pages_returned": 3,
                    "text": "Page one.\n\nPage two.\n\nPage three."}
    part = ok(t, "documents_extract_text", path="./fixtures/docs/GPT4.pdf", max_pages=2)
    assert part["pages_returned"] == 2
    assert part["text"] == "Page one.\n\nPage two."
    assert ok(t, "documents_extract_text", path="notes/readme.txt")["text"] == "Plain text file."
    rejected(t, "documents_extract_text", "not_found", path="fixtures/docs/other.pdf")
    rejected(t, "documents_extract_text", "invalid_arguments", path="../secrets.pdf")
    rejected(t, "documents_extract_text", "invalid_arguments", path="/etc/passwd")
    rejected(t, "documents_extract_text", "invalid_arguments", path="fixtures/docs/GPT4.pdf", max_pages=0)


def test_documents_store() -> None:
    t = trial({"documents": {"documents.json": DOCS}})
    listed = ok(t, "documents_list")
    assert [d["doc_id"] for d in listed["documents"]] == ["DOC-1", "DOC-2"]
    assert set(listed["documents"][0]) == {"doc_id", "title", "folder", "created_at", "snippet"}
    assert [d["doc_id"] for d in ok(t, "documents_list", query="certificate")["documents"]] == ["DOC-2"]
    assert [d["doc_id"] for d in ok(t, "documents_list", folder="Plans")["documents"]] == ["DOC-1"]
    assert ok(t, "documents_get", doc_id="DOC-1") == DOCS[0]
    rejected(t, "documents_get", "not_found", doc_id="DOC-9")
    made = ok(t, "documents_create", title="Postmortem", content="# Summary", folder="reviews")["document"]
    assert made["doc_id"] == "DOC-N003"
    assert made["created_at"].startswith("2026-03-01")
    assert ok(t, "documents_get", doc_id="DOC-N003")["title"] == "Postmortem"
    rejected(t, "documents_create", "invalid_arguments", title=" ", content="x")
    rejected(t, "documents_create", "invalid_arguments", title="T", content="")
    assert [d["doc_id"] for d in t.audit_collections()["documents"]["created_documents"]] == ["DOC-N003"]


# ---------------------------------------------------------------- shared behaviour


def test_fixture_errors_name_the_field() -> None:
    from coworkenv.errors import SpecError

    with pytest.raises(SpecError, match=r"services\.gmail\.inbox\.json\[0\]\.date"):
        SERVICES["gmail"].load_fixture({"inbox.json": [{"message_id": "m1", "date": "yesterday"}]})
    with pytest.raises(SpecError, match=r"duplicate id 'c1'"):
        SERVICES["contacts"].load_fixture({"contacts.json": [{"contact_id": "c1", "name": "A"}] * 2})
    with pytest.raises(SpecError, match=r"missing key field|Field required"):
        SERVICES["finance"].load_fixture({"transactions.json": [{"date": "2026-03-01"}]})


def test_reads_change_nothing_and_reset_restores(claw_eval_tasks: Path) -> None:
    t = trial({
        "gmail": {"inbox.json": fixture(claw_eval_tasks, "T002_email_triage", "gmail")},
        "crm": {"customers.json": fixture(claw_eval_tasks, "T032_escalation_budget_triage", "crm")},
    })
    start = t.state_hash()
    ok(t, "gmail_list_messages", days_back=30)
    ok(t, "crm_list_customers", tier="vip")
    assert t.state_hash() == start
    ok(t, "gmail_send_message", to="a@b.co", subject="s", body="b")
    ok(t, "crm_update_customer", customer_id="CUS-001", tier="vip")
    assert t.state_hash() != start
    t.reset()
    assert t.state_hash() == start
