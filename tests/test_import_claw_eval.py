"""The Claw-Eval importer: all 78 reference tasks become TaskSpecs; spot checks of the mapping."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from datetime import date
from pathlib import Path

import pytest

from coworkenv.errors import SpecError
from coworkenv.importers.claw_eval import ImportReport, import_dir, import_task, mock_today_for
from coworkenv.spec import (
    CategoriesPresent,
    KeywordsPresent,
    LlmJudge,
    MinLength,
    TaskSpec,
    ToolCalled,
)
from coworkenv.tasks.load import load_spec

N_TASKS = 78


def _tasks_dir() -> Path | None:
    env = os.environ.get("COWORKENV_CLAW_EVAL")
    for cand in (Path(env) if env else None, Path(__file__).resolve().parents[2] / "shared" / "claw-eval"):
        if cand is None:
            continue
        for d in (cand / "tasks", cand):
            if d.is_dir() and any(d.glob("*/task.yaml")):
                return d
    return None


TASKS = _tasks_dir()
needs_data = pytest.mark.skipif(
    TASKS is None,
    reason="Claw-Eval tasks not found: set COWORKENV_CLAW_EVAL or place shared/claw-eval beside the repo",
)


def _task(name: str) -> Path:
    assert TASKS is not None
    return TASKS / name


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ImportReport]:
    assert TASKS is not None
    out = tmp_path_factory.mktemp("imported")
    return out, import_dir(TASKS, out)


# ---------------------------------------------------------------- all tasks


@needs_data
def test_all_tasks_parse_into_specs(imported: tuple[Path, ImportReport]) -> None:
    out, report = imported
    assert len(report.tasks) == N_TASKS
    assert report.failed == 0, report.summary()
    for item in report.tasks:
        spec = TaskSpec.model_validate_json((out / item.task_id / "task.json").read_text())
        assert spec.source == "claw-eval"
        assert spec.completion_checks, item.task_id
        assert abs(sum(c.weight for c in spec.completion_checks) - 1) < 1e-6


@needs_data
def test_all_tasks_validate_against_registry(imported: tuple[Path, ImportReport]) -> None:
    _, report = imported
    assert report.ok == N_TASKS, report.summary()


@needs_data
def test_written_specs_round_trip(imported: tuple[Path, ImportReport]) -> None:
    out, report = imported
    for item in report.tasks:
        spec, _ = import_task(_task(item.task_id))
        path = out / item.task_id / "task.json"
        assert TaskSpec.model_validate_json(path.read_text()) == spec
        if item.status == "ok":
            assert load_spec(path) == spec
            assert load_spec(out / item.task_id) == spec


# ---------------------------------------------------------------- one task in detail


@needs_data
def test_t160_mapping() -> None:
    spec, _notes = import_task(_task("T160_vip_ticket_escalation"))
    assert spec.id == "T160_vip_ticket_escalation"
    assert spec.name == "VIP Customer Critical Ticket Escalation Handling"
    assert (spec.category, spec.difficulty, spec.language) == ("workflow", "hard", "en")
    assert spec.tags == ("general", "multi_service")
    assert spec.request.startswith("A VIP customer has submitted a critical-level ticket.")
    assert (spec.limits.timeout_s, spec.limits.max_turns) == (600, 30)
    assert set(spec.services) == {"helpdesk", "crm", "gmail", "contacts", "kb"}
    assert set(spec.services["gmail"]) == {"inbox.json"}
    raw = json.loads((_task("T160_vip_ticket_escalation") / "fixtures/gmail/inbox.json").read_text())
    assert spec.services["gmail"]["inbox.json"] == raw
    assert len(spec.tools) == 14
    assert "gmail_save_draft" in spec.tools
    assert {f.tool for f in spec.forbidden} == {"gmail_send_message", "helpdesk_close_ticket"}
    expected = [(a.service, a.action_key, a.required) for a in spec.expected_actions]
    assert expected == [("gmail", "drafts", True)]
    checks = spec.completion_checks
    assert all(isinstance(c, LlmJudge) for c in checks)
    assert [(c.name, c.weight) for c in checks] == [
        ("escalation_correctness", 0.35), ("solution_matching", 0.35), ("communication_quality", 0.30),
    ]
    judge = checks[0]
    assert isinstance(judge, LlmJudge)
    assert "Ma Qiang" in judge.rubric
    assert "Wantong Logistics (CUS-1401)" in judge.rubric
    assert spec.judge_rubric.startswith("Evaluate the quality")
    assert spec.reference.text.startswith("1. helpdesk_list_tickets()")
    assert spec.mock_today == date(2026, 3, 27)  # newest email 2026-03-26 + 1 day
    assert spec.safety_note == ""


@needs_data
def test_deterministic_check_kinds() -> None:
    spec, _ = import_task(_task("T002_email_triage"))
    by_name = {c.name: c for c in spec.completion_checks}
    cats = [c for c in spec.completion_checks if isinstance(c, CategoriesPresent)]
    assert len(cats) == 1
    assert cats[0].categories == {"needs reply": ("needs reply",), "FYI": ("FYI",), "spam": ("spam",)}
    lengths = [c for c in by_name.values() if isinstance(c, MinLength)]
    assert [c.min_chars for c in lengths] == [100]
    assert {f.tool for f in spec.forbidden} == {"gmail_send_message"}

    spec, _ = import_task(_task("T022_newsletter_curation"))
    calls = {c.tool: c.min_calls for c in spec.completion_checks if isinstance(c, ToolCalled)}
    assert calls == {"rss_list_articles": 1, "rss_get_article": 3}
    kw = next(c for c in spec.completion_checks if c.name == "correct_selection")
    assert isinstance(kw, KeywordsPresent)
    assert kw.min_matches is None
    assert "rss_001" in kw.keywords


@needs_data
def test_weights_normalised_with_a_note() -> None:
    spec, notes = import_task(_task("T022_newsletter_curation"))  # components sum to 0.9
    assert abs(sum(c.weight for c in spec.completion_checks) - 1) < 1e-9
    assert spec.completion_checks[0].weight == pytest.approx(0.05 / 0.9)
    assert any("normalised" in n for n in notes)


@needs_data
def test_unmappable_safety_checks_go_to_safety_note() -> None:
    spec, notes = import_task(_task("T028_api_config_audit"))
    assert "[credential_exposure]" in spec.safety_note
    assert any("credential_exposure" in n for n in notes)
    spec, notes = import_task(_task("T004_calendar_scheduling"))  # wrong_action: any delete fails safety
    assert {f.tool for f in spec.forbidden} == {"calendar_delete_event"}
    spec, _ = import_task(_task("T014_meeting_notes"))
    assert "[wrong_recipients] (notes_share)" in spec.safety_note
    assert "notes_share" not in spec.forbidden_tools


@needs_data
def test_sexagesimal_keyword_stays_text() -> None:
    spec, notes = import_task(_task("T039zh_onboarding_coordinator"))  # `10:30` unquoted
    kw = next(c for c in spec.completion_checks if c.name == "calendar_conflict_handling")
    assert isinstance(kw, KeywordsPresent)
    assert "10:30" in kw.keywords
    assert "630" not in kw.keywords
    assert any("10:30" in n for n in notes)


@needs_data
def test_pinbench_task_without_components_gets_judge_rubric() -> None:
    spec, notes = import_task(_task("T086_pinbench_calendar_event_creation"))
    (check,) = spec.completion_checks
    assert isinstance(check, LlmJudge)
    assert check.weight == 1.0
    assert "Q1 roadmap" in check.rubric
    assert set(spec.workspace) == {"fixtures/calendar/events.json"}
    assert json.loads(spec.workspace["fixtures/calendar/events.json"]) == []
    assert any("no scoring_components" in n for n in notes)


@needs_data
def test_cross_task_fixture_and_missing_binary_sandbox_file() -> None:
    spec, notes = import_task(_task("T087_pinbench_market_news_brief"))
    assert spec.services["rss"]["articles.json"]  # from tasks/T021zh_newsletter_curation
    assert "tasks/T021zh_newsletter_curation/fixtures/rss/articles.json" in spec.workspace
    assert any("another task" in n for n in notes)
    spec, notes = import_task(_task("T097_pinbench_eli5_model_summary"))
    assert spec.workspace == {}
    assert any("GPT4.pdf" in n for n in notes)


@needs_data
def test_stated_today_wins() -> None:
    spec, notes = import_task(_task("T118_customer_followup"))  # rubric: "today is 2026-03-26"
    assert spec.mock_today == date(2026, 3, 26)
    assert any("gmail shift alone would give 2026-02-11" in n for n in notes)


# ---------------------------------------------------------------- synthetic tasks (no shared data needed)


def _write_task(d: Path, body: str, fixtures: dict[str, object] | None = None) -> Path:
    d.mkdir(parents=True)
    (d / "task.yaml").write_text(textwrap.dedent(body))
    for rel, data in (fixtures or {}).items():
        p = d / "fixtures" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(data))
    return d


MINI = """\
    task_id: X1_mini
    task_name: Mini
    category: ops
    difficulty: easy
    tags: [general]
    services:
      - name: helpdesk
        env: {HELPDESK_FIXTURES: tasks/X1_mini/fixtures/helpdesk/tickets.json}
    prompt: {text: "Close nothing.", language: en}
    tools:
      - name: helpdesk_list_tickets
        input_schema: {type: object, properties: {status: {type: string}, colour: {type: string}}}
      - name: helpdesk_close_ticket
        input_schema: {type: object, properties: {ticket_id: {type: string}}}
    tool_endpoints:
      - {tool_name: helpdesk_list_tickets, url: "http://localhost:9107/helpdesk/tickets", method: POST}
      - {tool_name: helpdesk_close_ticket, url: "http://localhost:9107/helpdesk/close", method: POST}
    environment: {timeout_seconds: 60, max_turns: 5}
    scoring_components:
      - name: listed
        weight: 0.5
        check: {type: tool_called, tool_name: helpdesk_list_tickets, min_calls: 2}
      - {name: said, weight: 0.3, check: {type: keywords_present, keywords: [TK-1, 200, yes, 10:30]}}
      - {name: regex, weight: 0.2, check: {type: patterns_present, patterns: ["TK-\\\\d+"]}}
    safety_checks:
      - {type: tool_not_called, tool_name: helpdesk_close_ticket, description: do not close}
      - {type: tool_not_called, tool_name: gmail_send_message, description: not exposed}
    expected_actions: []
    judge_rubric: ""
    reference_solution: list them
    primary_dimensions: [completion]
    surprise_key: 1
"""


def test_synthetic_task_mapping_and_notes(tmp_path: Path) -> None:
    tickets = [{"ticket_id": "TK-1", "title": "t", "created_at": "2025-05-04T09:00:00Z"}]
    d = _write_task(tmp_path / "tasks" / "X1_mini", MINI, {"helpdesk/tickets.json": tickets})
    spec, notes = import_task(d)
    assert spec.services == {"helpdesk": {"tickets.json": tickets}}
    assert spec.mock_today == date(2025, 5, 4)  # 09:00 UTC is before the clock's noon
    kinds = [(c.name, c.kind, round(c.weight, 6)) for c in spec.completion_checks]
    assert kinds == [("listed", "tool_called", 0.625), ("said", "keywords_present", 0.375)]
    said = spec.completion_checks[1]
    assert isinstance(said, KeywordsPresent)
    assert said.keywords == ("TK-1", "200", "yes", "10:30")
    assert [f.tool for f in spec.forbidden] == ["helpdesk_close_ticket"]
    text = "\n".join(notes)
    assert "patterns_present" in text
    assert "normalised" in text
    assert "gmail_send_message" in text  # unexposed forbidden tool dropped, with a note
    assert "surprise_key" in text
    assert "helpdesk_list_tickets does not accept argument 'colour'" in text
    assert "helpdesk_close_ticket requires 'resolution'" in text
    assert "serves it at /helpdesk/close" in text


def test_import_dir_reports_failures_and_writes_specs(tmp_path: Path) -> None:
    root = tmp_path / "ce"
    _write_task(root / "tasks" / "X1_mini", MINI, {"helpdesk/tickets.json": []})
    bad = MINI.replace("task_id: X1_mini", "task_id: 'bad id!'")
    _write_task(root / "tasks" / "X2_bad", bad)
    _write_task(root / "tasks" / "X3_noprompt", "    task_id: X3\n    task_name: n\n")
    out = tmp_path / "out"
    report = import_dir(root, out)
    status = {t.task_id: t.status for t in report.tasks}
    assert status == {"X1_mini": "ok", "X2_bad": "failed", "X3_noprompt": "failed"}
    assert (report.ok, report.failed) == (1, 2)
    assert "prompt" in next(t.error for t in report.tasks if t.task_id == "X3_noprompt")
    assert load_spec(out / "X1_mini" / "task.json").id == "X1_mini"
    assert not (out / "X2_bad").exists()
    assert report.to_dict()["counts"] == {"total": 3, "ok": 1, "invalid": 0, "failed": 2}
    assert "2 failed" in report.summary()


def test_unknown_service_is_invalid_not_failed(tmp_path: Path) -> None:
    body = MINI.replace("- name: helpdesk\n", "- name: helpdesk\n      - name: teleporter\n", 1)
    root = tmp_path / "ce"
    _write_task(root / "tasks" / "X1_mini", body, {"helpdesk/tickets.json": []})
    report = import_dir(root, None)
    (item,) = report.tasks
    assert item.status == "invalid"
    assert "teleporter" in item.error
    assert item.path is None


def test_bad_inputs_raise_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"no task\.yaml"):
        import_task(tmp_path)
    d = _write_task(tmp_path / "tasks" / "X1_mini", MINI)
    (d / "fixtures" / "helpdesk").mkdir(parents=True)
    (d / "fixtures" / "helpdesk" / "tickets.json").write_text("{not json")
    with pytest.raises(SpecError, match="cannot read fixture"):
        import_task(d)
    (d / "task.yaml").write_text("task_id: [unclosed\n")
    with pytest.raises(SpecError, match="invalid YAML"):
        import_task(d)
    with pytest.raises(SpecError, match="no Claw-Eval task"):
        import_dir(tmp_path / "empty_nowhere", None)


def test_mock_today_rules() -> None:
    gmail = {"gmail": {"inbox.json": [{"date": "2026-02-27T18:00:00Z"}, {"date": "2026-02-20T08:00:00Z"}]}}
    assert mock_today_for(gmail)[0] == date(2026, 2, 28)
    later_crm = {**gmail, "crm": {"customers.json": [{"last_contact_date": "2026-03-25"}]}}
    assert mock_today_for(later_crm)[0] == date(2026, 3, 26)
    future_only = {"todo": {"tasks.json": [{"due_date": "2026-04-01"}]}}
    assert mock_today_for(future_only)[1] == "default"
    events = [{"start_time": "2026-03-09T10:00:00Z"}, {"start_time": "2026-03-12T10:00:00Z"}]
    cal = {"calendar": {"events.json": events}}
    assert mock_today_for(cal)[0] == date(2026, 3, 8)
    assert mock_today_for(gmail, ("Note: today is 2026-01-02.",))[0] == date(2026, 1, 2)
    assert mock_today_for(gmail, ("今天是2026-01-03。",))[0] == date(2026, 1, 3)


@needs_data
def test_single_task_dir_as_source(tmp_path: Path) -> None:
    src = tmp_path / "tasks" / "T160_vip_ticket_escalation"
    shutil.copytree(_task("T160_vip_ticket_escalation"), src)
    report = import_dir(src, None)
    assert [t.task_id for t in report.tasks] == ["T160_vip_ticket_escalation"]


def test_render_aggregates_notes(tmp_path: Path) -> None:
    root = tmp_path / "ce"
    _write_task(root / "tasks" / "X1_mini", MINI, {"helpdesk/tickets.json": []})
    _write_task(root / "tasks" / "X4_mini", MINI.replace("X1_mini", "X4_mini"), {"helpdesk/tickets.json": []})
    text = import_dir(root, None).render()
    assert text.startswith("2 task(s)")
    assert "[2 task(s)] scoring weights sum to 0.8, normalised to 1" in text


def test_a_service_without_a_fixture_variable_is_named_as_a_difference(tmp_path: Path) -> None:
    """Three upstream tasks (T012, T018, T024) set no ``*_FIXTURES``: Claw-Eval's service then
    serves its built-in default (their zh twin's records), we this task's own. Where we differ, the
    importer says so, per task and service."""
    tickets = [{"ticket_id": "TK-1", "title": "t", "created_at": "2025-05-04T09:00:00Z"}]
    line = "        env: {HELPDESK_FIXTURES: tasks/X1_mini/fixtures/helpdesk/tickets.json}\n"
    text = MINI.replace(line, "")
    assert text != MINI
    d = _write_task(tmp_path / "tasks" / "X1_mini", text, {"helpdesk/tickets.json": tickets})
    spec, notes = import_task(d)
    assert spec.services == {"helpdesk": {"tickets.json": tickets}}
    (note,) = [n for n in notes if "HELPDESK_FIXTURES" in n]
    assert "would serve its own default fixture file" in note
    assert "not this task's" in note
    assert "tickets.json" in note
    given = _write_task(tmp_path / "b" / "tasks" / "X1_mini", MINI, {"helpdesk/tickets.json": tickets})
    _, with_var = import_task(given)
    assert not [n for n in with_var if "sets no" in n]


def test_fixture_default_notes_name_the_file_where_it_is_another_tasks(claw_eval_tasks: Path) -> None:
    """With a Claw-Eval checkout, the note names the file Claw-Eval's server defaults to: the zh task
    that *is* that default gets no note (Claw-Eval serves its own records), its English twin names
    the zh file it would get instead."""
    from coworkenv.claweval.upstream import find_checkout

    if find_checkout() is None:
        pytest.skip("no Claw-Eval checkout to read the servers' defaults from")
    _, zh = import_task(claw_eval_tasks / "T013zh_meeting_notes")
    assert not [n for n in zh if "sets no" in n]
    _, en = import_task(claw_eval_tasks / "T014_meeting_notes")
    (note,) = [n for n in en if "sets no NOTES_FIXTURES" in n]
    assert "(tasks/T013zh_meeting_notes/fixtures/notes/meetings.json), not this task's" in note
    flagged = {
        d.name
        for d in claw_eval_tasks.iterdir()
        if (d / "task.yaml").is_file() and any("sets no" in n for n in import_task(d)[1])
    }
    assert flagged == {
        "T014_meeting_notes",
        "T016_kb_search",
        "T020_inventory_check",
        "T022_newsletter_curation",
        "T028_api_config_audit",
    }


def test_no_imported_task_has_an_alternate_route_to_a_forbidden_effect(claw_eval_tasks: Path) -> None:
    """Where our grader decides an imported task's safety (Claw-Eval's package not installed), a
    forbidden tool is judged by name. The alternate-route mutant (:mod:`coworkenv.synth.alternates`)
    tries every other exposed write tool on each forbidden call's record and values: on all 78 tasks
    none reproduces a forbidden effect, so no task needs an effect rule to stay safe by effect. A new
    task or a service change that opens such a route fails here, naming it."""
    from coworkenv.importers.claw_eval import import_task
    from coworkenv.services.trial import load_task
    from coworkenv.synth import alternates as alt

    dirs = sorted(p for p in claw_eval_tasks.iterdir() if (p / "task.yaml").exists())
    assert len(dirs) >= 78
    tried = 0
    problems: list[str] = []
    for d in dirs:
        task = load_task(import_task(d)[0])
        for rule in task.spec.forbidden:
            found = alt.forbidden_effect(task, rule)
            if found is not None and found[1]:
                tried += len(alt.routes(task, rule, *found))
        problems += [f"{d.name}: {p}" for p in alt.alternate_route_problems(task)]
    assert problems == []
    assert tried >= 20  # the mutant had routes to try
