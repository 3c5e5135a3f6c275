"""Claude Code (``@anthropic-ai/claude-code``), unmodified, headless (``claude -p``).

Speaks Anthropic Messages (SSE) to ``ANTHROPIC_BASE_URL`` = the rollout's proxy prefix; the
task's tools come from ``--mcp-config`` (streamable HTTP, ``--strict-mcp-config``) and appear as
``mcp__cowork__<tool>``. Side traffic is off (``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, no
title call), tools are not deferred (``ENABLE_TOOL_SEARCH=false``), ``IS_SANDBOX=1`` allows
``--dangerously-skip-permissions`` as root. The final answer is ``result`` of the JSON output.
"""

from __future__ import annotations

from pathlib import Path

from coworkenv.rollout.harnesses.base import HarnessContext
from coworkenv.rollout.harnesses.npm import (
    MCP_SERVER_NAME,
    ResultEventHarness,
    task_prompt,
    write_json,
)


def claude_env(proxy_url: str) -> dict[str, str]:
    """Claude Code's environment against our proxy: no side traffic, telemetry or auto-update, the
    MCP tools declared directly (no tool search), no experimental betas."""
    return {
        "ANTHROPIC_BASE_URL": proxy_url,
        "ANTHROPIC_API_KEY": "sk-ant-coworkenv",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "ENABLE_TOOL_SEARCH": "false",
        "CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1",
        "IS_SANDBOX": "1",
    }


class ClaudeCode(ResultEventHarness):
    name = "claude-code"
    package = "@anthropic-ai/claude-code"
    pinned = "2.1.332"
    binary_name = "claude"

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        mcp = write_json(
            ctx.home / "mcp.json", {"mcpServers": {MCP_SERVER_NAME: {"type": "http", "url": ctx.mcp_url}}}
        )
        return self._args(ctx, task_prompt(ctx), mcp), claude_env(ctx.proxy_url)

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        return [*self._args(ctx, reply, ctx.home / "mcp.json"), "--resume", session]

    def _args(self, ctx: HarnessContext, prompt: str, mcp: Path) -> list[str]:
        return [
            "-p",
            prompt,
            "--output-format",
            "json",
            "--dangerously-skip-permissions",
            "--model",
            "policy",
            "--max-turns",
            str(ctx.max_turns),
            "--mcp-config",
            str(mcp),
            "--strict-mcp-config",
        ]
