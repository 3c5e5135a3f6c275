"""The ``loop`` harness: the built-in white-box agent loop (:mod:`coworkenv.rollout.loop`).

Always installed; runs in-process. ``workspace_tools=None`` enables bash/read/write tools only
for tasks with an initial workspace or workspace checks.
"""

from __future__ import annotations

from coworkenv import __version__
from coworkenv.rollout.harnesses.base import HarnessContext, HarnessResult
from coworkenv.rollout.loop import AgentLoop


class LoopHarness:
    name = "loop"

    def __init__(self, *, workspace_tools: bool | None = None, model: str = "policy") -> None:
        self.workspace_tools = workspace_tools
        self.model = model

    @property
    def version(self) -> str:
        return __version__

    def check_installed(self) -> None:
        return None

    async def run(self, ctx: HarnessContext) -> HarnessResult:
        return await AgentLoop(ctx, workspace_tools=self.workspace_tools, model=self.model).run()
