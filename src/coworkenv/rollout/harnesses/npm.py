"""Shared machinery of the black-box CLI harnesses installed from npm.

Contract: a :class:`NpmCliHarness` names its pinned npm package, version and binary; the binary
lives at ``$COWORKENV_HARNESS_DIR/<package>@<version>/node_modules/.bin/<bin>`` (default dir
``~/.cache/coworkenv/harnesses``, filled by ``scripts/install_harnesses.sh``).
:meth:`check_installed` raises :class:`HarnessNotInstalled` with the install command.
:meth:`run` writes the harness's config files into the sandbox HOME (:meth:`prepare`), starts the
CLI unmodified with the task as its prompt, in its own process group inside the rollout's jail
(its installation and Node.js read-only, :meth:`runtime_paths`), stdin ``/dev/null``, and a
wall-clock limit (:func:`coworkenv.rollout.sandbox.run_process`), then extracts the final answer
from its stdout (:meth:`final_answer`; empty → the sandbox falls back to the last captured model
reply). Subclasses only describe the CLI (:meth:`prepare` is abstract); :class:`ResultEventHarness`
reads the answer from a final ``{"type": "result"}`` JSON event.

Multi-turn tasks: when the answer asks the user a question (contains ``?``) and the task has a
simulated user, the reply (:class:`ScriptedUser`) is sent by starting the CLI again on the same
session (:meth:`session_id` from its output, :meth:`resume_args`; :meth:`command` builds each
round's argv, the binary by default), until it answers without a question, the user has no turns
left, or the wall clock runs out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coworkenv.rollout.harnesses.base import HarnessContext, HarnessNotInstalled, HarnessResult
from coworkenv.rollout.loop import ScriptedUser
from coworkenv.rollout.sandbox import run_process

_SESSION = re.compile(r'"(?:session_id|sessionID|sessionId|thread_id)"\s*:\s*"([^"]+)"')

INSTALL_HINT = "scripts/install_harnesses.sh"
MCP_SERVER_NAME = "cowork"
"""The MCP server's name in every harness config (tools appear as e.g. ``mcp__cowork__<tool>``)."""


def harness_dir() -> Path:
    return Path(os.environ.get("COWORKENV_HARNESS_DIR") or Path.home() / ".cache" / "coworkenv" / "harnesses")


def task_prompt(ctx: HarnessContext) -> str:
    """The first user message a CLI harness gets: the request plus the date the services use."""
    return (
        f"{ctx.spec.request}\n\n"
        f"(Today is {ctx.spec.mock_today.isoformat()}. Use the `{MCP_SERVER_NAME}` MCP tools for the "
        "company's systems. When you are done, reply with a short final answer.)"
    )


class NpmCliHarness(ABC):
    name = ""
    package = ""
    pinned = ""
    binary_name = ""

    @property
    def version(self) -> str:
        return self.pinned

    def install_dir(self) -> Path:
        return harness_dir() / f"{self.package}@{self.pinned}"

    def binary(self) -> Path:
        return self.install_dir() / "node_modules" / ".bin" / self.binary_name

    def runtime_paths(self) -> list[Path]:
        """What the CLI needs to run, read-only in the jail: its installation and Node.js."""
        paths = [self.install_dir()]
        node = shutil.which("node")
        if node is not None:
            paths.append(Path(os.path.realpath(node)).parent.parent)  # <prefix>/bin/node
        return paths

    def check_installed(self) -> None:
        path = self.binary()
        if not path.exists():
            raise HarnessNotInstalled(
                f"harness {self.name!r} is not installed ({self.package}@{self.pinned} expected at {path}); "
                f"run {INSTALL_HINT} {self.name}"
            )
        if not (self.install_dir() / ".installed").exists():
            raise HarnessNotInstalled(
                f"harness {self.name!r} is installed incompletely at {self.install_dir()} (no .installed "
                f"stamp: an interrupted or older install); run {INSTALL_HINT} {self.name}"
            )

    def probe(self) -> tuple[list[str], dict[str, str]]:
        """(argv, extra env) of a run that only proves the CLI starts: prints its version (what
        ``tests/test_harness_install.py`` runs inside a jail against a fresh install)."""
        return [str(self.binary()), "--version"], {}

    # -- to describe the CLI

    @abstractmethod
    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        """Write config files into the sandbox; return (argv after the binary, extra env)."""

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        return ""

    def session_id(self, stdout: str) -> str | None:
        found = _SESSION.search(stdout)
        return found.group(1) if found else None

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        """Arguments that send ``reply`` as the next user turn of ``session`` (None: unsupported)."""
        return None

    def command(self, args: list[str], round_: int) -> list[str]:
        """The argv of round ``round_`` (0: the task, then one per resumed user turn)."""
        return [str(self.binary()), *args]

    def settings(self) -> dict[str, Any]:
        """Non-default adapter settings, kept in every rollout's meta (empty by default)."""
        return {}

    # -- running

    async def run(self, ctx: HarnessContext) -> HarnessResult:
        self.check_installed()
        if ctx.mcp_url is None:
            raise HarnessNotInstalled(f"harness {self.name!r} needs the services' MCP endpoint (none served)")
        args, extra = self.prepare(ctx)
        env = {**ctx.env, **extra}
        logs = ctx.log_dir or ctx.home.parent / "logs"
        user = ScriptedUser(ctx.spec.user_sim) if ctx.spec.user_sim else None
        rounds = 0
        while True:
            res = await run_process(
                self.command(args, rounds),
                cwd=ctx.workspace,
                env=env,
                timeout_s=max(0.1, ctx.wall_left()),
                log_dir=logs,
                name=f"{self.name}-{rounds}" if rounds else self.name,
                jail=ctx.jail,
                ro_paths=self.runtime_paths(),
                endpoints=[ctx.proxy_url, ctx.mcp_url],
            )
            rounds += 1
            answer = "" if res.timed_out else self.final_answer(res.stdout, ctx)
            if res.timed_out or res.returncode != 0 or user is None or user.exhausted or "?" not in answer:
                break
            session = self.session_id(res.stdout)
            nxt = self.resume_args(ctx, session, user.reply(answer)) if session else None
            if nxt is None:
                break
            args = nxt
        return HarnessResult(
            final_answer=answer,
            exit_code=res.returncode,
            timed_out=res.timed_out,
            stderr_tail=res.stderr_tail,
            meta={"harness_wall_s": round(res.wall_s, 3), "harness_rounds": rounds, **self.settings()},
        )


class ResultEventHarness(NpmCliHarness):
    """A CLI whose JSON output ends with a ``{"type": "result"}`` event holding the final answer
    (Claude Code, Qwen Code)."""

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        return last_result_text(json_lines(stdout))


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def json_lines(stdout: str) -> list[Any]:
    """Every line of ``stdout`` that parses as JSON (CLIs print JSONL event streams)."""
    out: list[Any] = []
    for raw in stdout.splitlines():
        line = raw.strip()
        if line.startswith(("{", "[")):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def last_result_text(events: Sequence[Any]) -> str:
    """The ``result`` string of the last ``{"type": "result"}`` event (Claude/Qwen JSON output)."""
    flat: list[Any] = []
    for e in events:
        flat.extend(e if isinstance(e, list) else [e])
    for e in reversed(flat):
        if isinstance(e, dict) and e.get("type") == "result" and isinstance(e.get("result"), str):
            return str(e["result"])
    return ""
