"""Agent harnesses: the built-in white-box loop and adapters for real, unmodified CLIs.

``get_harness(name)`` builds one by its command-line name (see :data:`HARNESS_NAMES`, and
:data:`LOAD_HARNESSES` for the load rig's dialect agents).
"""

from __future__ import annotations

from collections.abc import Callable

from coworkenv.errors import CoworkError
from coworkenv.rollout.harnesses.base import (
    Harness,
    HarnessContext,
    HarnessInfraError,
    HarnessNotInstalled,
    HarnessResult,
)


def _factories() -> dict[str, Callable[[], Harness]]:
    from coworkenv.rollout.harnesses.claude_code import ClaudeCode
    from coworkenv.rollout.harnesses.codex import Codex
    from coworkenv.rollout.harnesses.dialect_agent import DialectAgent
    from coworkenv.rollout.harnesses.gemini import GeminiCli
    from coworkenv.rollout.harnesses.loop import LoopHarness
    from coworkenv.rollout.harnesses.mini import MiniSweAgent
    from coworkenv.rollout.harnesses.openclaw import OpenClaw
    from coworkenv.rollout.harnesses.opencode import OpenCode
    from coworkenv.rollout.harnesses.openhands import OpenHandsSdk
    from coworkenv.rollout.harnesses.qwen import QwenCode

    return {
        "loop": LoopHarness,
        "claude-code": ClaudeCode,
        "codex": Codex,
        "qwen": QwenCode,
        "opencode": OpenCode,
        "gemini": GeminiCli,
        "openclaw": OpenClaw,
        "mini-swe-agent": MiniSweAgent,
        "openhands": OpenHandsSdk,
        "agent-chat": lambda: DialectAgent("chat"),
        "agent-responses": lambda: DialectAgent("responses"),
        "agent-messages": lambda: DialectAgent("messages"),
    }


HARNESS_NAMES = (
    "loop",
    "claude-code",
    "codex",
    "qwen",
    "opencode",
    "gemini",
    "openclaw",
    "mini-swe-agent",
    "openhands",
)
LOAD_HARNESSES = ("agent-chat", "agent-responses", "agent-messages")
"""In-process dialect agents for load tests (:mod:`coworkenv.rollout.harnesses.dialect_agent`), not
harnesses a policy is trained through."""


def get_harness(name: str) -> Harness:
    factories = _factories()
    if name not in factories:
        names = ", ".join((*HARNESS_NAMES, *LOAD_HARNESSES))
        raise CoworkError(f"unknown harness {name!r}; choose from {names}")
    return factories[name]()


__all__ = [
    "HARNESS_NAMES",
    "LOAD_HARNESSES",
    "Harness",
    "HarnessContext",
    "HarnessInfraError",
    "HarnessNotInstalled",
    "HarnessResult",
    "get_harness",
]
