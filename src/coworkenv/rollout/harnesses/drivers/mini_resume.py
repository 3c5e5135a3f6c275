"""Continue a mini-swe-agent run with the user's reply, the way its interactive agent takes a new task.

Usage: ``python mini_resume.py TRAJECTORY REPLY CONFIG...``. ``mini`` has no resume flag; its
interactive agent, when the agent submits and the user types a new task, appends the user message
``"The user added a new task: <reply>"`` and keeps going. This does the same from the saved
trajectory: the unmodified library builds the model, environment and agent from the same configs
the ``mini`` command merged (``-c mini.yaml -c <ours>``), the history is the trajectory's messages
without the exit message, plus that user message; the run continues until the next submission and
writes the trajectory back to ``TRAJECTORY``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from minisweagent.agents.interactive import InteractiveAgent
from minisweagent.config import get_config_from_spec
from minisweagent.environments import get_environment
from minisweagent.models import get_model
from minisweagent.utils.serialize import recursive_merge


class ResumedAgent(InteractiveAgent):
    """Starts from ``history`` instead of the system and instance messages."""

    def __init__(self, *args: Any, history: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._history: list[dict[str, Any]] | None = history

    def add_messages(self, *messages: dict[str, Any]) -> list[dict[str, Any]]:
        if self._history is not None and not self.messages:
            history, self._history = self._history, None
            return list(super().add_messages(*history))
        return list(super().add_messages(*messages))


def main(argv: list[str]) -> int:
    trajectory, reply, *specs = argv
    saved = json.loads(Path(trajectory).read_text(encoding="utf-8"))
    history = [m for m in saved.get("messages", []) if m.get("role") != "exit"]
    history.append(
        {
            "role": "user",
            "content": f"The user added a new task: {reply}",
            "extra": {"interrupt_type": "UserNewTask"},
        }
    )
    config = recursive_merge(*(get_config_from_spec(s) for s in specs))
    agent_config = {k: v for k, v in config.get("agent", {}).items() if k != "agent_class"}
    agent_config["output_path"] = Path(trajectory)
    model = get_model(config=config.get("model", {}))
    env = get_environment(config.get("environment", {}), default_type="local")
    agent = ResumedAgent(model, env, history=history, **agent_config)
    agent.run("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
