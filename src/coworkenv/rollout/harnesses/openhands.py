"""OpenHands Software Agent SDK (PyPI ``openhands-sdk`` + ``openhands-tools``), unmodified, headless.

The SDK is a library, so a small driver of ours (``drivers/openhands_run.py``, copied into the
sandbox HOME) builds the SDK's default CLI agent with an ``LLM`` of model ``openai/policy`` at
``base_url`` = proxy prefix + ``/v1`` (litellm, non-streaming Chat Completions, native tool
calling; ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps litellm off the network) and the task's MCP server
(streamable HTTP) in its ``mcp_config``, then runs one conversation turn in the workspace. Its
own Python >= 3.12 venv. The conversation persists under ``~/.openhands-state``; a follow-up turn
runs the driver again with the conversation id the first one printed. The final answer is
``final`` of the driver's last JSON line (the SDK's ``get_agent_final_response``).
"""

from __future__ import annotations

from coworkenv.rollout.harnesses.base import HarnessContext
from coworkenv.rollout.harnesses.npm import json_lines, task_prompt, write_json
from coworkenv.rollout.harnesses.pyvenv import VenvHarness, driver


class OpenHandsSdk(VenvHarness):
    name = "openhands"
    package = "openhands-sdk"
    pinned = "1.58.2"
    binary_name = "python"

    def probe(self) -> tuple[list[str], dict[str, str]]:
        code = "import importlib.metadata as m, openhands.sdk; print(m.version('openhands-sdk'))"
        return [str(self.binary()), "-c", code], {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        config = write_json(
            ctx.home / ".coworkenv" / "openhands.json",
            {
                "model": "openai/policy",
                "base_url": ctx.openai_base_url,
                "api_key": "coworkenv",
                "workspace": str(ctx.workspace),
                "persistence_dir": str(ctx.home / ".openhands-state"),
                "mcp_url": ctx.mcp_url,
                "max_iterations": ctx.max_turns,
            },
        )
        script = driver("openhands_run.py", ctx.home)
        env = {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENHANDS_SUPPRESS_BANNER": "1",
            "PYTHONUNBUFFERED": "1",
        }
        return [str(script), str(config), task_prompt(ctx)], env

    def _last(self, stdout: str) -> dict[str, object]:
        for event in reversed(json_lines(stdout)):
            if isinstance(event, dict) and "conversation_id" in event:
                return event
        return {}

    def session_id(self, stdout: str) -> str | None:
        cid = self._last(stdout).get("conversation_id")
        return str(cid) if cid else None

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        script = ctx.home / ".coworkenv" / "openhands_run.py"
        return [str(script), str(ctx.home / ".coworkenv" / "openhands.json"), reply, session]

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        final = self._last(stdout).get("final")
        return final if isinstance(final, str) else ""
