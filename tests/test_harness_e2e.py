"""End to end: each real, unmodified harness CLI completes a built-in task through the proxy.

Driven by the scripted reference backend; the services are reached over MCP (streamable HTTP);
the grader sees the audit events; the capture holds every model call with token ids, and the calls
of every rollout build a valid prefix tree. A harness whose binary is not installed
(scripts/install_harnesses.sh) is skipped outside CI; under ``CI=true`` that skip is a failure
(tests/ci_skips.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from coworkenv.proxy.capture import CapturedCall, read_calls
from coworkenv.rollout.harnesses import HarnessNotInstalled, get_harness
from coworkenv.rollout.record import RolloutRecord
from coworkenv.rollout.runner import RunSummary, run_rollouts
from coworkenv.tasks.builtin import builtin_task
from coworkenv.trajectories.tree import build_tree

TASK = "M1003_ticket_kb_resolution"
NEW = ("gemini", "openclaw", "mini-swe-agent", "openhands")
REAL = ("claude-code", "codex", "qwen", "opencode", *NEW)
CONCURRENCY = 4
TIMEOUT_S = 300  # OpenClaw spends ~10 s starting up per round, minutes on a loaded 2-core machine
# How the task's tools reach a harness: MCP tools under a prefix (``mcp__cowork__x``, ``cowork_x``,
# ...), MCP tools under their own names (OpenHands), or the cowork-tool command in its only tool,
# the shell (mini-swe-agent).
UNPREFIXED = ("openhands",)
SHELL_ONLY = ("mini-swe-agent",)


def _installed() -> list[str]:
    ok = []
    for name in REAL:
        try:
            get_harness(name).check_installed()
            ok.append(name)
        except HarnessNotInstalled:
            pass
    return ok


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path, Path]:
    names = _installed()
    if not names:
        pytest.skip("no real harness installed (run scripts/install_harnesses.sh)")
    out = tmp_path_factory.mktemp("e2e")
    scratch = tmp_path_factory.mktemp("scratch")  # this module's run dirs only (other runs share /tmp)
    mp = pytest.MonkeyPatch()
    mp.setenv("COWORKENV_NO_PROGRESS", "1")
    mp.setattr(tempfile, "tempdir", str(scratch))
    try:
        summary = run_rollouts(
            [builtin_task(TASK)], names, 1, "reference", out, CONCURRENCY, timeout_cap_s=TIMEOUT_S
        )
    finally:
        mp.undo()
    return summary, out, scratch


Run = tuple[RunSummary, Path, Path]


def _record(summary: RunSummary, harness: str) -> RolloutRecord:
    try:
        get_harness(harness).check_installed()
    except HarnessNotInstalled as exc:
        pytest.skip(str(exc))
    (rec,) = [r for r in summary.records if r.harness == harness]
    return rec


@pytest.mark.parametrize("harness", REAL)
def test_real_harness_completes_task_over_mcp(harness: str, run: Run) -> None:
    summary, out, _ = run
    rec = _record(summary, harness)
    assert rec.status == "ok", (rec.failure, rec.meta)
    assert rec.meta.get("exit_code") == 0
    spec = builtin_task(TASK)
    # the services saw every reference step, made through the harness's MCP client
    assert [t.tool for t in rec.tool_calls] == [s.tool for s in spec.reference.steps if hasattr(s, "tool")]
    assert all(t.ok for t in rec.tool_calls)
    assert rec.grade is not None
    assert rec.rewards is not None
    assert rec.rewards.reward == pytest.approx(1.0), rec.grade
    assert "certbot" in rec.final_answer

    calls, problems = read_calls(out / "calls" / f"{rec.rollout_id}.calls.jsonl")
    assert not problems
    assert len(calls) == rec.n_calls >= 6  # 5 tool turns + the final answer
    assert all(not c.error for c in calls)
    assert all(c.prompt_ids and c.output_ids and len(c.logprobs) == len(c.output_ids) for c in calls)
    assert all(c.harness == harness and c.task_id == TASK for c in calls)
    _assert_tools_reached(harness, calls)
    _assert_valid_tree(calls, rec.rollout_id)
    assert rec.messages
    assert rec.messages[-1].role == "assistant"


def _assert_tools_reached(harness: str, calls: list[CapturedCall]) -> None:
    offered = {t.name for t in calls[0].request.tools}
    if harness in SHELL_ONLY:
        assert offered == {"bash"}
        commands = [c.arguments for m in calls[-1].request.messages for c in m.tool_calls]
        assert any("cowork-tool helpdesk_update_ticket" in a for a in commands), commands
        return
    mcp_names = [n for n in offered if n.endswith("helpdesk_update_ticket")]
    assert mcp_names, "the task's tools reached the harness through MCP"
    if harness in UNPREFIXED:
        assert mcp_names == ["helpdesk_update_ticket"]
    else:
        assert "helpdesk_update_ticket" not in mcp_names, "under the harness's prefixed MCP names"


def _assert_valid_tree(calls: list[CapturedCall], rollout_id: str) -> None:
    """Every call is in the tree, and each path from the root spells that call's prompt + output."""
    tree = build_tree(calls, rollout_id)
    assert tree.rejected is None
    assert not tree.skipped, tree.notes
    assert len(tree.calls) == len(calls)
    for node in tree.calls:
        assert node.call is not None
        want = (*node.call.prompt_ids, *node.call.output_ids)
        assert tuple(int(t) for t in tree.tokens(node.index)) == want


def test_trees_and_eval_tables_put_the_harnesses_side_by_side(run: Run) -> None:
    """`coworkenv trees` and `coworkenv eval` over the real traces: a column / row per harness."""
    from coworkenv.eval.metrics import summarize
    from coworkenv.trajectories.report import harness_rows, process_dir

    summary, out, _ = run
    names = {r.harness for r in summary.records}
    rows = {str(r["harness"]): r for r in harness_rows(process_dir(out))}
    assert set(rows) == names
    for name, row in rows.items():
        assert row["infra"] == 0, name
        assert isinstance(row["tok/call"], int)
        assert isinstance(row["tok tree"], int)
        assert row["tok/call"] >= row["tok tree"] > 0, name
    groups = summarize(summary.records, k=1).by_harness
    assert {g.name for g in groups} == names
    assert all(g.pass_at_k == pytest.approx(1.0) for g in groups)


def test_no_sandbox_left_behind(run: Run) -> None:
    summary, _, scratch = run
    assert summary.records, "the harnesses ran"
    assert not list(scratch.glob("coworkenv-run-*/sandboxes/*"))


FAST = ("claude-code", "codex")
MULTI_HARNESSES = (*FAST, *NEW)
MULTI = "MT01_meeting_slot_booking"


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path]:
    names = [n for n in _installed() if n in MULTI_HARNESSES]
    if not names:
        pytest.skip("no multi-turn harness is installed (run scripts/install_harnesses.sh)")
    mp = pytest.MonkeyPatch()
    mp.setenv("COWORKENV_NO_PROGRESS", "1")
    try:
        out = tmp_path_factory.mktemp("e2e-multi")
        summary = run_rollouts(
            [builtin_task(MULTI)], names, 1, "reference", out, CONCURRENCY, timeout_cap_s=TIMEOUT_S
        )
        return summary, out
    finally:
        mp.undo()


@pytest.mark.parametrize("harness", MULTI_HARNESSES)
def test_real_harness_multi_turn_resumes_its_session(
    harness: str, multi_run: tuple[RunSummary, Path]
) -> None:
    summary, out = multi_run
    rec = _record(summary, harness)
    assert rec.status == "ok", (rec.failure, rec.meta)
    assert rec.meta.get("harness_rounds") == 2, "the simulated user's reply went in as a resumed session"
    assert rec.rewards is not None
    assert rec.rewards.reward == pytest.approx(1.0), rec.grade
    users = [m.content for m in rec.messages if m.role == "user"]
    assert any("2:30 pm" in u for u in users)
    calls, problems = read_calls(out / "calls" / f"{rec.rollout_id}.calls.jsonl")
    assert not problems
    assert calls
    _assert_valid_tree(calls, rec.rollout_id)


def test_codex_feature_flags_reach_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex(disable=("shell_tool",)): the real CLI offers no shell tool, still completes the task
    over MCP, and the flags are kept in the rollout meta."""
    from coworkenv.rollout.harnesses.codex import Codex

    codex = Codex(disable=("shell_tool",))
    try:
        codex.check_installed()
    except HarnessNotInstalled as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("COWORKENV_NO_PROGRESS", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "out"
    summary = run_rollouts(
        [builtin_task(TASK)],
        ["codex"],
        1,
        "reference",
        out,
        1,
        timeout_cap_s=120,
        harness_objects={"codex": codex},
    )
    (rec,) = summary.records
    assert rec.status == "ok", (rec.failure, rec.meta)
    assert rec.rewards is not None
    assert rec.rewards.reward == pytest.approx(1.0), rec.grade
    assert rec.meta["codex_disable"] == ["shell_tool"]
    calls, _ = read_calls(out / "calls" / f"{rec.rollout_id}.calls.jsonl")
    offered = {t.name for t in calls[0].request.tools}
    assert "exec_command" not in offered
    assert any(n.endswith("helpdesk_update_ticket") for n in offered)


def test_codex_rejects_a_feature_both_enabled_and_disabled() -> None:
    from coworkenv.rollout.harnesses.codex import Codex

    with pytest.raises(ValueError, match="shell_tool"):
        Codex(disable=("shell_tool",), enable=("shell_tool",))
