"""The Ray runner on a small local Ray instance: same records, resumable, calls written by the driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from coworkenv.proxy.capture import read_calls
from coworkenv.rollout.record import read_records
from coworkenv.rollout.runner import RECORDS_FILE
from coworkenv.tasks.builtin import builtin_task

ray = pytest.importorskip("ray")


def test_ray_runner_spreads_rollouts_and_resumes(tmp_path: Path) -> None:
    from coworkenv.rollout.ray import run_rollouts_ray

    tasks = [builtin_task("M1003_ticket_kb_resolution"), builtin_task("MT01_meeting_slot_booking")]
    init = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}
    summary = run_rollouts_ray(tasks, ["loop"], 2, "reference", tmp_path, 2, workers=2, init_kwargs=init)
    assert summary.ok == 4, [r.failure for r in summary.records]
    records, problems = read_records(tmp_path / RECORDS_FILE)
    assert not problems
    assert len(records) == 4
    assert {(r.task_id, r.trial) for r in records} == {(t.id, k) for t in tasks for k in (0, 1)}
    for r in records:
        assert r.rewards is not None
        assert r.rewards.reward == pytest.approx(1.0)
        calls, _ = read_calls(tmp_path / "calls" / f"{r.rollout_id}.calls.jsonl")
        assert len(calls) == r.n_calls > 0
        assert all(c.output_ids for c in calls)
    again = run_rollouts_ray(tasks, ["loop"], 2, "reference", tmp_path, 2, workers=2, init_kwargs=init)
    assert again.records == []
    assert again.skipped == 4


def test_ray_workers_jail_every_harness_process(tmp_path: Path) -> None:
    """The same guarantees on a Ray worker: the red-team attack is blocked, the reward is earned."""
    from coworkenv.rollout.ray import run_rollouts_ray
    from coworkenv.rollout.redteam import RedTeamPolicy, Targets, attack_report
    from tests.test_reward_integrity import LIBRARY, ROOT, TASK, require_bwrap

    require_bwrap()
    records = tmp_path / RECORDS_FILE
    records.write_text("")  # the driver's records file: the worker's agent must not reach it
    policy = RedTeamPolicy(
        Targets(
            read=(str(LIBRARY / f"{TASK}.json"), str(ROOT / "pyproject.toml")),
            list=(str(ROOT), str(tmp_path)),
            write=("/logs/verifier/reward.json",),
            fork_max=5000,  # above the default per-rollout process limit
            big_mib=2048,  # above the default file-size limit
            shm_mib=300,  # above the default /dev/shm size
            hog_mib=20 << 10,  # above the default per-process memory limit (16 GiB)
            fill_mib=4,
        )
    )
    init = {"num_cpus": 1, "include_dashboard": False, "log_to_driver": False}
    task = builtin_task(TASK).model_copy(update={"workspace": {"notes.md": "# notes\n"}})  # bash tool on
    summary = run_rollouts_ray([task], ["loop"], 1, policy, tmp_path, 1, workers=1, init_kwargs=init)
    (record,) = summary.records
    assert record.status == "ok", record.failure
    assert record.meta["isolation"]["mode"] == "bwrap"
    report = attack_report(record.messages)
    # 2 reads, 2 listings, 1 write, fork bomb, huge file, /dev/shm, memory past the limit
    assert len(report) == 9, report
    assert all(v.startswith("blocked") for v in report.values()), report
    assert record.rewards is not None
    assert record.rewards.reward == pytest.approx(1.0)
