"""The four newer harness adapters (Gemini CLI, OpenClaw, mini-swe-agent, OpenHands SDK) without the
real harnesses: what each writes and runs, and bad input — a harness that is missing, crashes,
hangs or speaks a dialect the proxy does not serve is a labelled infra failure carrying its stderr
tail, never a score. Fake installations stand in for the real ones (same layout, a script as the
binary), so this runs anywhere."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from coworkenv.proxy.backends.base import BackendError
from coworkenv.proxy.backends.scripted import SERVICE_CLI as SCRIPTED_SERVICE_CLI
from coworkenv.proxy.backends.scripted import SUBMIT_MARKER, ScriptedBackend
from coworkenv.proxy.messages import ChatRequest, Message, ToolSpec
from coworkenv.rollout.harnesses import HARNESS_NAMES, HarnessNotInstalled, get_harness
from coworkenv.rollout.harnesses.npm import NpmCliHarness, harness_dir
from coworkenv.rollout.harnesses.pyvenv import VenvHarness
from coworkenv.rollout.harnesses.service_cli import SERVICE_CLI
from coworkenv.rollout.record import RolloutRecord
from coworkenv.rollout.runner import run_rollouts
from coworkenv.tasks.builtin import builtin_task

NEW = ("gemini", "openclaw", "mini-swe-agent", "openhands")
TASK = "M1003_ticket_kb_resolution"


def test_all_nine_harnesses_are_registered() -> None:
    # the five harnesses from before this change, then the four it adds, in the CLI's order
    assert ("loop", "claude-code", "codex", "qwen", "opencode", *NEW) == HARNESS_NAMES
    for name in HARNESS_NAMES:
        harness = get_harness(name)
        assert harness.name == name
        assert harness.version
    assert SERVICE_CLI == SCRIPTED_SERVICE_CLI


@pytest.mark.parametrize("name", NEW)
def test_a_missing_harness_names_the_install_command(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COWORKENV_HARNESS_DIR", str(tmp_path))
    with pytest.raises(HarnessNotInstalled, match=r"scripts/install_harnesses\.sh"):
        get_harness(name).check_installed()


def _binary(name: str) -> Path:
    """Where the harness's binary (or venv interpreter) lives under ``$COWORKENV_HARNESS_DIR``."""
    harness = get_harness(name)
    assert hasattr(harness, "binary")
    path: Path = harness.binary()
    return path


def _fake(name: str, root: Path, script: str) -> None:
    """A fake installation of ``name`` under ``root`` whose binary is ``script`` (run by Python)."""
    binary = _binary(name)
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text(f"#!{sys.executable}\n{script}")
    binary.chmod(0o755)
    harness = get_harness(name)
    assert isinstance(harness, NpmCliHarness)
    (harness.install_dir() / ".installed").touch()  # the install script's stamp, written last
    if isinstance(harness, VenvHarness):
        python = harness.python()
        if not python.exists():
            python.symlink_to(sys.executable)
    if name == "openclaw":
        from coworkenv.rollout.harnesses.openclaw import node24_dir

        (node24_dir() / "bin").mkdir(parents=True, exist_ok=True)
        (node24_dir() / "bin" / "node").symlink_to(sys.executable)


def _run(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, **kw: float
) -> RolloutRecord:
    root = tmp_path / "harnesses"
    monkeypatch.setenv("COWORKENV_HARNESS_DIR", str(root))
    monkeypatch.setenv("COWORKENV_NO_PROGRESS", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert harness_dir() == root
    _fake(name, root, script)
    # the fake runs with the host's Python, which the jail must be able to see
    monkeypatch.setenv("COWORKENV_ISOLATION", "none")
    summary = run_rollouts(
        [builtin_task(TASK)], [name], 1, "reference", tmp_path / "out", 1, timeout_cap_s=kw.get("timeout", 30)
    )
    (rec,) = summary.records
    return rec


CRASH = """import sys
sys.stderr.write("starting\\nFATAL: could not load the config\\n")
sys.exit(3)
"""
HANG = """import time
time.sleep(600)
"""
# speaks something the proxy does not serve: a Gemini method we do not implement
FOREIGN = """import os, sys, urllib.request, urllib.error
base = os.environ.get("GOOGLE_GEMINI_BASE_URL") or os.environ.get("OPENAI_BASE_URL", "")
url = base + "/v1beta/models/policy:embedContent"
req = urllib.request.Request(url, b"{}", {"content-type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=10)
except urllib.error.HTTPError as e:
    sys.stderr.write(f"API error {e.code}: {e.read().decode()}\\n")
    sys.exit(1)
"""


@pytest.mark.parametrize("name", NEW)
def test_a_crashing_harness_is_an_infra_failure_with_its_stderr(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _run(name, tmp_path, monkeypatch, CRASH)
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert rec.failure.kind == "harness_crash"
    assert "FATAL: could not load the config" in rec.failure.detail
    assert "FATAL" in rec.meta.get("stderr_tail", "")
    assert rec.rewards is None


def test_a_hanging_harness_is_an_infra_failure_not_a_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _run("openhands", tmp_path, monkeypatch, HANG, timeout=3)
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert rec.failure.kind == "timeout_before_call"
    assert rec.rewards is None


def test_a_harness_speaking_an_unserved_dialect_is_an_infra_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _run("gemini", tmp_path, monkeypatch, FOREIGN)
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert rec.failure.kind == "harness_crash"
    assert "404" in rec.failure.detail
    assert "no endpoint" in rec.failure.detail
    assert rec.n_calls == 0
    assert rec.rewards is None


def test_adapters_write_their_config_into_the_sandbox_home(tmp_path: Path) -> None:
    """prepare() writes only under HOME and points every harness at the rollout's proxy prefix."""
    from coworkenv.rollout.harnesses.base import HarnessContext
    from coworkenv.services.trial import Trial

    spec = builtin_task(TASK)
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    ctx = HarnessContext(
        spec=spec,
        rollout_id="r1",
        trial=Trial.__new__(Trial),
        workspace=ws,
        home=home,
        proxy_url="http://127.0.0.1:9/r/r1/s3cret",
        mcp_url="http://127.0.0.1:9/t/cap/mcp",
        timeout_s=60,
        max_turns=12,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )
    for name in NEW:
        harness = get_harness(name)
        args, env = harness.prepare(ctx)
        text = " ".join(args) + " " + " ".join(env.values())
        for f in home.rglob("*"):
            if f.is_file():
                text += f.read_text(errors="replace")
        assert "/r/r1/s3cret" in text, name
        assert "/t/cap/mcp" in text, name
    assert os.access(home / "bin" / SERVICE_CLI, os.X_OK)


def _request(text: str, *messages: Message) -> ChatRequest:
    bash = ToolSpec(name="bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
    return ChatRequest(messages=(Message(role="user", content=text), *messages), tools=(bash,))


async def test_scripted_policy_reaches_the_services_through_the_shell_when_told_how() -> None:
    backend = ScriptedBackend.from_steps([("helpdesk_get_ticket", {"id": "T-1"})], "All done.")
    with pytest.raises(BackendError, match="matches none"):
        await backend.complete(_request("Fix the ticket."))  # no service tool, no cowork-tool: refused
    first = (await backend.complete(_request(f"Fix it; use `{SERVICE_CLI}`."))).turn
    (call,) = first.tool_calls
    assert call.name == "bash"
    assert json.loads(call.arguments) == {"command": f'{SERVICE_CLI} helpdesk_get_ticket \'{{"id":"T-1"}}\''}
    done = Message(role="tool", tool_call_id=call.id, content="{}")
    final = (
        await backend.complete(
            _request(f"use `{SERVICE_CLI}`", Message(role="assistant", tool_calls=(call,)), done)
        )
    ).turn
    assert (final.content, final.tool_calls) == ("All done.", ())
    submit = f"use `{SERVICE_CLI}`; finish with echo {SUBMIT_MARKER}"
    last = (
        await backend.complete(_request(submit, Message(role="assistant", tool_calls=(call,)), done))
    ).turn
    (echo,) = last.tool_calls
    assert json.loads(echo.arguments)["command"] == f"echo {SUBMIT_MARKER} && printf '%s\\n' 'All done.'"


def test_service_cli_refuses_bad_usage_and_unreachable_endpoints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coworkenv.rollout.harnesses import service_cli

    monkeypatch.delenv(service_cli.URL_ENV, raising=False)
    assert service_cli.main(["--list"]) == 2
    assert "COWORKENV_MCP_URL is not set" in capsys.readouterr().err
    monkeypatch.setenv(service_cli.URL_ENV, "http://127.0.0.1:9/t/x/mcp")
    assert service_cli.main([]) == 2
    assert "usage" in capsys.readouterr().err
    assert service_cli.main(["helpdesk_get_ticket", "{}"]) == 2
    assert "cowork-tool:" in capsys.readouterr().err
    sse = 'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{"ok":true}}\n\n'
    assert service_cli._messages(sse) == [{"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}]
