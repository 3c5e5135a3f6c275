"""Every command in the README's shell blocks runs as written (the tour's block excepted).

``test_readme_commands`` checks that what a command names exists; ``test_readme_tour`` executes
the five-minute tour in order. This test executes every *other* shell line of ``README.md`` and
``experiments/README.md``, each in a fresh directory laid out like a clone (the repository's folders
linked in, ``../shared`` beside it), and fails when one exits non-zero. By default a line runs
verbatim. The exceptions are explicit, and each says why:

* ``# needs:`` — the line needs what CI lacks (an API key, a running proxy, another run's output);
  it is not run, and its note is printed.
* :data:`SERVERS` — the line starts a server: it runs until the server answers (an HTTP probe, or an
  MCP ``initialize`` over stdio), then it is stopped.
* :data:`SIZED` — the real run is long (or changes the environment): the same command with a size
  knob runs instead (``--quick``, ``--dry-run``, the documented smoke run).

A new README line is executed unless it is one of these, so a command that stops working fails CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.test_readme_commands import ROOT, all_lines
from tests.test_readme_tour import tour_lines
from tests.test_serve_mcp import MCP_INITIALIZE

LINKED = (
    "src",
    "examples",
    "scripts",
    "benchmarks",
    "experiments",
    "tests",
    "pyproject.toml",
    "README.md",
    ".venv",
)
"""What a fresh clone holds that the lines read (linked, read-only use)."""

SERVERS: dict[str, str] = {
    "coworkenv serve M1003_ticket_kb_resolution --port 8765": "http://127.0.0.1:8765/health",
    "coworkenv mcp M1003_ticket_kb_resolution": "stdio",
    "python -m coworkenv.integrations.openenv M1003_ticket_kb_resolution --port 8000": (
        "http://127.0.0.1:8000/health"
    ),
}
"""Lines that start a server → how to know it is up (an HTTP URL that answers 200, or ``stdio``)."""

SIZED: dict[str, tuple[str, str]] = {
    ".venv/bin/python benchmarks/run_all.py": (
        ".venv/bin/python benchmarks/run_all.py --quick --only synth --out {tmp}",
        "the suite takes 30+ min on a quiet machine: one benchmark, --quick, results to a scratch folder",
    ),
    'pip install -e ".[openenv,inspect,skyrl,verifiers]"': (
        'pip install --dry-run -e ".[openenv,inspect,skyrl,verifiers]"',
        "resolves the extras without changing the test venv (scripts/test.sh installs them)",
    ),
    'pip install -e ".[verifiers]"': (
        'pip install --dry-run -e ".[verifiers]"',
        "verifiers pins mcp==2.0.0: resolved, not installed into the test venv",
    ),
    ".venv/bin/python experiments/smollm2_sft_grpo.py": (
        "",
        "the full protocol is ~15 h on 2 cores: the documented smoke run (the next block) runs instead",
    ),
    "bash scripts/main.sh": (
        "",
        "the main job at full size: tests/test_job.py runs it on examples/job-ci.toml",
    ),
    "bash scripts/test.sh": ("", "what CI itself runs (.ci/run); this test is part of it"),
    "LITELLM_LOCAL_MODEL_COST_MAP=True ~/.cache/coworkenv/harbor-venv/bin/harbor run "
    "-p runs/harbor -a oracle -e docker": (
        "",
        "the library in Docker: tests/test_harbor.py runs Harbor's oracle on packaged tasks",
    ),
    "bash scripts/harbor_library.sh": (
        "",
        "the whole library, oracle and nop, in Docker (a benchmark, 30+ min)",
    ),
    "coworkenv rollout M1003_ticket_kb_resolution --sandbox harbor --harness claude-code "
    "--backend reference": (
        "",
        "tests/test_harbor.py runs a harness inside the Harbor sandbox",
    ),
}
"""Lines run with a size knob → (the command run instead, or "" when another line is its knob; why)."""


FRESH: dict[str, tuple[str, ...]] = {
    ".venv/bin/python experiments/smollm2_sft_grpo.py --run smoke --work /tmp/exp/smoke "
    "--results /tmp/exp/smoke/results --train-tasks 3 --train-composed 2 --heldout 2 "
    "--heldout-composed 1 --sample-trials 2 --determinism-tasks 1 --max-turns 2 --max-new-tokens 16 "
    "--sft-epochs 1 --pilot-steps 1 --sft-max-len 1536 --sft-eval-every 1 --sft-val-share 0.34 "
    "--grpo-steps 2 --grpo-tasks 1 --grpo-group 2 --grpo-eval-every 1 --grpo-eval-tasks 1 "
    "--grpo-max-draws 2 --heldout-b 2 --concurrency 4 "
    "--stages synth,teacher,base_eval,sft_pilot,sft,sft_eval,grpo,grpo_eval,report": ("/tmp/exp/smoke",),
}
"""Lines that resume from what an earlier run left (the experiment's --work) → folders removed first,
so the line runs every stage rather than finding them done."""


def _command(text: str) -> str:
    """The line without its comment, whitespace collapsed (continued lines join with spaces)."""
    return " ".join(text.split(" # ", 1)[0].split())


def block_lines() -> list[tuple[str, int, str]]:
    tour = {_command(t) for t in tour_lines()}
    return [(d, n, t) for d, n, t in all_lines() if not (d == "README.md" and _command(t) in tour)]


LINES = block_lines()


def _clone_dir(tmp: Path) -> Path:
    """``tmp/clone`` laid out like a fresh clone (folders linked) with ``tmp/shared`` beside it."""
    repo = tmp / "clone"
    repo.mkdir()
    for name in LINKED:
        if (ROOT / name).exists():
            (repo / name).symlink_to(ROOT / name)
    shared = ROOT.parent / "shared"
    if shared.exists():
        (tmp / "shared").symlink_to(shared)
    return repo


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["COWORKENV_NO_PROGRESS"] = "1"
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
    return env


def _serve(command: str, probe: str, cwd: Path) -> None:
    """Start the server line, wait until it answers, stop it; fail if it exits or never answers."""
    stdio = probe == "stdio"
    proc = subprocess.Popen(
        command,
        shell=True,
        cwd=cwd,
        env=_env(),
        stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        if stdio:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(json.dumps(MCP_INITIALIZE) + "\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            assert reply.get("id") == 1, reply
            assert "serverInfo" in reply.get("result", {}), reply
            return
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(
                    f"{command}: exited {proc.returncode} before answering\n{out[-2000:]}\n{err[-2000:]}"
                )
            with contextlib.suppress(httpx.HTTPError):  # not listening yet: ask again
                if httpx.get(probe, timeout=2).status_code == 200:
                    return
            time.sleep(0.5)
        pytest.fail(f"{command}: no answer from {probe} in 120 s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=20)  # reaps it and closes its pipes
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


@pytest.mark.parametrize(("doc", "line", "text"), LINES, ids=[f"{d}:{n}" for d, n, _ in LINES])
def test_every_readme_line_runs(doc: str, line: int, text: str, tmp_path: Path) -> None:
    command = _command(text)
    if "# needs:" in text:
        print(f"{doc}:{line}: not run, {text.split('# needs:', 1)[1].strip()}")
        return
    repo = _clone_dir(tmp_path)
    if command in SERVERS:
        _serve(command, SERVERS[command], repo)
        return
    why = ""
    if command in SIZED:
        command, why = SIZED[command]
        command = command.format(tmp=shlex.quote(str(tmp_path / "out")))
        if not command:
            print(f"{doc}:{line}: not run, {why}")
            return
    for stale in FRESH.get(command, ()):  # a line that resumes from its own output starts clean
        shutil.rmtree(stale, ignore_errors=True)
    done = subprocess.run(
        command, shell=True, cwd=repo, env=_env(), capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, (
        f"{doc}:{line}: {command} ({why or 'as written'})\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


def test_every_exception_names_a_line_that_exists() -> None:
    """A stale entry in SERVERS / SIZED would hide nothing but mislead: each must match a line."""
    commands = {_command(t) for _d, _n, t in LINES}
    assert set(SERVERS) <= commands, set(SERVERS) - commands
    assert set(SIZED) <= commands, set(SIZED) - commands
    assert set(FRESH) <= commands, set(FRESH) - commands
    assert any(re.search(r"smollm2_sft_grpo\.py --run smoke", c) for c in commands)


EXAMPLE_HEADERS: dict[str, str] = {
    "coworkenv train sft examples/train/sft.yaml": "the tour runs it with --set run.max_steps=1",
    "coworkenv train rl examples/train/rl.yaml": "the tour runs it with --set run.max_steps=1",
    "coworkenv job --config examples/job.toml": "tests/test_job.py runs the job on examples/job-ci.toml",
}
"""Commands the examples' file headers give ("Run: ...") → which test runs them, at what size."""


def example_header_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every "Run: <command>" in a header comment under ``examples/``."""
    out = []
    for path in sorted((ROOT / "examples").rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".toml"):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            m = re.search(r"Run: (coworkenv [^(]+?)\s*(?:\(|$)", line)
            if m:
                out.append((str(path.relative_to(ROOT)), " ".join(m.group(1).split())))
    return out


def test_every_example_header_command_exists_and_a_test_runs_it() -> None:
    from tests.test_readme_commands import check_line

    found = example_header_commands()
    assert len(found) >= 3
    tour = {_command(t) for t in tour_lines()}
    for path, command in found:
        assert not check_line(command), (path, command, check_line(command))
        assert command in EXAMPLE_HEADERS, f"{path}: `{command}` is run by no test; add it to EXAMPLE_HEADERS"
        if "the tour runs it" in EXAMPLE_HEADERS[command]:
            assert any(t.startswith(command + " --set") for t in tour), command
