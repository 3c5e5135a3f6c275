"""Agent harnesses: the built-in white-box loop and adapters for real, unmodified CLIs.

``get_harness(name)`` builds one by its command-line name (see :data:`HARNESS_NAMES`).
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


def get_harness(name: str) -> Harness:
    factories = _factories()
    if name not in factories:
        raise CoworkError(f"unknown harness {name!r}; choose from {', '.join(HARNESS_NAMES)}")
    return factories[name]()


__all__ = [
    "HARNESS_NAMES",
    "Harness",
    "HarnessContext",
    "HarnessInfraError",
    "HarnessNotInstalled",
    "HarnessResult",
    "get_harness",
]
