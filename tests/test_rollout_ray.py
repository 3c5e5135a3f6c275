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


def _kill_a_worker_when_busy(out_dir: Path, killed: list[int]) -> None:
    """SIGKILL one Ray rollout worker process once both have rollouts in flight."""
    import os
    import signal
    import time

    import psutil

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = [
            p
            for p in psutil.process_iter(["cmdline"])
            if "RolloutWorker" in " ".join(p.info["cmdline"] or ())
        ]
        calls = out_dir / "calls"
        if len(workers) >= 2 and not (out_dir / RECORDS_FILE).exists() and not any(calls.glob("*.jsonl")):
            time.sleep(1.5)  # each worker has its rollouts open: simulated calls take 0.4 s each
            os.kill(workers[0].pid, signal.SIGKILL)
            killed.append(workers[0].pid)
            return
        time.sleep(0.1)


@pytest.mark.parametrize("attempts", [2, 1])
def test_a_lost_worker_reruns_its_rollouts_or_labels_them_and_none_is_lost(
    tmp_path: Path, attempts: int
) -> None:
    """Kill a worker process mid-run: every planned rollout still ends with exactly one record —
    run again elsewhere (attempts=2), or labelled ``worker_lost`` when no attempt is left."""
    import threading

    from coworkenv.rollout.ray import run_rollouts_ray

    tasks = [builtin_task("M1003_ticket_kb_resolution"), builtin_task("MT01_meeting_slot_booking")]
    killed: list[int] = []
    killer = threading.Thread(target=_kill_a_worker_when_busy, args=(tmp_path, killed), daemon=True)
    killer.start()
    init = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}
    summary = run_rollouts_ray(
        tasks,
        ["agent-chat"],
        4,
        "simulated?ttft_ms=400&tpot_ms=0",
        tmp_path,
        4,
        workers=2,
        init_kwargs=init,
        attempts=attempts,
    )
    killer.join()
    assert killed, "no worker was killed"
    records, problems = read_records(tmp_path / RECORDS_FILE)
    assert not problems
    keys = [(r.task_id, r.trial) for r in records]
    assert sorted(keys) == sorted((t.id, k) for t in tasks for k in range(4)), (
        "one record per planned rollout"
    )
    assert len({r.rollout_id for r in records}) == len(records)
    assert summary.meta["worker_losses"] >= 1
    lost = [r for r in records if r.status == "infra_failure"]
    if attempts == 2:
        assert not lost, [r.failure for r in lost]
        assert summary.meta["reruns"] == summary.meta["worker_losses"]
        assert all(r.rewards is not None and r.rewards.reward == pytest.approx(1.0) for r in records)
    else:
        assert len(lost) == summary.meta["worker_losses"] >= 1
        assert {r.failure.kind for r in lost if r.failure} == {"worker_lost"}
        assert all(r.rewards is None for r in lost)
    for r in records:  # the calls the driver wrote belong to the record that names them
        calls, _ = read_calls(tmp_path / "calls" / f"{r.rollout_id}.calls.jsonl")
        assert all(c.rollout_id == r.rollout_id and c.task_id == r.task_id for c in calls)
        assert len(calls) == r.n_calls
    again = run_rollouts_ray(
        tasks, ["agent-chat"], 4, "simulated?ttft_ms=400&tpot_ms=0", tmp_path, 4, workers=2, init_kwargs=init
    )
    assert again.records == []
    assert again.skipped == 8
