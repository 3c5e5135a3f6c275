"""The job's before → after comparison on held-out tasks: deltas, task lists, and no leakage."""

from __future__ import annotations

import pytest

from coworkenv.errors import CoworkError
from coworkenv.eval.metrics import summarize
from coworkenv.job.compare import (
    compare,
    comparison_html,
    comparison_line,
    stage_deltas,
    stage_deltas_html,
    stage_deltas_lines,
)
from coworkenv.tasks.builtin import builtin_tasks
from tests.eval_fixtures import record


def test_before_after_with_deltas_per_metric_and_task() -> None:
    a, b = builtin_tasks()[:2]
    before = summarize([record(a, 0, good=False), record(a, 1, good=False), record(b, 0, good=True)], k=2)
    after = summarize([record(a, 0, good=True), record(a, 1, good=False), record(b, 0, good=True)], k=2)
    cmp = compare(before, after, train_tasks=["t1"], eval_tasks=[a.id, b.id])
    score = cmp["overall"]["score"]
    assert score["after"] > score["before"]
    assert score["delta"] == pytest.approx(score["after"] - score["before"])
    rows = {t["task_id"]: t for t in cmp["tasks"]}
    assert rows[a.id]["delta"] > 0
    assert rows[b.id]["delta"] == pytest.approx(0.0)
    assert (cmp["train_tasks"], cmp["eval_tasks"]) == (["t1"], [a.id, b.id])
    html = comparison_html(cmp)
    assert "Trained on: t1" in html
    assert a.id in html
    assert "Δ" in comparison_line(cmp)


def test_no_after_run_leaves_deltas_empty_and_leaks_are_refused() -> None:
    a = builtin_tasks()[0]
    before = summarize([record(a, 0, good=True)], k=1)
    cmp = compare(before, None, train_tasks=["x"], eval_tasks=[a.id])
    assert cmp["overall"]["score"]["after"] is None
    assert cmp["overall"]["score"]["delta"] is None
    with pytest.raises(CoworkError, match="also trained on"):
        compare(before, None, train_tasks=[a.id], eval_tasks=[a.id])


def test_stage_deltas_pair_each_task_across_stages() -> None:
    a, b, c = builtin_tasks()[:3]
    base = summarize([record(a, 0, good=False), record(b, 0, good=False), record(c, 0, good=False)], k=1)
    sft = summarize([record(a, 0, good=True), record(b, 0, good=False), record(c, 0, good=False)], k=1)
    after = summarize([record(a, 0, good=True), record(b, 0, good=True), record(c, 0, good=False)], k=1)
    sd = stage_deltas({"base": base, "sft": sft, "after": after})
    comp = {r["stage"]: r["completion"] for r in sd["stages"]}
    by = {(d["from"], d["to"]): d for d in sd["deltas"]}
    assert set(by) == {("base", "sft"), ("base", "after"), ("sft", "after")}
    for (x, y), d in by.items():
        assert d["delta"] == pytest.approx(comp[y] - comp[x])
        assert d["tasks"] == 3
        lo, hi = d["ci"]
        assert lo <= d["delta"] <= hi
    assert by[("base", "after")]["delta"] > by[("base", "sft")]["delta"] > 0
    lines = stage_deltas_lines(sd)
    assert lines[0].startswith("held-out completion (0-100, 3 task(s)): base model")
    assert any(line.strip().startswith("after − base: +") for line in lines)
    assert "paired 95% interval" in stage_deltas_html(sd)


def test_stage_deltas_skip_missing_stages() -> None:
    a = builtin_tasks()[0]
    sft = summarize([record(a, 0, good=True)], k=1)
    sd = stage_deltas({"base": None, "sft": sft, "after": None})
    assert [r["stage"] for r in sd["stages"]] == ["sft"]
    assert sd["deltas"] == []
