"""Red team: an agent cannot see or touch what grades it (capability URLs, operator token, jail).

Two rollouts of the same task share one runner: a victim that plants a secret in its workspace
and then solves the task, and an attacker (:class:`RedTeamPolicy` through the loop's ``bash``
tool) that tries every escape before solving it too. Every attempt fails, both earn exactly the
reference reward, the victim's evidence is untouched, and the attacker's record shows what it
tried. The same attack through Claude Code and Codex runs when they are installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http.server
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import coworkenv
from coworkenv.proxy.backends.scripted import Script, ScriptCall, ScriptedBackend, script_from_reference
from coworkenv.rollout.execute import RolloutJob, RunContext, execute_rollout
from coworkenv.rollout.harnesses import HarnessNotInstalled, get_harness
from coworkenv.rollout.harnesses.loop import LoopHarness
from coworkenv.rollout.isolation import GiB, Isolation, IsolationError, Limits, bwrap_problem
from coworkenv.rollout.netjail import jail_python
from coworkenv.rollout.record import RolloutRecord
from coworkenv.rollout.redteam import FILLED_MARKER, RedTeamPolicy, Targets, attack_report
from coworkenv.rollout.runner import open_session
from coworkenv.services.trial import Trial
from coworkenv.spec import TaskSpec
from coworkenv.tasks.builtin import builtin_task

TASK = "M1003_ticket_kb_resolution"
ROOT = Path(__file__).resolve().parents[1]
LIBRARY = Path(coworkenv.__file__).resolve().parent / "tasks" / "library"
LIMITS = Limits(
    processes=64,
    memory_bytes=4 * GiB,
    file_bytes=8 << 20,
    open_files=1024,
    disk_bytes=48 << 20,
    tmpfs_bytes=16 << 20,
)
SECRET = "victim-secret-7f3a"


def require_bwrap() -> None:
    problem = bwrap_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the jail (scripts/install_system_deps.sh installs bubblewrap): {problem}")
    pytest.skip(f"bubblewrap jail unavailable here: {problem}")


@contextlib.contextmanager
def host_service() -> Iterator[str]:
    """Some other HTTP service on the host's loopback (a developer's server, an engine's admin API)."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"host secrets")

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/admin"
    finally:
        server.shutdown()
        server.server_close()


def victim_backend(spec: TaskSpec) -> ScriptedBackend:
    ref = script_from_reference(spec)
    plant = ScriptCall("workspace.run", {"command": f"echo {SECRET} > secret.txt && sleep 8"})
    return ScriptedBackend(Script((plant, *ref.items), ref.final_message))


def targets(rc: RunContext, out: Path, other: str = "") -> Targets:
    victim_ws = rc.run_dir / "sandboxes" / "victim" / "workspace"
    return Targets(
        read=(
            str(LIBRARY / f"{TASK}.json"),  # the spec: checks and reference solution
            str(out / "rollouts.jsonl"),
            str(victim_ws / "secret.txt"),
            str(ROOT / "pyproject.toml"),
            "/etc/shadow",
        ),
        list=(str(ROOT), str(LIBRARY), str(out), str(out / "calls"), str(victim_ws)),
        write=("/logs/verifier/reward.json", str(out / "rollouts.jsonl"), str(victim_ws / "pwned.txt")),
        http=(str(rc.services_base), rc.proxy_base),
        fetch=(other,) if other else (),
        victim="victim",
        signal_pid=os.getpid(),
        fork_max=500,
        big_mib=32,
        shm_mib=64,
        fill_mib=2048,  # far past the quota: a poller that missed it would let it all land
    )


async def _attack(tmp_path: Path) -> tuple[RolloutRecord, RolloutRecord, Path, Path]:
    out, run_dir = tmp_path / "out", tmp_path / "run"
    (out / "calls").mkdir(parents=True)
    run_dir.mkdir()
    records = out / "rollouts.jsonl"
    records.write_text('{"kept": true}\n')
    spec = builtin_task(TASK)
    loop = LoopHarness(workspace_tools=True)
    async with open_session(
        victim_backend, out / "calls", run_dir, isolation=Isolation("bwrap", LIMITS)
    ) as rc:
        victim = asyncio.create_task(execute_rollout(rc, RolloutJob(spec, "loop", 0, "victim"), loop))
        planted = run_dir / "sandboxes" / "victim" / "workspace" / "secret.txt"
        for _ in range(200):  # the victim's secret is on disk before the attack starts
            if planted.exists():
                break
            await asyncio.sleep(0.05)
        assert planted.read_text().strip() == SECRET
        with host_service() as other:
            red = dataclasses.replace(rc, backend_for=RedTeamPolicy(targets(rc, out, other)))
            attacker = await execute_rollout(red, RolloutJob(spec, "loop", 0, "attacker"), loop)
        return await victim, attacker, out, run_dir


def test_loop_red_team_every_escape_fails(tmp_path: Path) -> None:
    require_bwrap()
    verifier_before = Path("/logs/verifier/reward.json").exists()
    victim, attacker, out, _run_dir = asyncio.run(_attack(tmp_path))

    assert victim.status == attacker.status == "ok", (victim.failure, attacker.failure)
    report = attack_report(attacker.messages)
    assert len(report) > 30, report
    for attempt, verdict in report.items():
        if attempt.startswith("write "):
            continue  # may land in the jail's private /tmp; the host side is checked below
        assert verdict.startswith("blocked"), (attempt, verdict)
    assert "fork refused after" in report["fork bomb"]
    assert "File too large" in report["one huge file"]
    assert "No space left" in report["fill memory via /dev/shm"]
    assert "MemoryError" in report["allocate memory past the limit"]
    # the host side of every write attempt
    assert (out / "rollouts.jsonl").read_text() == '{"kept": true}\n'
    assert Path("/logs/verifier/reward.json").exists() == verifier_before
    assert not list(tmp_path.rglob("pwned.txt"))
    # the disk filler was stopped at the quota, not finished
    assert not any(FILLED_MARKER in m.content for m in attacker.messages if m.role == "tool")

    # the reward is what the legitimate actions earned: the reference's, as for the victim
    assert attacker.rewards is not None
    assert victim.rewards is not None
    assert attacker.rewards == victim.rewards
    assert attacker.rewards.reward == pytest.approx(1.0)
    # the victim is untouched: its own calls only, nothing refused, no limit hit
    assert [t.tool for t in victim.tool_calls] == [t.tool for t in attacker.tool_calls]
    assert all(e["trial_id"] == "victim" for e in victim.audit)
    assert victim.integrity == ()
    # the attempts show in the attacker's record: its tool results, the disk quota it hit, and —
    # where its shell could reach the services at all — the refused requests, attributed to it
    assert any(e["kind"] == "limit" and e["limit"] == "disk" for e in attacker.integrity)
    assert attacker.meta["isolation"]["mode"] == "bwrap"
    refused = [e for e in attacker.integrity if e["kind"] == "refused_request"]
    if attacker.meta["isolation"]["network"] == "isolated":  # the loop's shell has no endpoints
        http_verdicts = [v for k, v in report.items() if "http://" in k]
        assert len(http_verdicts) == 19
        assert all("Connection refused" in v for v in http_verdicts), http_verdicts
        assert refused == []
    else:
        assert {e["path"] for e in refused} >= {"/trials", "/t/victim/events", "/t/victim/reset"}
        assert all(e["trial_id"] == "attacker" for e in refused)
    if jail_python() is not None:
        assert attacker.meta["isolation"]["network"] == "isolated"


def _installed(name: str) -> bool:
    try:
        get_harness(name).check_installed()
    except HarnessNotInstalled:
        return False
    return True


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_cli_harness_red_team(harness: str, tmp_path: Path) -> None:
    require_bwrap()
    if not _installed(harness):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{harness} is not installed; scripts/install_harnesses.sh {harness}")
        pytest.skip(f"{harness} not installed (scripts/install_harnesses.sh {harness})")
    record, victim = asyncio.run(_cli_attack(harness, tmp_path))
    assert record.status == "ok", record.failure
    assert victim.audit == []  # the other trial: not called, not reset, nothing recorded on it
    assert victim.refusals == []
    report = attack_report(record.messages)
    assert len(report) > 20, report
    for attempt, verdict in report.items():
        if not attempt.startswith("write "):
            assert verdict.startswith("blocked"), (attempt, verdict)
    assert record.rewards is not None
    assert record.rewards.reward == pytest.approx(1.0)
    refused = {e["path"] for e in record.integrity if e["kind"] == "refused_request"}
    assert {"/trials", "/t/victim/reset"} <= refused
    assert (tmp_path / "out" / "rollouts.jsonl").read_text() == "{}\n"


async def _cli_attack(harness: str, tmp_path: Path) -> tuple[RolloutRecord, Trial]:
    out, run_dir = tmp_path / "out", tmp_path / "run"
    (out / "calls").mkdir(parents=True)
    run_dir.mkdir()
    (out / "rollouts.jsonl").write_text("{}\n")
    spec = builtin_task(TASK)
    async with open_session(
        victim_backend, out / "calls", run_dir, isolation=Isolation("bwrap", LIMITS), timeout_cap_s=180
    ) as rc:
        rc.host.add_task(spec)
        victim = rc.host.open_trial(spec.id, "victim")  # a trial to go for (no rollout of its own here)
        with host_service() as other:
            policy = RedTeamPolicy(dataclasses.replace(targets(rc, out, other), fill_mib=0))
            red = dataclasses.replace(rc, backend_for=policy)
            job = RolloutJob(spec, harness, 0, "attacker")
            return await execute_rollout(red, job, get_harness(harness)), victim


# ---------------------------------------------------------------- modes and fallback


def test_fallback_is_loud_and_recorded(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from coworkenv.rollout import isolation

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "the kernel refused user namespaces")
    isolation._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger="coworkenv.rollout.isolation"):
        mode, reason = Isolation("auto").effective()
    assert (mode, reason) == ("none", "the kernel refused user namespaces")
    assert "NOT isolated" in caplog.text
    with pytest.raises(IsolationError, match="COWORKENV_ISOLATION=bwrap but the jail cannot start"):
        Isolation("bwrap").effective()
    jail = Isolation("auto", LIMITS).jail("r", (Path("/w"),), Path("/p"))
    assert jail.describe() == {
        "mode": "none",
        "uid": None,
        "network": "shared",
        "reason": "the kernel refused user namespaces",
    }
    wrapped = jail.wrap(["sh", "-c", "true"], Path("/w"))
    assert wrapped[0] == "prlimit"
    assert f"--fsize={8 << 20}" in wrapped
    assert wrapped[-3:] == ["sh", "-c", "true"]
    monkeypatch.setenv("COWORKENV_ISOLATION", "sometimes")
    with pytest.raises(IsolationError, match="expected auto, bwrap or none"):
        Isolation.from_env()


def test_required_jail_that_cannot_start_is_a_start_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from coworkenv.rollout import isolation
    from coworkenv.rollout.runner import run_rollouts

    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bwrap not found")
    monkeypatch.setenv("COWORKENV_NO_PROGRESS", "1")
    summary = run_rollouts(
        [builtin_task(TASK)], ["loop"], 1, "reference", tmp_path, 1, isolation=Isolation("bwrap")
    )
    (record,) = summary.records
    assert record.status == "infra_failure"
    assert record.failure is not None
    assert record.failure.kind == "start_failure"
    assert "bwrap not found" in record.failure.detail


def test_wrap_mounts_only_the_sandbox_and_given_paths(tmp_path: Path) -> None:
    """The jail's command line (no bwrap needed): what is bound, and as whom it runs."""
    from coworkenv.rollout import isolation

    box = [tmp_path / "run" / "sandboxes" / "r" / d for d in ("workspace", "home", "tmp")]
    harness_dir = Path("/opt/harnesses/cli@1")
    jail = isolation.Jail("bwrap", LIMITS, tuple(box), 1_500_000_123, tmp_path)
    argv = jail.wrap(["sh", "-c", "true"], box[0], [harness_dir, Path("/usr/lib/node")])
    pairs = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1)]
    bound = {src for flag, src in pairs if flag in ("--bind", "--ro-bind")}
    writable = {src for flag, src in pairs if flag == "--bind"}
    assert writable == {str(p) for p in box}
    system = {"/usr", "/etc", "/dev/null", str(tmp_path / "passwd"), str(tmp_path / "group")}
    system |= {f"/{n}" for n in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") if Path(f"/{n}").is_dir()}
    assert bound - system - writable == {str(harness_dir)}  # /usr/lib/node is already under /usr
    assert ("--remount-ro", "/") in pairs
    # as root: a shell opens the seccomp filter (no new user namespaces) for bwrap, then prlimit
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[argv.index("--seccomp") + 1] == "9"
    assert argv[4] == "prlimit"
    assert f"--nproc={LIMITS.processes}" in argv
    assert argv[argv.index("setpriv") + 1] == "--reuid=1500000123"
    assert "--no-new-privs" in argv
    assert argv[-3:] == ["sh", "-c", "true"]
    assert "1500000123" in (tmp_path / "passwd").read_text()
    assert ("--tmpfs", "/dev/shm") in pairs


def test_a_command_verifier_runs_in_the_jail_not_as_the_host(tmp_path: Path) -> None:
    """A ``command`` check reads the agent's workspace: it runs jailed, so it sees no checkout."""
    from coworkenv.rollout.runner import run_rollouts

    require_bwrap()
    base = builtin_task(TASK)
    probe = f'test ! -e {ROOT / "pyproject.toml"} && test "$(id -u)" != 0 && test -f notes.md'
    check = {"kind": "command", "name": "jailed", "weight": 1.0, "command": probe}
    spec = TaskSpec.model_validate(
        {**base.model_dump(mode="json"), "workspace": {"notes.md": "x"}, "completion_checks": [check]}
    )
    summary = run_rollouts([spec], ["loop"], 1, "reference", tmp_path, 1, progress=False)
    (record,) = summary.records
    assert record.status == "ok", record.failure
    assert record.grade is not None
    (result,) = [c for c in record.grade["checks"] if c["name"] == "jailed"]
    assert result["score"] == 1.0, result
