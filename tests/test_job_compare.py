"""The job's before → after comparison on held-out tasks: deltas, task lists, and no leakage."""

from __future__ import annotations

import pytest

from coworkenv.errors import CoworkError
from coworkenv.eval.metrics import summarize
from coworkenv.job.compare import compare, comparison_html, comparison_line
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
