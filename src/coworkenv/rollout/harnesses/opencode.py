"""opencode (``opencode-ai``), unmodified, headless (``opencode run --format json``).

Speaks Chat Completions (SSE) through its bundled ``@ai-sdk/openai-compatible`` provider with
``baseURL`` = proxy prefix + ``/v1``; ``~/.config/opencode/opencode.json`` sets that provider as
model and small model, allows bash/edit without asking, and adds the task's MCP server
(``type: remote``); its tools appear as ``cowork_<tool>``. ``--title`` avoids the title call.
The final answer is the text of the last ``text`` event of the JSON stream.
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


class OpenCode(NpmCliHarness):
    name = "opencode"
    package = "opencode-ai"
    pinned = "1.18.33"
    binary_name = "opencode"

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        write_json(
            ctx.home / ".config" / "opencode" / "opencode.json",
            {
                "$schema": "https://opencode.ai/config.json",
                "provider": {
                    "coworkenv": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "coworkenv",
                        "options": {"baseURL": ctx.openai_base_url, "apiKey": "coworkenv"},
                        "models": {
                            "policy": {
                                "name": "policy",
                                "tool_call": True,
                                "limit": {"context": 1_000_000, "output": 32_000},
                            }
                        },
                    }
                },
                "model": "coworkenv/policy",
                "small_model": "coworkenv/policy",
                "permission": {"bash": "allow", "edit": "allow", "external_directory": "allow"},
                "mcp": {MCP_SERVER_NAME: {"type": "remote", "url": ctx.mcp_url, "enabled": True}},
                "autoupdate": False,
                "share": "disabled",
            },
        )
        env = {
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        }
        return ["run", "--format", "json", "--title", ctx.spec.id, task_prompt(ctx)], env

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        return ["run", "--format", "json", "--session", session, reply]

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        texts = [t for e in json_lines(stdout) if (t := _text_of(e))]
        return texts[-1] if texts else ""


def _text_of(event: Any) -> str:
    if not isinstance(event, dict):
        return ""
    part = event.get("part")
    if event.get("type") == "text" and isinstance(part, dict) and isinstance(part.get("text"), str):
        return str(part["text"])
    return ""
