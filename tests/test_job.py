"""The main job: config validation, and the CI example end to end with the real embedded model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coworkenv.errors import SpecError
from coworkenv.job.config import JobConfig, load_config
from coworkenv.job.run import SCRIPTED_STUDENT

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coworkenv.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=1500,
        check=False,
    )


def test_defaults_need_no_file() -> None:
    cfg = load_config(None)
    assert cfg == JobConfig()
    assert cfg.student.backend == "embedded"
    assert cfg.synth.generator == "procedural"


def test_the_documented_defaults_are_the_defaults() -> None:
    """examples/job.toml spells out every default; it must not drift from the code."""
    assert load_config(ROOT / "examples" / "job.toml") == JobConfig()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_config_is_valid(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.student.trials >= 1


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[student]\ntrails = 2\n", "student.trails"),
        ("[train]\nlr = -1\n", "train.lr"),
        ("[synth]\ntasks = 4\n[student]\ntasks = 4\n", "student.tasks"),
        ("[synth]\ngenerator = 'magic'\n", "synth.generator"),
        ("out = [\n", "not valid TOML"),
    ],
)
def test_bad_config_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "job.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        load_config(path)
    assert str(path) in str(e.value)
    assert field in str(e.value)
    res = _cli("job", "--config", str(path))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert field in res.stderr


def test_scripted_trials_leave_a_trial_for_the_model(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text("[student]\ntrials = 2\nscripted_trials = 2\n")
    with pytest.raises(SpecError, match=r"scripted_trials \(2\) must be below student.trials \(2\)"):
        load_config(path)


def test_missing_config_is_one_line(tmp_path: Path) -> None:
    res = _cli("job", "--config", str(tmp_path / "nope.toml"))
    assert res.returncode == 2
    assert "config file not found" in res.stderr
    assert "Traceback" not in res.stderr


def _check_delta(score: dict[str, float | None]) -> None:
    before, after = score["before"], score["after"]
    if before is not None and after is not None:
        assert score["delta"] == pytest.approx(after - before)


def _check_base(out: Path, summary: dict[str, Any], stdout: str, eval_ids: list[str]) -> None:
    """The base model (no SFT) on the same held-out tasks: base → SFT → after the update."""
    base = [json.loads(x) for x in (out / "base" / "rollouts.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in base} == set(eval_ids)
    assert {r["policy_version"] for r in base if r["status"] == "ok"} == {"base"}
    assert summary["eval"]["base"]["overall"]["trials"] == 1
    assert "held-out completion base " in stdout
    # base → SFT → after, each delta with its paired interval, in the terminal and the report
    stages = summary["eval"]["stages"]
    assert [r["stage"] for r in stages["stages"]] == ["base", "sft", "after"]
    assert [(d["from"], d["to"]) for d in stages["deltas"]] == [
        ("base", "sft"),
        ("base", "after"),
        ("sft", "after"),
    ]
    assert "after − base:" in stdout
    assert "What training bought" in (out / "report.html").read_text()
    assert "loop@base" in (out / "report.html").read_text()


def _check_sft_prompt(out: Path, sft: list[dict[str, Any]]) -> None:
    """sft.system_prompt = "harness": the student trains on the system prompt its loop serves it."""
    teacher = [json.loads(x) for x in (out / "teacher" / "rollouts.jsonl").read_text().splitlines()]
    assert all(r["messages"][0]["role"] == "system" for r in sft)
    served = {r["messages"][0]["content"] for r in teacher}
    assert served
    assert all(p.startswith("You are an AI coworker with access") for p in served)
    assert {r["messages"][0]["content"] for r in sft} <= served


def _check_after(out: Path, summary: dict[str, Any], eval_ids: list[str]) -> None:
    """Held-out tasks only, before and after: 1 task × 1 greedy trial (student.eval_trials), the
    after-trials served by the pushed weights."""
    assert summary["eval"]["before"]["overall"]["trials"] == 1
    assert summary["eval"]["after"]["overall"]["trials"] == 1
    after = [json.loads(x) for x in (out / "after" / "rollouts.jsonl").read_text().splitlines()]
    assert after
    assert {r["policy_version"] for r in after if r["status"] == "ok"} <= {"rl-1"}
    assert {r["task_id"] for r in after} == set(eval_ids)
    assert "loop@rl-1" in (out / "report.html").read_text()


def _check_sampling(summary: dict[str, Any]) -> dict[str, Any]:
    """train.draw_tasks = 1: the first task drawn already has a spread (its scripted trial), so the
    second is never sampled by the model: 2 scripted trials + 1 model trial."""
    assert summary["student"]["rollouts"] == 3
    sampling: dict[str, Any] = summary["student"]["dynamic_sampling"]
    assert (sampling["draws"], sampling["groups_drawn"], sampling["groups_kept"]) == (1, 1, 1)
    assert summary["train"]["dynamic_sampling"][0]["kept"] == sampling["kept"]
    return sampling


def test_ci_example_runs_every_stage_and_resumes(tmp_path: Path) -> None:
    """examples/job-ci.toml: real SmolLM2 student, a real GRPO update, before/after evaluation."""
    out = tmp_path / "run"
    res = _cli("job", "--config", str(ROOT / "examples" / "job-ci.toml"), "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["synth"]["accepted"] + summary["synth"]["repaired"] == 13
    assert summary["teacher"]["rollouts"] == 10  # 13 tasks minus the student's 2 + 1 held out
    assert summary["teacher"]["mean_reward"] == pytest.approx(1.0)
    sampling = _check_sampling(summary)
    train_ids, eval_ids = summary["student"]["train_tasks"], summary["student"]["eval_tasks"]
    assert (len(train_ids), len(eval_ids)) == (2, 1)
    assert not set(train_ids) & set(eval_ids), "the evaluation tasks are held out from the update"
    assert summary["curate"]["rows"] > 0
    sft = [json.loads(x) for x in (out / "curate" / "sft.jsonl").read_text().splitlines()]
    _check_sft_prompt(out, sft)
    assert summary["sft"]["steps"] == 2
    assert (out / "sft" / "final" / "config.json").exists()
    student = [json.loads(x) for x in (out / "student" / "rollouts.jsonl").read_text().splitlines()]
    ok = [r for r in student if r["status"] == "ok"]
    # scripted_trials = 1: trial 0 of each group plays the reference in SmolLM2's tokens, trial 1
    # samples the SFT'd model
    assert {r["policy_version"] for r in ok if r["trial"] == 0} == {SCRIPTED_STUDENT}
    assert {r["policy_version"] for r in ok if r["trial"] == 1} == {"sft-2"}
    assert len([r for r in ok if r["trial"] == 1]) == 1
    assert summary["trees"]["samples"] > 0
    samples = [json.loads(x) for x in (out / "trees" / "samples.jsonl").read_text().splitlines()]
    assert {smp["task_id"] for smp in samples} <= set(train_ids)
    groups: dict[str, set[float]] = {}
    for smp in samples:
        groups.setdefault(smp["group_key"], set()).add(smp["reward"])
    assert any(len(rewards) > 1 for rewards in groups.values()), "the CI config guarantees signal"
    # a real update, pushed into the serving backend, then re-evaluated with the new weights
    step = summary["train"]["metrics"][0]
    assert "skipped" not in step
    assert step["updates"] == 1
    assert step["grad_norm"] > 0
    assert summary["train"]["pushed"] == ["rl-1"]
    assert summary["train"]["samples"] == len([s for s in samples if s["group_key"] in sampling["kept"]])
    _check_after(out, summary, eval_ids)
    _check_base(out, summary, res.stdout, eval_ids)
    _check_delta(summary["eval"]["comparison"]["overall"]["score"])
    assert summary["eval"]["comparison"]["eval_tasks"] == eval_ids
    report = (out / "report.html").read_text()
    assert "Before → after the update (held-out tasks)" in report
    assert "retained" in report, "the trajectory viewer draws each rollout's prefix tree"
    assert (out / "teacher-report.html").exists()
    # resume: nothing is redone except the report
    res = _cli("job", "--config", str(ROOT / "examples" / "job-ci.toml"), "--out", str(out))
    assert res.returncode == 0
    assert "synth: already done (resume)" in res.stdout
    assert "train: already done (resume)" in res.stdout


def test_auto_checkpointing_caps_tries_at_the_threshold() -> None:
    from coworkenv.job.config import CHECKPOINT_OVER, SFTSection

    assert SFTSection().checkpoint_settings() == {
        "checkpoint_over": CHECKPOINT_OVER,
        "pack_tokens": CHECKPOINT_OVER,
    }
    assert SFTSection(checkpointing=True).checkpoint_settings() == {}
    assert SFTSection(checkpointing=False).checkpoint_settings() == {}
