"""mini-swe-agent (PyPI ``mini-swe-agent``), unmodified, headless (``mini -y --exit-immediately``).

Speaks non-streaming Chat Completions through litellm (``openai/policy`` at ``api_base`` = proxy
prefix + ``/v1``; ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps litellm off the network, cost tracking
ignores the unknown model). Its only tool is ``bash``, so the task's tools are the ``cowork-tool``
command (:mod:`coworkenv.rollout.harnesses.service_cli`, on PATH, speaking MCP to the trial's
endpoint). Our config overlay (``~/.coworkenv/mini.yaml``, merged over mini's own ``mini.yaml``)
sets the model, yolo mode, no cost limit, the step limit, and an instance template that gives the
task, the date, ``cowork-tool`` and how to finish: ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
followed by the answer, mini's own protocol (a reply without a command is a format error to mini).
The final answer is the trajectory's ``submission`` (``-o``). ``mini`` has no resume flag: a
follow-up turn continues the saved trajectory with our driver (``drivers/mini_resume.py``), the way
mini's interactive agent takes a new task from the user.
"""

from __future__ import annotations

import json
from pathlib import Path

from coworkenv.rollout.harnesses.base import HarnessContext
from coworkenv.rollout.harnesses.npm import write_json
from coworkenv.rollout.harnesses.pyvenv import VenvHarness, driver
from coworkenv.rollout.harnesses.service_cli import SERVICE_CLI, URL_ENV, install_service_cli

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

INSTANCE_TEMPLATE = f"""Please solve this task: {{{{task}}}}

You can execute bash commands. The company's systems are reached only through the `{SERVICE_CLI}`
command: `{SERVICE_CLI} --list` lists the tools with their arguments, and
`{SERVICE_CLI} <tool> '<json arguments>'` calls one and prints its result.

Each response must contain exactly one bash tool call. When you are done, or when you need to ask
the user something, finish with one command that prints `{SUBMIT}` on its first line and your final
answer (or your question) after it, for example:
`echo {SUBMIT} && printf '%s\\n' 'The ticket is resolved.'`
"""


class MiniSweAgent(VenvHarness):
    name = "mini-swe-agent"
    package = "mini-swe-agent"
    pinned = "2.4.6"
    binary_name = "mini"

    def probe(self) -> tuple[list[str], dict[str, str]]:
        return [str(self.binary()), "--help"], {}  # mini has no --version

    def _paths(self, ctx: HarnessContext) -> tuple[Path, Path]:
        return ctx.home / ".coworkenv" / "mini.yaml", ctx.home / ".coworkenv" / "trajectory.json"

    def prepare(self, ctx: HarnessContext) -> tuple[list[str], dict[str, str]]:
        assert ctx.mcp_url is not None
        config, trajectory = self._paths(ctx)
        install_service_cli(ctx.home, str(self.python()))
        write_json(  # JSON is YAML
            config,
            {
                "model": {
                    "model_class": "litellm",
                    "model_name": "openai/policy",
                    "cost_tracking": "ignore_errors",
                    "model_kwargs": {"api_base": ctx.openai_base_url, "api_key": "coworkenv"},
                },
                "agent": {
                    "mode": "yolo",
                    "confirm_exit": False,
                    "cost_limit": 0,
                    "step_limit": ctx.max_turns,
                    "instance_template": INSTANCE_TEMPLATE,
                },
                "environment": {"cwd": str(ctx.workspace), "timeout": 120},
            },
        )
        path = f"{ctx.home / 'bin'}:{ctx.env.get('PATH', '/usr/bin:/bin')}"
        env = {
            "PATH": path,
            URL_ENV: ctx.mcp_url,
            "MSWEA_GLOBAL_CONFIG_DIR": str(ctx.home / ".config" / "mini-swe-agent"),
            "MSWEA_CONFIGURED": "true",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        prompt = f"{ctx.spec.request}\n\n(Today is {ctx.spec.mock_today.isoformat()}.)"
        args = ["-c", "mini.yaml", "-c", str(config), "-y", "--exit-immediately", "-t", prompt]
        return [*args, "-o", str(trajectory)], env

    def session_id(self, stdout: str) -> str | None:
        return "trajectory"  # the saved trajectory is the session (one per sandbox HOME)

    def resume_args(self, ctx: HarnessContext, session: str, reply: str) -> list[str] | None:
        config, trajectory = self._paths(ctx)
        script = driver("mini_resume.py", ctx.home)
        return [str(script), str(trajectory), reply, "mini.yaml", str(config)]

    def command(self, args: list[str], round_: int) -> list[str]:
        return [str(self.binary() if round_ == 0 else self.python()), *args]

    def final_answer(self, stdout: str, ctx: HarnessContext) -> str:
        _, trajectory = self._paths(ctx)
        try:
            info = json.loads(trajectory.read_text(encoding="utf-8")).get("info", {})
        except (OSError, json.JSONDecodeError):
            return ""
        return str(info.get("submission") or "").strip()
