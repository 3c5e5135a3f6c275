"""Codex CLI (``@openai/codex``), unmodified, headless (``codex exec``).

Speaks only the OpenAI Responses API (SSE): ``$CODEX_HOME/config.toml`` defines a provider with
``base_url`` = proxy prefix + ``/v1`` and ``wire_api = "responses"``, no retries, analytics off,
and the task's MCP server (streamable HTTP ``url``); tools arrive as the namespace
``mcp__cowork``. Optional features (goals, multi-agent, plugins, apps, image generation, web
search) are disabled. The final answer is the file written by ``--output-last-message``.

``Codex(disable=..., enable=...)`` toggles further feature flags (``codex features list``), e.g.
``disable=("shell_tool",)`` for service-only tasks where the agent should work through MCP alone,
which also shortens the prompt by ~1.5k tokens; the flags are recorded in the rollout meta.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from coworkenv.rollout.harnesses.base import HarnessContext
from coworkenv.rollout.harnesses.npm import MCP_SERVER_NAME, NpmCliHarness, task_prompt

DISABLED_FEATURES = ("goals", "multi_agent", "plugins", "apps", "image_generation")


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


class Codex(NpmCliHarness):
    name = "codex"
    package = "@openai/codex"
    pinned = "0.171.0"
    binary_name = "codex"

    def __init__(self, *, disable: Sequence[str] = (), enable: Sequence[str] = ()) -> None:
        clash = sorted(set(disable) & set(enable))
        if clash:
            raise ValueError(f"codex feature(s) {clash} both enabled and disabled; keep one")
        self.disable = tuple(disable)
        self.enable = tuple(enable)

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        codex_home = ctx.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        config = "\n".join(
            [
                'model = "policy"',
                'model_provider = "coworkenv"',
                'approval_policy = "never"',
                'sandbox_mode = "danger-full-access"',
                "check_for_update_on_startup = false",
                "",
                "[model_providers.coworkenv]",
                'name = "coworkenv"',
                f"base_url = {_toml_str(ctx.openai_base_url)}",
                'env_key = "COWORKENV_API_KEY"',
                'wire_api = "responses"',
                "request_max_retries = 0",
                "stream_max_retries = 0",
                "",
                "[analytics]",
                "enabled = false",
                "",
                f"[mcp_servers.{MCP_SERVER_NAME}]",
                f"url = {_toml_str(ctx.mcp_url)}",
                "",
            ]
        )
        (codex_home / "config.toml").write_text(config, encoding="utf-8")
        args = [*self._exec(ctx), task_prompt(ctx)]
        return args, {"CODEX_HOME": str(codex_home), "COWORKENV_API_KEY": "coworkenv"}

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.disable:
            out["codex_disable"] = list(self.disable)
        if self.enable:
            out["codex_enable"] = list(self.enable)
        return out

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        return [*self._exec(ctx), "resume", session, reply]

    def _exec(self, ctx: HarnessContext) -> list[str]:
        last = ctx.home / "codex-last-message.txt"
        args = ["exec", "--skip-git-repo-check", "--json", "--output-last-message", str(last)]
        for feature in (*DISABLED_FEATURES, *self.disable):
            args += ["--disable", feature]
        for feature in self.enable:
            args += ["--enable", feature]
        return [*args, "-c", "web_search=disabled"]

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        last = ctx.home / "codex-last-message.txt"
        return last.read_text(encoding="utf-8").strip() if last.is_file() else ""
