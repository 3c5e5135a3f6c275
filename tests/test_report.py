"""The HTML report: self-contained, every section and rollout present, anchors resolve, and it renders
in headless Chromium (skipped when chromium is not installed: apt-get install chromium chromium-driver)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from coworkenv.eval.metrics import summarize
from coworkenv.eval.report import render_report, slug
from coworkenv.eval.trees import PrefixTree, read_trees
from coworkenv.rollout.record import RolloutRecord, append_record
from coworkenv.tasks.builtin import builtin_tasks
from tests.eval_fixtures import infra, record

SECTIONS = ("summary", "categories", "difficulties", "tasks", "failures", "plots", "curve", "rollouts")


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.classes: list[str] = []
        self.external: list[str] = []
        self.attrs_seen: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.attrs_seen.append((tag, a))
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if a.get("class"):
            self.classes += str(a["class"]).split()
        for key in ("href", "src"):
            v = a.get(key)
            if v and v.startswith("#"):
                self.hrefs.append(v[1:])
            elif v:
                self.external.append(v)


def _parse(text: str) -> _Dom:
    d = _Dom()
    d.feed(text)
    return d


def _records() -> list[RolloutRecord]:
    specs = [s for s in builtin_tasks() if s.reference.steps]
    a, b = specs[0], next(s for s in specs if s.category != specs[0].category)
    return [record(a, 0, good=True), record(a, 1, good=False), record(b, 0, good=True), infra(b, 1)]


def _tree(rollout_id: str) -> PrefixTree:
    return PrefixTree.model_validate(
        {
            "rollout_id": rollout_id,
            "nodes": [
                {
                    "id": "p",
                    "parent": None,
                    "kind": "env",
                    "tokens": 120,
                    "status": "retained",
                    "label": "prompt",
                },
                {"id": "g1", "parent": "p", "kind": "generated", "tokens": 30, "status": "retained"},
                {"id": "g2", "parent": "p", "kind": "generated", "tokens": 25, "status": "dead"},
                {"id": "s", "parent": "g1", "kind": "generated", "tokens": 9, "status": "auxiliary"},
            ],
        }
    )


@pytest.fixture(scope="module")
def report() -> tuple[str, list[RolloutRecord]]:
    recs = _records()
    metrics = [{"step": i, "reward": 0.2 + 0.1 * i, "loss": 1.0 / (i + 1)} for i in range(5)]
    return render_report(
        recs, k=1, trees={recs[0].rollout_id: _tree(recs[0].rollout_id)}, metrics=metrics
    ), recs


def _check_dom(d: _Dom, recs: list[RolloutRecord]) -> None:
    for sec in SECTIONS:
        assert sec in d.ids, sec
    for r in recs:
        assert slug(r.rollout_id) in d.ids
    assert not sorted(set(d.hrefs) - set(d.ids)), "internal links must resolve"
    assert len(d.ids) == len(set(d.ids)), "ids are unique"
    assert d.classes.count("rollout") == len(recs)
    assert d.classes.count("task-row") == len({r.group_key for r in recs})
    for kind in ("retained", "dead", "auxiliary"):
        assert kind in d.classes
    assert "audit-event" in d.classes
    assert "toolcall" in d.classes
    assert "check" in d.classes


def test_report_is_self_contained_and_links_resolve(report: tuple[str, list[RolloutRecord]]) -> None:
    text, recs = report
    d = _parse(text)
    _check_dom(d, recs)
    # no network: nothing but in-page links and the SVG namespace
    assert d.external == []
    assert not [t for t, a in d.attrs_seen if t in ("link", "iframe", "img", "object", "embed")]
    assert [a.get("src") for t, a in d.attrs_seen if t == "script"] == [None]
    assert not re.search(r"url\(|@import", text.split("</style>")[0])
    # checks show why, with evidence links into the audit events
    good = recs[0]
    assert good.grade is not None
    first = good.grade["checks"][0]
    assert first["detail"]
    assert f"{slug(good.rollout_id)}-e" in text
    assert "infrastructure failure — not scored" in text
    assert "upstream_error" in text
    assert text.count("<svg") >= 3  # score by category + reward + loss curves


def test_report_escapes_untrusted_text(report: tuple[str, list[RolloutRecord]]) -> None:
    r = report[1][0].model_copy(update={"final_answer": "<script>alert(1)</script>", "rollout_id": "x<y>"})
    text = render_report([r])
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;" in text


def test_trees_model_rejects_bad_forests(tmp_path: Path) -> None:
    good = _tree("r1").model_dump()
    cyc = {
        "rollout_id": "r2",
        "nodes": [
            {"id": "a", "parent": "b", "kind": "env", "tokens": 1, "status": "retained"},
            {"id": "b", "parent": "a", "kind": "env", "tokens": 1, "status": "retained"},
        ],
    }
    orphan = {
        "rollout_id": "r3",
        "nodes": [{"id": "a", "parent": "zz", "kind": "env", "tokens": 1, "status": "dead"}],
    }
    p = tmp_path / "trees.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in (good, cyc, orphan)) + "\nnot json\n")
    trees, problems = read_trees(p)
    assert list(trees) == ["r1"]
    assert trees["r1"].tokens_by_status() == {
        "retained": 150,
        "dead": 25,
        "auxiliary": 9,
    }
    assert len(problems) == 3
    assert any("cycle" in x for x in problems)
    assert any("zz" in x for x in problems)


def test_report_cli(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from coworkenv.errors import SpecError
    from coworkenv.eval.cli import register

    app = typer.Typer()
    register(app)
    recs = _records()
    for r in recs:
        append_record(tmp_path / "run" / "rollouts.jsonl", r)
    (tmp_path / "trees.jsonl").write_text(json.dumps(_tree(recs[0].rollout_id).model_dump()) + "\n")
    (tmp_path / "m.jsonl").write_text('{"step": 0, "reward": 0.1}\n{"step": 1, "reward": 0.4}\n')
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(tmp_path / "run"),
            "--out",
            str(out),
            "--trees",
            str(tmp_path / "trees.jsonl"),
            "--metrics",
            str(tmp_path / "m.jsonl"),
        ],
    )
    assert res.exit_code == 0, res.output
    _check_dom(_parse(out.read_text()), recs)
    res = CliRunner().invoke(app, ["report", str(tmp_path / "nothing"), "--out", str(out)])
    assert isinstance(res.exception, SpecError)
    assert "no rollouts" in str(res.exception)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium chromium-driver)"
)
def test_report_renders_in_headless_chromium(report: tuple[str, list[RolloutRecord]], tmp_path: Path) -> None:
    text, recs = report
    page = tmp_path / "report.html"
    page.write_text(text)
    assert CHROMIUM is not None
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'ud'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-report="ready"' in dom, "the inline script ran to the end"
    _check_dom(_parse(dom), recs)


def test_curves_need_two_points_and_leave_out_the_clock() -> None:
    from coworkenv.eval.report import curves

    one = curves([{"step": 1, "time": 1.7e9, "step_s": 3.2, "loss": 0.25, "grad_norm": 0.18}])
    assert "<svg" not in one, "a metric logged once is a value, not an empty plot"
    assert ">grad_norm<" in one
    assert ">0.18<" in one
    assert "time" not in one
    assert "step_s" not in one
    two = curves([{"step": 1, "time": 1.0, "loss": 0.5, "kl": 0.1}, {"step": 2, "time": 2.0, "loss": 0.25}])
    assert two.count("<svg") == 1  # loss: a curve; kl (logged once): a value; time: left out
    assert 'aria-label="loss"' in two
    assert ">kl<" in two
    assert 'aria-label="time"' not in two


def test_report_leads_with_before_after_and_the_delta() -> None:
    recs = _records()
    before = [r for r in recs if r.rewards is None or r.rewards.reward < 1.0]
    after = [r for r in recs if r.rewards is not None and r.rewards.reward == 1.0]
    text = render_report([*before, *after], before_after=(before, after))
    summary = text.split('<section id="summary">')[1]
    assert summary.index('id="before-after"') < summary.index("Completion <b>")
    b = summarize(before, k=1, threshold=0.75).overall
    a = summarize(after, k=1, threshold=0.75).overall
    assert b.score is not None
    assert a.score is not None
    assert f'<td>score (0–100; 20 = safe, nothing done)</td><td class="num">{b.score:.1f}</td>' in summary
    assert f"{a.score - b.score:+.1f}</td>" in summary
    assert "a safe run that completes nothing scores 20" in summary
    header = text.split("<th>tasks</th><th>trials</th>")[1]
    assert header.startswith("<th>completion</th>"), "tables lead with completion"
