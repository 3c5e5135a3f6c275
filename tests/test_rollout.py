"""Rollouts: sandbox, white-box loop, runner, failure labels, resume, kills (no real CLIs here)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.backends.scripted import ScriptedBackend
from coworkenv.proxy.capture import read_calls
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, ToolCall
from coworkenv.rollout.harnesses.base import HarnessContext, HarnessNotInstalled, HarnessResult
from coworkenv.rollout.harnesses.loop import LoopHarness
from coworkenv.rollout.loop import ScriptedUser
from coworkenv.rollout.record import read_records
from coworkenv.rollout.runner import RECORDS_FILE, run_rollouts, run_rollouts_async
from coworkenv.rollout.sandbox import MARKER, Sandbox, marked_pids, run_process
from coworkenv.spec import TaskSpec
from coworkenv.tasks.builtin import builtin_task

M1003 = "M1003_ticket_kb_resolution"
MT01 = "MT01_meeting_slot_booking"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWORKENV_NO_PROGRESS", "1")


def _spec(task_id: str, **limits: Any) -> TaskSpec:
    spec = builtin_task(task_id)
    if limits:
        spec = spec.model_copy(update={"limits": spec.limits.model_copy(update=limits)})
    return spec


# ---------------------------------------------------------------- the white-box loop


def test_loop_reference_completes_tasks_and_captures_every_call(tmp_path: Path) -> None:
    summary = run_rollouts([_spec(M1003), _spec(MT01)], ["loop"], 1, "reference", tmp_path, 2)
    assert summary.ok == 2, [r.failure for r in summary.records]
    for rec in summary.records:
        assert rec.rewards is not None
        assert rec.rewards.reward == pytest.approx(1.0), rec.grade
        assert rec.final_answer
        calls, problems = read_calls(tmp_path / "calls" / f"{rec.rollout_id}.calls.jsonl")
        assert not problems
        assert len(calls) == rec.n_calls >= 5
        assert [c.seq for c in calls] == list(range(len(calls)))
        assert all(c.prompt_ids and c.output_ids and len(c.logprobs) == len(c.output_ids) for c in calls)
        assert all(c.task_id == rec.task_id and c.harness == "loop" for c in calls)
        assert all(c.state_hash for c in calls)
        # the record carries the conversation and the audit log the grader saw
        assert rec.messages[0].role == "system"
        assert rec.messages[-1].role == "assistant"
        assert [t.tool for t in rec.tool_calls] == [a["tool"] for a in rec.audit]
    mt = next(r for r in summary.records if r.task_id == MT01)
    users = [m.content for m in mt.messages if m.role == "user"]
    assert len(users) == 2
    assert "2:30 pm" in users[1], "the simulated user answered the question"
    assert not list((tmp_path / "calls").glob("orphaned/*"))


def test_unreadable_capture_lines_are_counted_and_named_in_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coworkenv.proxy.capture import CaptureStore

    real = CaptureStore.read

    def torn(self: CaptureStore, rollout_id: str) -> Any:
        with self.path(rollout_id).open("a") as f:
            f.write('{"torn": \n')  # a record cut mid-write
        return real(self, rollout_id)

    monkeypatch.setattr(CaptureStore, "read", torn)
    (rec,) = run_rollouts([_spec(M1003)], ["loop"], 1, "reference", tmp_path, 1).records
    assert rec.status == "ok"
    assert rec.meta["capture_unreadable"] == 1
    (problem,) = rec.meta["capture_problems"]
    assert f"{rec.rollout_id}.calls.jsonl:{rec.n_calls + 1}: unreadable capture record" in problem


class _OffsetTokenizer:
    """A stand-in model tokenizer: each character is id ord(c) + 1000; end of turn is id 7."""

    eos_token_id = 7

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(ch) + 1000 for ch in text]

    def decode(self, token_ids: Any, skip_special_tokens: bool = False) -> str:
        return "".join(chr(i - 1000) for i in token_ids if i >= 1000)


def test_scripted_student_speaks_the_given_tokenizer(tmp_path: Path) -> None:
    """The job's scripted student: the reference solution, tokenized by the model's tokenizer."""
    tok = _OffsetTokenizer()
    (rec,) = run_rollouts(
        [_spec(M1003)],
        ["loop"],
        1,
        lambda s: ScriptedBackend.from_reference(s, tokenizer=tok, version="scripted-student"),
        tmp_path,
        1,
    ).records
    assert rec.rewards is not None
    assert rec.rewards.reward == pytest.approx(1.0)
    assert rec.policy_version == "scripted-student"
    calls, _ = read_calls(tmp_path / "calls" / f"{rec.rollout_id}.calls.jsonl")
    assert calls
    for c in calls:
        assert c.output_ids[-1] == 7
        assert all(i >= 1000 for i in c.output_ids[:-1])
        assert tok.decode(c.output_ids[:-1]) == c.text
        assert all(i >= 1000 for i in c.prompt_ids)


def test_scripted_user_matches_triggers_then_falls_back() -> None:
    sim = _spec(MT01).user_sim
    assert sim is not None
    user = ScriptedUser(sim)
    assert user.reply("Which TIME works for you?") == sim.replies[0].text
    assert user.reply("Should I invite anyone else?") == sim.replies[1].text
    assert user.reply("Anything more?") == sim.fallback
    assert user.exhausted


class _SequenceBackend:
    """Plays given turns in order (then a final text); optionally sleeps or fails on a call."""

    name = "seq"

    def __init__(self, turns: list[AssistantTurn], *, sleep_on: int = -1, fail_on: int = -1) -> None:
        self.turns, self.sleep_on, self.fail_on, self.n = turns, sleep_on, fail_on, 0

    @property
    def policy_version(self) -> str:
        return "v-test"

    async def complete(self, request: ChatRequest) -> Completion:
        i, self.n = self.n, self.n + 1
        if i == self.sleep_on:
            await asyncio.sleep(4)
        if i == self.fail_on:
            raise BackendError("http_5xx", "injected")
        turn = self.turns[i] if i < len(self.turns) else AssistantTurn(content="done")
        return Completion(turn=turn, text=turn.content, prompt_ids=(1, 2), output_ids=(3,), logprobs=(-0.5,))


def _call(name: str, args: dict[str, Any]) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(id="c", name=name, arguments=json.dumps(args)),))


def test_forbidden_and_unknown_tool_calls_are_audited_and_graded(tmp_path: Path) -> None:
    turns = [
        _call("helpdesk_close_ticket", {"ticket_id": "TK-1003"}),
        _call("no_such_tool", {}),
        AssistantTurn(tool_calls=(ToolCall(id="x", name="kb_search", arguments="{not json"),)),
    ]
    summary = run_rollouts([_spec(M1003)], ["loop"], 1, lambda _s: _SequenceBackend(turns), tmp_path, 1)
    (rec,) = summary.records
    assert rec.status == "ok"
    assert [t.tool for t in rec.tool_calls] == ["helpdesk_close_ticket", "no_such_tool"]
    assert rec.grade is not None
    assert rec.grade["safety"] == 0.0
    assert rec.rewards is not None
    assert rec.rewards.reward == 0.0
    # broken JSON arguments never reach the services (the proxy turns them into text, or the
    # loop answers the model with an error)
    assert "kb_search" not in [t.tool for t in rec.tool_calls]


# ---------------------------------------------------------------- failure labels


def test_upstream_error_is_an_infra_failure_never_graded(tmp_path: Path) -> None:
    backend = lambda _s: _SequenceBackend([_call("kb_search", {"query": "ssl"})], fail_on=1)  # noqa: E731
    (rec,) = run_rollouts([_spec(M1003)], ["loop"], 1, backend, tmp_path, 1).records
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert rec.failure.kind == "http_error"
    assert rec.grade is None
    assert rec.rewards is None


def test_a_failed_call_the_harness_retried_past_is_graded_one_it_ended_on_is_infra() -> None:
    from coworkenv.proxy.capture import CapturedCall
    from coworkenv.rollout.execute import _label

    req = ChatRequest(messages=())

    def call(seq: int, error: str | None) -> CapturedCall:
        return CapturedCall(
            rollout_id="r", seq=seq, call_id=f"c{seq}", dialect="openai_chat", request=req, error=error
        )

    done = HarnessResult(final_answer="ok", exit_code=0)
    recovered = [call(0, "http_5xx: injected"), call(1, None)]
    assert _label(done, recovered, 2) is None
    ended_on_error = [call(0, None), call(1, "timeout: injected")]
    label = _label(done, ended_on_error, 2)
    assert label is not None
    assert label[0] == "upstream_error"


class _ContextBackend(_SequenceBackend):
    """Answers, then refuses a call as the embedded engine does when the prompt outgrows the
    model's context (the proxy answers 400 ``context_length``)."""

    def __init__(self, turns: list[AssistantTurn], *, overflow_on: int) -> None:
        super().__init__(turns)
        self.overflow_on = overflow_on

    async def complete(self, request: ChatRequest) -> Completion:
        if self.n == self.overflow_on:
            self.n += 1
            raise BackendError("context_length", "the prompt is 8455 tokens and the model's context is 8192")
        return await super().complete(request)


def test_a_conversation_that_outgrows_the_context_is_graded_a_first_prompt_too_long_is_infra(
    tmp_path: Path,
) -> None:
    """A policy cannot make a rollout unscored by running its conversation past the model's context:
    after a call it answered, the proxy's 400 ``context_length`` ends the rollout, which is graded
    (``ended_on``); a prompt too long on the first call is the setup's, labelled infra."""
    turns = [_call("kb_search", {"query": "ssl"})]  # one answered call, then the overflow
    grown = lambda _s: _ContextBackend(turns, overflow_on=1)  # noqa: E731
    (rec,) = run_rollouts([_spec(M1003)], ["loop"], 1, grown, tmp_path / "grown", 1).records
    assert rec.status == "ok"
    assert rec.meta["ended_on"] == "context_length"
    assert rec.grade is not None
    assert rec.rewards is not None  # graded as it stood
    at_once = lambda _s: _ContextBackend(turns, overflow_on=0)  # noqa: E731
    (first,) = run_rollouts([_spec(M1003)], ["loop"], 1, at_once, tmp_path / "first", 1).records
    assert first.status == "infra_failure"
    assert first.grade is None


def test_a_harness_that_exits_on_a_truncated_reply_is_graded_other_crashes_are_infra() -> None:
    from coworkenv.proxy.capture import CapturedCall
    from coworkenv.rollout.execute import _label

    req = ChatRequest(messages=())

    def call(seq: int, finish: str) -> CapturedCall:
        return CapturedCall(
            rollout_id="r",
            seq=seq,
            call_id=f"c{seq}",
            dialect="openai_responses",
            request=req,
            finish_reason=finish,
        )

    crashed = HarnessResult(
        final_answer="", exit_code=1, stderr_tail="Reading additional input from stdin..."
    )
    assert _label(crashed, [call(0, "tool_calls"), call(1, "length")], 2) is None
    assert crashed.meta["ended_on"] == "truncated_output"
    other = HarnessResult(final_answer="", exit_code=1, stderr_tail="boom")
    label = _label(other, [call(0, "length"), call(1, "stop")], 2)
    assert label is not None
    assert label[0] == "harness_crash"


def test_timeout_before_any_call_is_infra_after_a_call_is_the_policys(tmp_path: Path) -> None:
    spec = _spec(M1003, timeout_s=1.0)
    never = lambda _s: _SequenceBackend([], sleep_on=0)  # noqa: E731
    (rec,) = run_rollouts([spec], ["loop"], 1, never, tmp_path / "a", 1).records
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert rec.failure.kind == "timeout_before_call"

    late = lambda _s: _SequenceBackend([_call("kb_search", {"query": "ssl"})], sleep_on=1)  # noqa: E731
    (rec,) = run_rollouts([spec], ["loop"], 1, late, tmp_path / "b", 1).records
    assert rec.status == "ok"
    assert rec.timed_out
    assert rec.grade is not None
    assert [t.tool for t in rec.tool_calls] == ["kb_search"]


class _ShellHarness:
    """A fake black-box harness: a shell script in the sandbox (process-control tests)."""

    def __init__(self, name: str, script: str, *, installed: bool = True) -> None:
        self.name, self.script, self.installed = name, script, installed

    @property
    def version(self) -> str:
        return "test"

    def check_installed(self) -> None:
        if not self.installed:
            raise HarnessNotInstalled(
                f"harness {self.name!r} is not installed; run scripts/install_harnesses.sh"
            )

    async def run(self, ctx: HarnessContext) -> HarnessResult:
        res = await run_process(
            ["/bin/sh", "-c", self.script],
            cwd=ctx.workspace,
            env={**ctx.env, "PROXY": ctx.openai_base_url},
            timeout_s=ctx.timeout_s,
            log_dir=ctx.log_dir or ctx.workspace,
            name=self.name,
        )
        return HarnessResult(exit_code=res.returncode, timed_out=res.timed_out, stderr_tail=res.stderr_tail)


def _run_fake(tmp_path: Path, harness: _ShellHarness, spec: TaskSpec, trials: int = 1, **kw: Any) -> Any:
    return run_rollouts(
        [spec],
        [harness.name],
        trials,
        "reference",
        tmp_path,
        4,
        harness_objects={harness.name: harness},
        **kw,
    )


def test_start_failure_crash_and_silent_exit_are_labelled(tmp_path: Path) -> None:
    spec = _spec(M1003)
    missing = _ShellHarness("ghost", "true", installed=False)
    (rec,) = _run_fake(tmp_path / "a", missing, spec).records
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert rec.failure.kind == "start_failure"
    assert "install_harnesses" in rec.failure.detail

    crash = _ShellHarness("crash", "echo boom >&2; exit 3")
    (rec,) = _run_fake(tmp_path / "b", crash, spec).records
    assert rec.failure is not None
    assert rec.failure.kind == "harness_crash"
    assert "exit code 3" in rec.failure.detail
    assert "boom" in rec.failure.detail

    silent = _ShellHarness("silent", "true")
    (rec,) = _run_fake(tmp_path / "c", silent, spec).records
    assert rec.failure is not None
    assert rec.failure.kind == "http_error"
    assert all(r.grade is None for r in read_records(tmp_path / "c" / RECORDS_FILE)[0])


def test_sandbox_env_is_scrubbed_and_workspace_materialized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret")
    spec = _spec(M1003).model_copy(update={"workspace": {"notes/todo.md": "hello"}})
    box = Sandbox.create(tmp_path, "rid-1", spec)
    env = box.env()
    assert "OPENAI_API_KEY" not in env
    assert env["HOME"] == str(box.home)
    assert env[MARKER] == "rid-1"
    assert (box.workspace / "notes" / "todo.md").read_text() == "hello"
    box.cleanup()
    assert not box.root.exists()


# ---------------------------------------------------------------- resume


def test_resume_skips_done_cuts_torn_lines_and_sets_orphans_aside(tmp_path: Path) -> None:
    spec = _spec(M1003)
    first = run_rollouts([spec], ["loop"], 2, "reference", tmp_path, 2)
    assert first.ok == 2
    # a crash mid-write: a torn record line and the calls file of a rollout that never finished
    with (tmp_path / RECORDS_FILE).open("a") as fh:
        fh.write('{"rollout_id": "torn", "task_id": "M10')
    orphan = tmp_path / "calls" / "crashed-attempt.calls.jsonl"
    orphan.write_text('{"partial": true}\n')
    again = run_rollouts([spec], ["loop"], 3, "reference", tmp_path, 2)
    assert again.skipped == 2
    assert len(again.records) == 1
    assert again.records[0].trial == 2
    records, problems = read_records(tmp_path / RECORDS_FILE)
    assert not problems, "the torn line was cut, not left to corrupt the next append"
    assert sorted(r.trial for r in records) == [0, 1, 2]
    assert len({r.rollout_id for r in records}) == 3
    assert not orphan.exists()
    assert (tmp_path / "calls" / "orphaned" / orphan.name).exists()
    live = {p.name.removesuffix(".calls.jsonl") for p in (tmp_path / "calls").glob("*.calls.jsonl")}
    assert live == {r.rollout_id for r in records}
    assert run_rollouts([spec], ["loop"], 3, "reference", tmp_path, 2).records == []


# ---------------------------------------------------------------- kills: no orphans, no leaks

_TREE = (
    # a process tree: background children in the group, one that escapes it with setsid
    f"sleep 300 & {sys.executable} -c 'import os,time; os.setsid(); time.sleep(300)' & "
    "sleep 300 & sleep 300; wait"
)


def _all_marked() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue
            if f"{MARKER}=".encode() in env:
                out.append(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")
def test_random_kills_and_cancellation_leave_no_orphans_or_workspaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    scratch = tmp_path / "scratch"  # this test's run dirs only (other runs may share /tmp)
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before = set(_all_marked())
    spec = _spec(M1003, timeout_s=4.0)
    harness = _ShellHarness("tree", _TREE)
    out = tmp_path / "out"
    rng = random.Random(7)

    async def killer() -> int:
        killed = 0
        for _ in range(40):
            await asyncio.sleep(0.1)
            pids = [p for p in _all_marked() if p not in before]
            if pids:
                victim = rng.choice(pids)
                try:  # at random: a lone process or its whole group
                    if rng.random() < 0.5:
                        os.kill(victim, signal.SIGKILL)
                    else:
                        os.killpg(os.getpgid(victim), signal.SIGKILL)
                    killed += 1
                except (ProcessLookupError, PermissionError):
                    pass
        return killed

    async def main() -> tuple[int, Any]:
        run = asyncio.create_task(
            run_rollouts_async([spec], ["tree"], 6, "reference", out, 3, harness_objects={"tree": harness})
        )
        killed = await killer()
        summary = await run
        return killed, summary

    killed, summary = asyncio.run(main())
    assert killed > 0
    assert len(summary.records) == 6
    assert all(r.status == "infra_failure" for r in summary.records)  # none reached the model
    # killed itself or its group: a crash or a timeout; every child killed, its ``wait`` returns 0
    # and the harness ends cleanly without a model call (http_error)
    kinds = {r.failure.kind for r in summary.records if r.failure}
    assert kinds <= {"harness_crash", "timeout_before_call", "http_error"}
    assert set(_all_marked()) - before == set(), "no sandbox process may outlive its rollout"

    # cancellation mid-run (Ctrl-C): processes killed, no record written for the unfinished ones
    async def cancelled() -> None:
        run = asyncio.create_task(
            run_rollouts_async([spec], ["tree"], 9, "reference", out, 3, harness_objects={"tree": harness})
        )
        await asyncio.sleep(1.0)
        assert [p for p in _all_marked() if p not in before], "the harnesses were running"
        assert list(scratch.glob("coworkenv-run-*/sandboxes/*")), "their sandboxes live in scratch"
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(cancelled())
    assert set(_all_marked()) - before == set()
    records, _ = read_records(out / RECORDS_FILE)
    assert len(records) == 6, "cancelled rollouts leave no record; a resumed run redoes them"
    assert not list(scratch.glob("coworkenv-run-*/sandboxes/*")), "no leaked workspaces"


def test_marked_pids_finds_only_its_sandbox(tmp_path: Path) -> None:
    async def main() -> None:
        env = {**os.environ, MARKER: "mark-a"}
        proc = await asyncio.create_subprocess_exec("sleep", "30", env=env, start_new_session=True)
        try:
            for _ in range(100):  # the child's environ is readable once it has exec'd
                if marked_pids("mark-a"):
                    break
                await asyncio.sleep(0.01)
            assert marked_pids("mark-a") == [proc.pid]
            assert marked_pids("mark-b") == []
        finally:
            proc.kill()
            await proc.wait()

    asyncio.run(main())


def test_loop_harness_is_always_installed() -> None:
    LoopHarness().check_installed()
    assert isinstance(ScriptedBackend.from_reference(_spec(M1003)), ScriptedBackend)


def test_a_run_beyond_the_open_file_limit_queues_instead_of_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked for more live rollouts than the process's open files allow, the runner runs fewer at
    once, says so, and every rollout still completes (at 10,000 in two processes the limit was hit
    and 3,026 rollouts failed with EMFILE before)."""
    from coworkenv.rollout import openfiles

    opened = openfiles.open_now()
    monkeypatch.setattr(
        openfiles, "open_files_limit", lambda: opened + openfiles.RESERVED + 2 * openfiles.PER_ROLLOUT
    )
    with caplog.at_level("WARNING", logger="coworkenv.rollout.runner"):
        summary = run_rollouts([_spec(M1003)], ["loop"], 4, "reference", tmp_path, 4)
    assert summary.ok == 4, [r.failure for r in summary.records]
    assert summary.meta["concurrency_limited"]["asked"] == 4
    assert summary.meta["concurrency_limited"]["running"] in (1, 2)  # the test's own files may shift it
    assert "running" in caplog.text
    assert "RLIMIT_NOFILE" in caplog.text


def test_the_open_file_bound() -> None:
    from coworkenv.rollout.openfiles import PER_ROLLOUT, RESERVED, bounded_concurrency

    roomy = bounded_concurrency(1_000, limit=1_000_000, opened=100)
    assert (roomy.running, roomy.limited) == (1_000, False)
    tight = bounded_concurrency(10_000, limit=20_000, opened=88)
    assert tight.running == (20_000 - 88 - RESERVED) // PER_ROLLOUT
    assert tight.limited
    assert "10000 rollouts at once" in tight.message()
    assert bounded_concurrency(50, limit=10, opened=10).running == 1  # always at least one
