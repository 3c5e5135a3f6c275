"""Gemini CLI (``@google/gemini-cli``), unmodified, headless (``gemini -p "<task>" --yolo -o json``).

Speaks only the Gemini API (``:streamGenerateContent?alt=sse``, the proxy's ``gemini`` dialect) to
``GOOGLE_GEMINI_BASE_URL`` = the rollout's proxy prefix, with API-key auth. ``-m policy`` names the
model, which also skips the router call "auto" routing makes first. ``~/.gemini/settings.json``
selects API-key auth, turns folder trust, usage statistics, telemetry and auto-update off, caps the
session turns, and adds the task's MCP server (streamable HTTP ``httpUrl``, trusted); its tools are
declared directly as ``mcp_cowork_<tool>``. ``GEMINI_CLI_NO_RELAUNCH`` keeps it in one process.
The final answer is ``response`` of the JSON output; a follow-up turn resumes the session by the
``session_id`` that output holds (``--resume``).
"""

from __future__ import annotations

from typing import Any

from coworkenv.rollout.harnesses.base import HarnessContext
from coworkenv.rollout.harnesses.npm import (
    MCP_SERVER_NAME,
    NpmCliHarness,
    json_lines,
    task_prompt,
    write_json,
)


class GeminiCli(NpmCliHarness):
    name = "gemini"
    package = "@google/gemini-cli"
    pinned = "0.61.0"
    binary_name = "gemini"

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        write_json(
            ctx.home / ".gemini" / "settings.json",
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                "model": {"maxSessionTurns": ctx.max_turns},
                "mcpServers": {MCP_SERVER_NAME: {"httpUrl": ctx.mcp_url, "trust": True}},
            },
        )
        env = {
            "GEMINI_API_KEY": "coworkenv",
            "GOOGLE_GEMINI_BASE_URL": ctx.proxy_url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        return self._args(task_prompt(ctx)), env

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        return [*self._args(reply), "--resume", session]

    @staticmethod
    def _args(prompt: str) -> list[str]:
        return ["-p", prompt, "--yolo", "--skip-trust", "-o", "json", "-m", "policy"]

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        return _response_of(json_lines(stdout)) or _response_of([_whole_json(stdout)])


def _response_of(events: list[Any]) -> str:
    for e in reversed(events):
        if isinstance(e, dict) and isinstance(e.get("response"), str):
            return str(e["response"])
    return ""


def _whole_json(stdout: str) -> Any:
    """``-o json`` prints one (indented) JSON object; None when stdout is not one."""
    import json

    start = stdout.find("{")
    if start < 0:
        return None
    try:
        return json.loads(stdout[start:])
    except json.JSONDecodeError:
        return None
