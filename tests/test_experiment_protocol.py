"""The training-utility experiment's bookkeeping: summary.json per set and stage, goals, error analysis.

The experiment itself runs for hours (experiments/README.md); these check the pure parts on made-up
stage results, so a wrong verdict or a missing field cannot hide behind a long run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from coworkenv.rollout.record import FailureLabel, RolloutRecord
from tests.eval_fixtures import parts

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def exp() -> ModuleType:
    spec = importlib.util.spec_from_file_location("smollm2_exp", ROOT / "experiments" / "smollm2_sft_grpo.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["smollm2_exp"] = mod
    spec.loader.exec_module(mod)
    return mod


def _headline(completion: float, tasks: int = 40) -> dict[str, Any]:
    return {
        "completion": completion,
        "completion_ci": [completion - 5, completion + 5],
        "score": 20 + 0.8 * completion,
        "score_ci": None,
        "pass_at_k": None,
        "pass_at_k_ci": None,
        "pass_hat_k": None,
        "pass_hat_k_ci": None,
        "safety_violations": 0,
        "safety_violation_rate": 0.0,
        "tasks": tasks,
        "trials": 4 * tasks,
        "infra_failures": 0,
    }


def test_summary_holds_every_set_and_stage_and_judges_the_goals(exp: ModuleType, tmp_path: Path) -> None:
    e = exp.Exp(
        exp.parse(["--work", str(tmp_path), "--results", str(tmp_path / "results"), "--claw-eval", ""])
    )
    steps = [{"step": i, "mean_reward": 0.2 + 0.01 * i} for i in range(9)]
    data = {
        "base_eval": {"sets": {"A": {"headline": _headline(2.0)}, "B": {"headline": _headline(0.0, 11)}}},
        "sft_eval": {"sets": {"A": {"headline": _headline(40.0)}}},
        "grpo_eval": {
            "sets": {"A": {"headline": _headline(43.0)}},
            "alternatives": {"dr_grpo": {"A": {"headline": _headline(46.0)}}},
        },
        "grpo": {"steps": steps},
    }
    s = exp.build_summary(e, data)
    assert set(s["sets"]) == {"A", "B"}
    assert set(s["sets"]["A"]) == {"base", "sft", "grpo", "grpo:dr_grpo"}
    for key in ("completion", "completion_ci", "score", "pass_at_k", "pass_hat_k", "tasks", "trials"):
        assert key in s["sets"]["A"]["sft"]
    g = s["goals"]
    assert g["sft_minus_base_completion_A"] == {"value": 38.0, "goal": 30.0, "met": True}
    assert g["grpo_minus_sft_completion_A"] == {"value": 3.0, "goal": 5.0, "met": False}
    assert g["grpo_reward_rises"]["met"] is True
    assert s["protocol"]["trials"]["greedy"] == 1
    assert s["protocol"]["trials"]["sampled"] == 4
    assert s["protocol"]["rl"]["group"] >= 8
    # evaluations decode greedily; SFT trains on the system prompt the student is served with
    assert s["protocol"]["sampling"]["eval_temperature"] == 0.0
    assert s["protocol"]["sft"]["system_prompt"] == "harness"
    assert "grpo" in exp.results_table(s)


def test_missing_stages_leave_goals_unjudged(exp: ModuleType, tmp_path: Path) -> None:
    e = exp.Exp(
        exp.parse(["--work", str(tmp_path), "--results", str(tmp_path / "results"), "--claw-eval", ""])
    )
    s = exp.build_summary(e, {"base_eval": {"sets": {"A": {"headline": _headline(0.0)}}}})
    assert all(g["met"] is None for g in s["goals"].values())


def test_error_analysis_groups_by_template_and_names_what_failed(exp: ModuleType) -> None:
    def rec(i: int, done: float, *, failed: bool = False, tools: bool = False) -> RolloutRecord:
        return RolloutRecord(
            rollout_id=f"r{i}",
            task_id=f"proc-s1-0000{i % 2}-vendor_bank_change" if i < 4 else "T004_calendar",
            harness="loop",
            trial=i,
            status="infra_failure" if failed else "ok",
            failure=FailureLabel(kind="harness_crash", detail="") if failed else None,
            rewards=None if failed else parts(done, completion=done),
            grade=None
            if failed
            else {"reward": done, "checks": [{"name": "verified_by_phone", "status": "failed"}]},
        )

    out = exp.error_analysis([rec(0, 0.0), rec(1, 1.0), rec(2, 0.0, failed=True), rec(4, 0.5)])
    assert exp.template_of("proc-s1-00012-vendor_bank_change") == "vendor_bank_change"
    v = out["vendor_bank_change"]
    assert v["trials"] == 3
    assert v["completion"] == 50.0
    assert v["no_tool_call"] == 2
    assert v["infra_failures"] == {"harness_crash": 1}
    assert v["top_failed_checks"] == [("verified_by_phone", 2)]
    assert out["T004_calendar"]["completion"] == 50.0


def test_job_heldout_labels_what_trial_zero_did(tmp_path: Path) -> None:
    """experiments/job_heldout.py: prose / malformed / repeats / acts, and completion per task."""
    import json

    spec = importlib.util.spec_from_file_location("job_heldout", ROOT / "experiments" / "job_heldout.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def rec(task: str, trial: int, calls: list[tuple[str, dict[str, Any]]], completion: float) -> Any:
        return {
            "rollout_id": f"{task}-loop-t{trial}-abcd{trial:04d}",
            "task_id": task,
            "trial": trial,
            "n_calls": len(calls) + 1,
            "tool_calls": [{"tool": t, "args": a} for t, a in calls],
            "rewards": {"completion": completion, "safety": 1.0},
            "grade": {"checks": [{"name": "listed", "status": "passed" if completion else "failed"}]},
        }

    listing = ("gmail_list_messages", {"days_back": 7})
    rows = [
        rec("a", 0, [listing, listing], 0.1),
        rec("a", 1, [listing], 0.1),
        rec("b", 0, [], 0.0),
        rec("c", 0, [listing, ("gmail_get_message", {"message_id": "m1"})], 0.25),
        rec("d", 0, [], 0.0),
    ]
    stage = tmp_path / "before"
    (stage / "calls").mkdir(parents=True)
    (stage / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (stage / "calls" / "d-loop-t0-abcd0000.calls.jsonl").write_text(json.dumps({"malformed": True}) + "\n")
    got = mod.stage_report(stage)
    assert {t: v["trial0"]["label"] for t, v in got.items()} == {
        "a": "repeats",
        "b": "prose",
        "c": "acts",
        "d": "malformed",
    }
    assert got["a"]["completion"] == pytest.approx(0.1)
    assert got["a"]["trials"] == 2
    assert got["c"]["checks_passed_by_any_trial"] == ["listed"]
    assert got["b"]["checks_passed_by_any_trial"] == []


def _tasks(values: list[float]) -> list[dict[str, Any]]:
    from coworkenv.eval.metrics import summarize

    recs = [
        RolloutRecord(
            rollout_id=f"t{i}",
            task_id=f"t{i}",
            harness="loop",
            trial=0,
            status="ok",
            rewards=parts(v, completion=v),
            grade={"reward": v, "checks": []},
        )
        for i, v in enumerate(values)
    ]
    return [t.model_dump() for t in summarize(recs, k=1).tasks]


def test_summary_gives_each_stage_delta_a_paired_interval(exp: ModuleType, tmp_path: Path) -> None:
    e = exp.Exp(
        exp.parse(["--work", str(tmp_path), "--results", str(tmp_path / "results"), "--claw-eval", ""])
    )
    base = [0.0, 0.2, 0.4, 0.6, 0.8] * 4
    data = {
        "base_eval": {"sets": {"A": {"headline": _headline(40.0), "tasks": _tasks(base)}}},
        "sft_eval": {"sets": {"A": {"headline": _headline(50.0), "tasks": _tasks([x + 0.1 for x in base])}}},
    }
    s = exp.build_summary(e, data)
    d = s["sets"]["A"]["sft"]["delta_ci"]["base"]
    assert d["delta"] == pytest.approx(10.0)
    assert d["tasks"] == 20
    assert d["ci"][0] > 0  # every task gained: the paired interval excludes 0
    assert s["goals"]["sft_minus_base_paired_ci_excludes_0"]["value"] is True
    # the run's progress went to --results, never into the repository's results
    assert (tmp_path / "results" / "progress.json").exists()


def test_a_kill_resumes_the_stage_and_progress_sums_wall_time(exp: ModuleType, tmp_path: Path) -> None:
    args = ["--work", str(tmp_path), "--results", str(tmp_path / "results"), "--claw-eval", ""]
    e = exp.Exp(exp.parse(args))
    e.run_stage("synth", lambda: {"x": 1})
    assert (tmp_path / "results" / "stages" / "synth.json").exists()
    # a fresh machine: the committed stage JSON comes back, but without its artifacts it runs again
    (tmp_path / "synth.json").unlink()
    e2 = exp.Exp(exp.parse(args))
    assert (tmp_path / "synth.json").exists()
    assert e2.result("synth") is None
    assert e2.progress.state["stretches"] == 2
    assert e2.progress.state["stages"]["synth"]["done"] is True


def test_a_fresh_machine_resumes_sft_from_the_committed_checkpoint(exp: ModuleType, tmp_path: Path) -> None:
    """The cache is gone (another machine): the step's pack under --results comes back as the
    trainer's checkpoint, and a finished LoRA SFT's merged model is rebuilt exactly from it."""
    import json

    import torch

    from coworkenv.models import load_causal_lm
    from coworkenv.rl.common import build_policy, latest_checkpoint, merged_state_dict, save_checkpoint
    from coworkenv.rl.config import ModelConfig

    results = tmp_path / "results"
    args = ["--work", str(tmp_path / "a"), "--results", str(results), "--claw-eval", ""]
    e = exp.Exp(exp.parse(args))
    lora = exp.lora_config(e)
    model, tok = load_causal_lm("smollm2")
    policy, _ = build_policy(ModelConfig.model_validate({"lora": lora}), model=model, tokenizer=tok)
    torch.manual_seed(0)
    with torch.no_grad():  # a trained adapter: B is no longer zero
        for p in policy.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 1e-2)
    trainable = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable)
    for p in trainable:  # one step, so the checkpoint carries Adam's moments
        p.grad = torch.randn_like(p)
    opt.step()
    save_checkpoint(e.path("sft"), 288, policy, opt, {})
    e.path("sft", "metrics.jsonl").write_text('{"step": 288, "loss": 0.1}\n')
    e.pack("sft", exp.SFT_FILES)
    note = e.progress.state["stages"]["sft"]["committed_checkpoint"]
    assert note["written"] is True
    assert note["mb"] <= 25  # rank 8 with its Adam state (in bf16) fits a commit
    assert note["moments"] == "bfloat16"
    # another machine: only the committed files
    e2 = exp.Exp(exp.parse(["--work", str(tmp_path / "b"), *args[2:]]))
    e2.unpack("sft")
    ck = latest_checkpoint(e2.path("sft"))
    assert ck is not None
    assert ck.name == "step-000288"
    assert e2.path("sft", "metrics.jsonl").read_text().startswith('{"step": 288')
    # and once SFT is done there, its merged checkpoint comes back from the pack
    e2.path("sft.json").write_text(json.dumps({"mode": "lora", "lora": lora}))
    assert e2.result("sft") is not None
    rebuilt, _ = load_causal_lm(str(e2.path("sft", "final")))
    want = merged_state_dict(policy)
    got = rebuilt.state_dict()
    assert all(torch.equal(got[k], v) for k, v in want.items())


def test_the_report_reads_committed_stages_on_a_machine_without_their_artifacts(
    exp: ModuleType, tmp_path: Path
) -> None:
    """A fresh machine renders the report from the committed stage JSONs alone (the synth stage's
    task directories are not there): the protocol names the suites, each delta has its paired
    interval, and a stage evaluated greedily only shows no Pass@k."""
    import json

    args = ["--work", str(tmp_path / "work"), "--results", str(tmp_path / "results"), "--claw-eval", ""]
    committed = tmp_path / "results" / "stages"
    committed.mkdir(parents=True)
    base = [0.0, 0.2, 0.4, 0.6, 0.8] * 4
    sampled = {**_headline(40.0, 20), "pass_at_k": 25.0, "pass_hat_k": 5.0, "k": 4}
    stages = {
        "synth": {"train": {"tasks": ["a", "b"]}, "heldout": {"tasks": ["h1"], "templates": ["t1"]}},
        "base_eval": {"sets": {"A": {"headline": sampled, "tasks": _tasks(base), "errors": {}}}},
        "sft_eval": {
            "sets": {
                "A": {
                    "headline": {**_headline(50.0, 20), "k": 1},
                    "tasks": _tasks([x + 0.1 for x in base]),
                    "errors": {},
                }
            }
        },
    }
    stages["posthoc_eval"] = {  # outside the protocol: every policy at another cap on model calls
        "max_turns": 16,
        "policies": {
            "base": {"sets": {"A": {"headline": _headline(0.0, 20), "tasks": _tasks([0.0] * 20)}}},
            "sft": {"sets": {"A": {"headline": _headline(30.0, 20), "tasks": _tasks([0.3] * 20)}}},
        },
    }
    for name, rec in stages.items():
        (committed / f"{name}.json").write_text(json.dumps(rec))
    e = exp.Exp(exp.parse(args))
    assert e.result("synth") is None  # its artifacts are not on this machine: a run would redo it
    assert e.record("synth") == stages["synth"]
    exp.stage_report(e)
    report = (tmp_path / "results" / "report.md").read_text()
    assert "* train: 2 procedural tasks" in report
    assert "| A | sft − base | 10.0 [" in report
    protocol_part, post = report.split("every policy at 16 model calls", 1)
    a_rows = [line for line in protocol_part.splitlines() if line.startswith("| A |")]
    rows = {line.split("|")[2].strip(): line for line in a_rows}
    assert "| 25.0 | 5.0 |" in rows["base"]
    assert "| - | - |" in rows["sft"]
    assert "| A | sft − base | 30.0 [30.0, 30.0] | 20 | yes |" in post
    # each policy against itself under the protocol's cap (paired): what the cap held back
    assert "| A | base | -40.0 [" in post
    assert "| A | sft | -20.0 [" in post
    assert "posthoc_eval" not in e.a.stages  # outside the protocol: only when asked for


def test_reference_ceiling_scores_the_reference_under_each_call_cap(tmp_path: Path) -> None:
    """The reference solution scores 100 uncapped and less when the cap cuts it; the calls it needs
    are counted, and the per-template table is there."""
    import json

    path = ROOT / "experiments" / "reference_ceiling.py"
    spec = importlib.util.spec_from_file_location("ref_ceiling", path)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "ceiling.json"
    args = ["--max-turns", "1,64", "--work", str(tmp_path / "w"), "--out", str(out)]
    mod.main(["M1003_ticket_kb_resolution", *args])
    d = json.loads(out.read_text())
    by_cap = {r["max_turns"]: r for r in d["caps"]}
    assert by_cap[64]["completion"] == 100.0
    assert by_cap[1]["completion"] < 100.0
    assert d["reference_calls"]["tasks_over"] == {"1": 1, "64": 0}
    assert d["reference_calls"]["at_largest_cap"] == 0
    assert set(by_cap[64]["per_template"]) == {"M1003_ticket_kb_resolution"}


def test_a_report_alone_does_not_finish_a_run_with_a_stage_left(exp: ModuleType, tmp_path: Path) -> None:
    args = ["--work", str(tmp_path), "--results", str(tmp_path / "results"), "--claw-eval", ""]
    e = exp.Exp(exp.parse([*args, "--stages", "synth,harness"]))
    e.run_stage("synth", lambda: {"x": 1})
    e.progress.start("harness")  # a stretch started the harness stage and was stopped
    e2 = exp.Exp(exp.parse([*args, "--stages", "report"]))
    e2.run_stage("report", lambda: {"y": 1})
    assert e2.progress.state["status"] == "in progress"
