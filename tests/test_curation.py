"""Curation: task grouping, dedup, replacement, TRIVIAL sampling, thresholds, conversion, export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coworkenv.cli import main
from coworkenv.curation.convert import TRUNCATION_MARKER, convert, strip_simulator_prefix
from coworkenv.curation.export import curate
from coworkenv.curation.select import SelectConfig, label_for, read_score, select, task_prefix
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.record import RewardParts, RolloutRecord


def conv(n_tools: int = 2, obs: str = "ok", user: str = "Please do the task.") -> tuple[Message, ...]:
    msgs = [Message(role="system", content="harness system"), Message(role="user", content=user)]
    for k in range(n_tools):
        tc = ToolCall(id=f"c{k}", name="helpdesk_get_ticket", arguments=json.dumps({"ticket_id": f"TK-{k}"}))
        msgs.append(Message(role="assistant", content="", tool_calls=(tc,)))
        msgs.append(Message(role="tool", content=obs, tool_call_id=f"c{k}"))
    msgs.append(Message(role="assistant", content="All done."))
    return tuple(msgs)


def rec(
    task: str,
    trial: int,
    score: float | None,
    *,
    reward: float | None = None,
    messages: tuple[Message, ...] | None = None,
    grade: dict[str, Any] | None = None,
    category: str = "",
    rid: str | None = None,
) -> RolloutRecord:
    ok = score is not None or grade is not None
    r = score if reward is None else reward
    return RolloutRecord(
        rollout_id=rid or f"{task}-{trial}",
        task_id=task,
        harness="loop",
        trial=trial,
        category=category,
        status="ok" if ok else "infra_failure",
        grade=grade if grade is not None else ({"completion": score, "reward": r} if ok else None),
        rewards=RewardParts(reward=r or 0.0, completion=score or 0.0, safety=1, robustness=1) if ok else None,
        messages=messages if messages is not None else conv(),
    )


def test_labels_and_the_all_08_task_is_keep() -> None:
    cfg = SelectConfig()
    sel = select([[rec("A_x", t, 0.8) for t in range(3)]], cfg)
    assert sel.labels["A_x"] == "KEEP"
    assert label_for(0.95, cfg) == "TRIVIAL"
    assert label_for(0.1, cfg) == "UNSOLVABLE"
    assert label_for(0.2, cfg) == "KEEP"
    assert label_for(None, cfg) == "UNREADABLE"


def test_score_prefers_completion_then_reward_and_skips_unparseable() -> None:
    assert read_score(rec("A", 0, None, grade={"completion": 0.4, "reward": 0.9})) == 0.4
    r = RolloutRecord(rollout_id="x", task_id="A", harness="h", trial=0, status="ok", grade={"reward": 0.7})
    assert read_score(r) == 0.7
    assert read_score(rec("A", 0, None, grade={"completion": "n/a", "reward": 0.9})) is None
    assert read_score(rec("A", 0, None, grade={"completion": float("nan")})) is None
    infra = RolloutRecord(rollout_id="y", task_id="A", harness="h", trial=1, status="infra_failure")
    assert read_score(infra) is None
    # an unreadable trial is excluded from the mean, not counted as 0
    sel = select(
        [[rec("A_t", 0, 0.6), rec("A_t", 1, None, grade={"completion": "bad", "reward": 0.1})]],
        SelectConfig(),
    )
    assert sel.means["A_t"] == 0.6


def test_dedup_first_copy_and_replacement_supersedes() -> None:
    first = [rec("K_a", 0, 0.6, rid="one"), rec("K_a", 0, 0.7, rid="dup"), rec("K_b", 0, 0.5)]
    replacement = [rec("K_b", 1, 0.55, rid="new")]
    sel = select([first, replacement], SelectConfig(), [False, True])
    ids = [r.rollout_id for r in sel.selected]
    assert ids == ["one", "new"]
    assert sel.dropped["duplicate_trial"] == 1
    assert sel.dropped["superseded_by_replacement"] == 1


def test_trivial_keeps_one_per_prefix_and_thresholds_apply() -> None:
    records = [
        rec("suite/T5_easy", 0, 1.0),
        rec("suite/T5_easy", 1, 1.0),
        rec("T5_easy_variant", 0, 0.95),
        rec("M1_mid", 0, 0.6),
        rec("M1_mid", 1, 0.4),  # below the mixed 0.5 threshold
        rec("U1_hard", 0, 0.0),
    ]
    sel = select([records], SelectConfig())
    assert [r.rollout_id for r in sel.selected] == ["suite/T5_easy-0", "M1_mid-0"]
    assert sel.dropped == {"trivial_prefix_taken": 2, "below_reward_threshold": 1, "task_unsolvable": 1}
    assert task_prefix("suite/T5_easy") == "T5"
    strict = select([records], SelectConfig(profile="extraction"))
    assert [r.rollout_id for r in strict.selected] == ["suite/T5_easy-0"]
    assert select([records], SelectConfig(min_reward=0.3)).dropped["below_reward_threshold"] == 0
    with pytest.raises(ValueError, match="unknown export profile"):
        select([records], SelectConfig(profile="nope"))


def test_conversion_rules() -> None:
    out, why = convert(conv(2))
    assert why is None
    assert out is not None
    assert out[0]["role"] == "system"
    assert out[0]["content"] != "harness system"
    assert out[2]["tool_calls"][0]["function"] == {
        "name": "helpdesk_get_ticket",
        "arguments": '{"ticket_id": "TK-0"}',
    }
    assert (
        convert((Message(role="system", content="s"), Message(role="assistant", content="hi")))[1]
        == "no_interaction"
    )
    assert convert(conv(0))[1] == "too_short"  # system, user, assistant
    assert convert(conv(21))[1] == "too_many_tool_calls"
    assert convert(conv(20))[1] is None
    long_obs, _ = convert(conv(2, obs="z" * 5000))
    assert long_obs is not None
    assert long_obs[3]["content"] == "z" * 1000 + TRUNCATION_MARKER
    assert convert(conv(20, obs="z" * 1999))[1] is None  # 20 x 1,014 chars after truncation
    assert convert(conv(2, user="u" * 40_001))[1] == "too_long"


def test_simulator_prefixes_are_stripped() -> None:
    assert strip_simulator_prefix("[User]: I need Tuesday.") == "I need Tuesday."
    assert strip_simulator_prefix("Simulated user: yes") == "yes"
    assert strip_simulator_prefix("User asked twice") == "User asked twice"


def write_collection(root: Path, records: list[RolloutRecord]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "rollouts.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records) + "{torn\n")
    return root


def test_curate_export_loads_with_datasets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mt = (
        Message(role="user", content="Book a meeting."),
        Message(role="assistant", content="Which day?"),
        Message(role="user", content="[User]: Tuesday."),
        *conv(2)[2:],
    )
    records = [
        rec("M1_a", 0, 0.7),
        rec("M1_a", 1, 0.6, messages=conv(25)),  # too many tool calls
        rec("M2_b", 0, 0.5, messages=conv(0)),  # too short
        rec("MT01_x", 0, 0.6, messages=mt, category="multi_turn"),
        rec("MT01_x", 1, 0.7, messages=mt, category="multi_turn"),
    ]
    root = write_collection(tmp_path / "c1", records)
    rep = curate([root], mode="both")
    stats = rep.stats()
    assert stats["conversion_rejected"] == {"too_many_tool_calls": 1, "too_short": 1}
    assert stats["unreadable_lines"] == 1
    assert stats["dialogue_examples"] == 1
    dialogue = [r for r in rep.rows if r["source"] == "dialogue"]
    assert dialogue[0]["trial"] == 1
    assert "Tuesday." in [m["content"] for m in dialogue[0]["messages"]]
    out = tmp_path / "sft.jsonl"
    main(["curate", str(root), "--export", str(out), "--mode", "both"])
    assert json.loads(out.with_suffix(".stats.json").read_text())["exported"] == len(rep.rows)
    capsys.readouterr()

    from datasets import load_dataset

    ds = load_dataset("json", data_files=str(out), split="train")
    assert set(ds.column_names) >= {"messages", "tools"}
    row = ds[0]
    assert row["messages"][0]["role"] == "system"
    tools = json.loads(row["tools"])
    assert tools[0]["function"]["name"] == "helpdesk_get_ticket"
    assert tools[0]["function"]["parameters"]["type"] == "object"


def test_curate_says_in_one_line_what_it_kept_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Perfect teacher rollouts of one task family are TRIVIAL: one is kept, and the line says why
    and how to keep them all."""
    records = [rec(f"M7_v{i}", 0, 1.0) for i in range(3)]
    root = write_collection(tmp_path / "c", records)
    main(["curate", str(root), "--export", str(tmp_path / "a.jsonl")])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "conversations exported" in x)
    assert "3 TRIVIAL" in line
    assert "1 selected" in line
    assert "2 trivial prefix taken" in line
    assert "--trivial-above 1" in out
    main(["curate", str(root), "--export", str(tmp_path / "b.jsonl"), "--trivial-above", "1"])
    out = capsys.readouterr().out
    assert "3 KEEP" in out
    assert "3 selected" in out


def test_curate_cli_errors(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["curate", str(tmp_path)])
    assert e.value.code == 2
    root = write_collection(tmp_path / "c", [rec("A_a", 0, 0.5)])
    with pytest.raises(SystemExit) as e:
        main(["curate", str(root), "--profile", "bogus"])
    assert e.value.code == 2


def test_standard_system_message_keeps_the_tasks_date() -> None:
    from coworkenv.curation.convert import STANDARD_SYSTEM, convert
    from coworkenv.proxy.messages import Message, ToolCall

    msgs = (
        Message(role="system", content="You are an agent. Today is 2026-03-04. Be careful."),
        Message(role="user", content="Close ticket T-1."),
        Message(role="assistant", tool_calls=(ToolCall(id="c0", name="helpdesk_close", arguments="{}"),)),
        Message(role="tool", content="ok", tool_call_id="c0"),
        Message(role="assistant", content="Closed T-1."),
    )
    out, why = convert(msgs)
    assert why is None
    assert out is not None
    assert out[0]["content"] == f"{STANDARD_SYSTEM} Today is 2026-03-04."
    undated, _ = convert((Message(role="system", content="plain"), *msgs[1:]))
    assert undated is not None
    assert undated[0]["content"] == STANDARD_SYSTEM


def test_keep_system_trains_on_the_harness_prompt() -> None:
    """``ConvertConfig(system=None)``: the rollout's own system prompt, verbatim (no standard one)."""
    from coworkenv.curation.convert import ConvertConfig, convert
    from coworkenv.proxy.messages import Message, ToolCall

    harness = "You are an AI coworker with access to your company's work tools. Today is 2026-03-04."
    msgs = (
        Message(role="system", content=harness),
        Message(role="user", content="Close ticket T-1."),
        Message(role="assistant", tool_calls=(ToolCall(id="c0", name="helpdesk_close", arguments="{}"),)),
        Message(role="tool", content="ok", tool_call_id="c0"),
        Message(role="assistant", content="Closed T-1."),
    )
    out, why = convert(msgs, ConvertConfig(system=None))
    assert why is None
    assert out is not None
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant"]
    assert out[0]["content"] == harness
