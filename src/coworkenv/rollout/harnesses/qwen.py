"""Qwen Code (``@qwen-code/qwen-code``), unmodified, headless (``qwen "<task>" --yolo -o json``).

Speaks Chat Completions (SSE) to ``OPENAI_BASE_URL`` = proxy prefix + ``/v1`` (auth type
``openai``). ``~/.qwen/settings.json`` turns telemetry, usage statistics and auto-update off and
adds the task's MCP server (streamable HTTP ``httpUrl``) with ``alwaysLoadTools`` so its tools are
declared directly (``mcp__cowork__<tool>``) instead of hiding behind ``tool_search``. The final
answer is ``result`` of the JSON output.
"""

from __future__ import annotations

from coworkenv.rollout.harnesses.base import HarnessContext
from coworkenv.rollout.harnesses.npm import (
    MCP_SERVER_NAME,
    ResultEventHarness,
    task_prompt,
    write_json,
)


class QwenCode(ResultEventHarness):
    name = "qwen"
    package = "@qwen-code/qwen-code"
    pinned = "0.24.4"
    binary_name = "qwen"

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        write_json(
            ctx.home / ".qwen" / "settings.json",
            {
                "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                "model": {"maxSessionTurns": ctx.max_turns},
                "mcpServers": {
                    MCP_SERVER_NAME: {"httpUrl": ctx.mcp_url, "trust": True, "alwaysLoadTools": True}
                },
            },
        )
        env = {
            "OPENAI_API_KEY": "coworkenv",
            "OPENAI_BASE_URL": ctx.openai_base_url,
            "OPENAI_MODEL": "policy",
        }
        args = [task_prompt(ctx), "--auth-type", "openai", "--yolo", "-o", "json"]
        return args, env

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        return [reply, "--resume", session, "--auth-type", "openai", "--yolo", "-o", "json"]
