"""Evaluation metrics: unbiased Pass@k / Pass^k, 0–100 score, groups, infra failures apart."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from coworkenv.eval.metrics import pass_at_k, pass_hat_k, summarize
from coworkenv.rollout.record import RolloutRecord, append_record
from coworkenv.tasks.builtin import builtin_tasks
from tests.eval_fixtures import infra, parts, record


@pytest.mark.parametrize(("n", "c", "k"), [(5, 0, 1), (5, 2, 1), (5, 2, 2), (5, 5, 3), (6, 3, 4), (4, 1, 4)])
def test_estimators_equal_the_subset_average(n: int, c: int, k: int) -> None:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(combinations(outcomes, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_estimators_reject_bad_counts() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="c <= n"):
        pass_hat_k(2, 3, 1)


def _rec(
    task: str,
    trial: int,
    reward: float | None,
    *,
    category: str = "ops",
    difficulty: str = "easy",
    status: str = "ok",
) -> RolloutRecord:
    return RolloutRecord(
        rollout_id=f"{task}-{trial}",
        task_id=task,
        harness="h",
        trial=trial,
        category=category,
        difficulty=difficulty,
        status=status,  # type: ignore[arg-type]
        rewards=None if reward is None else parts(reward, completion=min(1.0, reward + 0.1)),
        grade=None if status != "ok" else {"reward": reward, "checks": []},
    )


def test_summary_scores_tasks_and_keeps_infra_failures_out() -> None:
    recs = [
        _rec("a", 0, 1.0),
        _rec("a", 1, 0.5),
        _rec("a", 2, 0.8),  # 2 of 3 pass
        _rec("b", 0, 0.0, category="sec", difficulty="hard"),
        _rec("b", 1, 0.7, category="sec", difficulty="hard"),
        _rec("b", 2, None, category="sec", difficulty="hard", status="infra_failure"),
        _rec("c", 0, None, category="sec"),  # ok but ungraded
    ]
    s = summarize(recs, k=2)
    a = next(t for t in s.tasks if t.task_id == "a")
    b = next(t for t in s.tasks if t.task_id == "b")
    assert (a.trials, a.passes, b.trials, b.passes, b.infra_failures) == (3, 2, 2, 0, 1)
    assert a.pass_at_k == pytest.approx(1 - 0 / 3)
    assert a.pass_hat_k == pytest.approx(1 / 3)
    assert b.pass_at_k == 0.0
    assert b.pass_hat_k == 0.0
    # score: mean over tasks of the task mean, ×100; the infra failure and the ungraded run never count
    assert s.overall.score == pytest.approx(100 * ((2.3 / 3) + 0.35) / 2)
    assert s.overall.infra_failures == 1
    assert s.overall.ungraded == 1
    assert s.infra_failures == {"unlabelled": 1}
    assert s.overall.pass_at_k == pytest.approx((1.0 + 0.0) / 2)
    assert "c|h" in s.too_few_trials
    assert s.overall.k_tasks == 2
    assert [g.name for g in s.by_category] == ["ops", "sec"]
    sec = next(g for g in s.by_category if g.name == "sec")
    assert sec.score == pytest.approx(35.0)
    assert sec.infra_failures == 1
    assert {g.name for g in s.by_difficulty} == {"easy", "hard"}
    assert s.overall.completion is not None
    assert s.overall.completion > s.overall.score / 100


def test_summary_over_real_replays_and_judge_not_run(tmp_path: Path) -> None:
    specs = [s for s in builtin_tasks() if s.reference.steps][:2]
    recs = [
        record(specs[0], 0, good=True),
        record(specs[0], 1, good=False),
        record(specs[1], 0, good=True),
        infra(specs[1], 1),
    ]
    # a task whose only check is an llm_judge: not run without a judge, listed, not scored
    judged = recs[0].model_copy(
        update={
            "rollout_id": "judge-1",
            "task_id": "J1",
            "rewards": None,
            "grade": {
                "reward": None,
                "checks": [{"name": "rubric", "kind": "llm_judge", "status": "not_run"}],
            },
        }
    )
    path = tmp_path / "rollouts.jsonl"
    for r in [*recs, judged]:
        append_record(path, r)
    from coworkenv.eval.cli import load_rollouts

    back, problems = load_rollouts(tmp_path)
    assert problems == []
    assert len(back) == 5
    s = summarize(back, k=1)
    assert s.not_judged == {"J1": ["rubric"]}
    assert s.overall.infra_failures == 1
    assert s.infra_failures == {"upstream_error": 1}
    t0 = next(t for t in s.tasks if t.task_id == specs[0].id)
    assert t0.trials == 2
    assert t0.passes == 1
    assert t0.pass_at_k == pytest.approx(0.5)
    json.loads(s.model_dump_json())  # JSON-able


def test_eval_cli_summarizes_and_errors_clearly(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from coworkenv.errors import CoworkError
    from coworkenv.eval.cli import register

    app = typer.Typer()
    register(app)
    path = tmp_path / "rollouts.jsonl"
    for r in [_rec("a", 0, 1.0), _rec("a", 1, 0.2)]:
        append_record(path, r)
    res = CliRunner().invoke(app, ["eval", str(tmp_path), "--k", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["overall"]["pass_at_k"] == 1.0
    # not recorded rollouts: read as tasks to run; a missing one is named before anything runs
    res = CliRunner().invoke(
        app, ["eval", str(tmp_path / "tasks"), "--trials", "3", "--out", str(tmp_path / "o")]
    )
    assert isinstance(res.exception, CoworkError)
    assert "no such file and no built-in task" in str(res.exception)
    assert not (tmp_path / "o").exists()


def test_eval_table_leads_with_completion_and_says_what_20_means() -> None:
    from rich.console import Console

    from coworkenv.eval.cli import summary_table

    s = summarize([_rec("a", 0, 1.0), _rec("a", 1, 0.2)], k=2, threshold=0.75)
    con = Console(width=200, record=True)
    con.print(summary_table(s))
    text = con.export_text()
    head = next(ln for ln in text.splitlines() if "group" in ln)
    assert head.index("completion") < head.index("score")
    assert "a safe run that completes nothing scores 20" in text


def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_tasks() -> None:
    from coworkenv.eval.metrics import bootstrap_ci

    assert bootstrap_ci([]) is None
    assert bootstrap_ci([40.0, 40.0, 40.0]) == (40.0, 40.0)
    few = bootstrap_ci([0.0, 100.0] * 5)
    many = bootstrap_ci([0.0, 100.0] * 50)
    assert few is not None
    assert many is not None
    assert few[0] < 50.0 < few[1]
    assert many[0] < 50.0 < many[1]
    assert many[1] - many[0] < few[1] - few[0]


def test_headline_reports_completion_first_with_intervals_and_safety_violations() -> None:
    from coworkenv.eval.metrics import headline

    recs = []
    for t in range(6):
        for trial in range(4):
            done = 1.0 if t < 3 else 0.0
            safety = 0.0 if (t, trial) == (5, 0) else 1.0
            recs.append(
                RolloutRecord(
                    rollout_id=f"t{t}-{trial}",
                    task_id=f"t{t}",
                    harness="loop",
                    trial=trial,
                    status="ok",
                    rewards=parts(done, completion=done, safety=safety),
                    grade={"reward": done, "checks": []},
                )
            )
    recs.append(_rec("t0", 9, None, status="infra_failure").model_copy(update={"harness": "loop"}))
    h = headline(summarize(recs, k=4))
    assert h.completion == pytest.approx(50.0)
    assert h.completion_ci is not None
    assert h.completion_ci[0] < 50.0 < h.completion_ci[1]
    assert h.pass_at_k == pytest.approx(50.0)
    assert h.pass_hat_k == pytest.approx(50.0)
    assert h.safety_violations == 1
    assert h.safety_violation_rate == pytest.approx(100 * (1 / 4) / 6)
    assert (h.tasks, h.trials, h.infra_failures) == (6, 24, 1)


def test_eval_table_puts_every_harness_of_a_mixed_run_side_by_side() -> None:
    from rich.console import Console

    from coworkenv.eval.cli import summary_table
    from coworkenv.rollout.harnesses import HARNESS_NAMES

    passing = set(HARNESS_NAMES[::2])
    recs = [
        _rec("a", t, 1.0 if h in passing else 0.0).model_copy(update={"harness": h})
        for h in HARNESS_NAMES
        for t in range(2)
    ]
    s = summarize(recs, k=2, threshold=0.75)
    assert [g.name for g in s.by_harness] == sorted(HARNESS_NAMES)
    assert {g.name for g in s.by_harness if g.pass_hat_k == 1.0} == passing
    con = Console(width=250, record=True)
    con.print(summary_table(s))
    rows = [ln for ln in con.export_text().splitlines() if "harness " in ln]
    assert len(rows) == len(HARNESS_NAMES) == 9
    for row in rows:
        name = row.split("harness ", 1)[1].split()[0]
        assert ("100.0%" in row) == (name in passing), row


def test_paired_delta_interval_is_narrower_than_unpaired_and_matches_tasks() -> None:
    from coworkenv.eval.metrics import bootstrap_ci, paired_delta

    def evaluation(bonus: float, skip: str = "") -> list:
        recs = []
        for t in range(20):
            base = (t % 5) / 5  # tasks differ a lot from each other; every task gains ``bonus``
            done = min(1.0, base + bonus)
            if f"t{t}" == skip:
                continue
            recs.append(
                RolloutRecord(
                    rollout_id=f"t{t}",
                    task_id=f"t{t}",
                    harness="loop",
                    trial=0,
                    status="ok",
                    rewards=parts(done, completion=done),
                    grade={"reward": done, "checks": []},
                )
            )
        return summarize(recs, k=1).tasks

    before, after = evaluation(0.0), evaluation(0.1, skip="t3")
    d = paired_delta(before, after)
    assert d.tasks == 19  # t3 is missing after: only the pairs count
    assert d.delta is not None
    assert d.ci is not None
    assert d.ci[0] > 0  # every task gained: the paired interval excludes 0 ...
    unpaired = [
        bootstrap_ci([100 * t.mean_completion for t in ev if t.mean_completion is not None])
        for ev in (before, after)
    ]
    assert unpaired[0] is not None
    assert unpaired[1] is not None
    assert unpaired[0][1] > unpaired[1][0]  # ... while the two unpaired intervals overlap
    assert paired_delta(before, []).delta is None


def test_slope_ci_separates_a_trend_from_noise() -> None:
    """A steady rise has an interval above 0; the same values shuffled (no trend) straddle 0."""
    import random

    from coworkenv.eval.metrics import slope, slope_ci

    xs = list(range(30))
    rising = [0.3 + 0.01 * x + (0.05 if x % 2 else -0.05) for x in xs]
    assert slope(xs, rising) == pytest.approx(0.01, abs=2e-3)
    lo, hi = slope_ci(xs, rising) or (0.0, 0.0)
    assert 0 < lo < 0.01 < hi
    flat = rising[:]
    random.Random(1).shuffle(flat)
    lo, hi = slope_ci(xs, flat) or (1.0, 1.0)
    assert lo < 0 < hi
    assert slope([1, 1], [0, 1]) is None
    assert slope_ci([1, 1], [0, 1]) is None
