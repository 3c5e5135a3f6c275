"""Dynamic sampling: groups without a reward spread are never kept, draws stop at ``want`` kept
groups or ``max_draws``, an infra failure makes a group unusable, and the cursor is deterministic."""

from __future__ import annotations

import pytest

from coworkenv.rl.dynamic import DynamicSampler, group_spreads
from coworkenv.rollout.record import FailureLabel, RewardParts, RolloutRecord


def rec(task: str, trial: int, reward: float | None, harness: str = "loop") -> RolloutRecord:
    if reward is None:
        return RolloutRecord(
            rollout_id=f"{task}-{trial}",
            task_id=task,
            harness=harness,
            trial=trial,
            status="infra_failure",
            failure=FailureLabel(kind="harness_crash", detail="boom"),
        )
    parts = RewardParts(reward=reward, completion=reward, safety=1.0, robustness=1.0)
    return RolloutRecord(
        rollout_id=f"{task}-{trial}", task_id=task, harness=harness, trial=trial, status="ok", rewards=parts
    )


def test_group_spreads() -> None:
    recs = [rec("a", 0, 0.2), rec("a", 1, 0.9), rec("b", 0, 0.5), rec("b", 1, 0.5)]
    recs += [rec("c", 0, 0.1), rec("c", 1, None), rec("d", 0, 1.0)]
    got = group_spreads(recs)
    assert got["a|loop"] == pytest.approx(0.7)
    assert got["b|loop"] == 0.0
    assert got["c|loop"] is None  # an infra failure: the trainer rejects the group
    assert got["d|loop"] is None  # one graded rollout is no group


def test_draws_until_enough_groups_have_a_spread() -> None:
    pool = ["t0", "t1", "t2", "t3", "t4", "t5"]
    spread = {"t1", "t4", "t5"}
    s = DynamicSampler(pool, per_draw=2, want=2, max_draws=5)
    cursor = 4  # a resumed update starts where the last one ended (wrapping at the end of the pool)
    while not s.done:
        tasks = s.tasks(cursor)
        cursor += len(tasks)
        s.keep(tasks, [rec(t, i, (0.9 * i) if t in spread else 0.3) for t in tasks for i in range(2)])
    assert [d.tasks for d in s.draws] == [["t4", "t5"]]
    assert s.kept == ["t4|loop", "t5|loop"]
    s2 = DynamicSampler(pool, per_draw=2, want=3, max_draws=5)
    cursor = 0
    while not s2.done:
        tasks = s2.tasks(cursor)
        cursor += len(tasks)
        s2.keep(tasks, [rec(t, i, (0.9 * i) if t in spread else 0.3) for t in tasks for i in range(2)])
    assert [d.tasks for d in s2.draws] == [["t0", "t1"], ["t2", "t3"], ["t4", "t5"]]
    assert s2.kept == ["t1|loop", "t4|loop", "t5|loop"]
    rep = s2.report()
    assert (rep["draws"], rep["groups_drawn"], rep["groups_with_spread"], rep["groups_kept"]) == (3, 6, 3, 3)


def test_max_draws_bounds_the_cost_of_a_pool_without_signal() -> None:
    s = DynamicSampler(["a", "b"], per_draw=1, want=4, max_draws=3)
    cursor = 0
    while not s.done:
        tasks = s.tasks(cursor)
        cursor += 1
        s.keep(tasks, [rec(t, i, 0.5) for t in tasks for i in range(4)])
    assert len(s.draws) == 3
    assert s.kept == []
    with pytest.raises(ValueError, match="want=0"):
        DynamicSampler(["a"], per_draw=1, want=0, max_draws=1)
