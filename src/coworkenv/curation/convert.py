"""Converting a rollout's conversation into an SFT example, and dialogue demonstrations.

Contract (:func:`convert`), checks in this order, the first failure names the rejection reason:

* the record's own system messages are replaced by one standardized system message
  (:data:`STANDARD_SYSTEM`, plus the rollout's "Today is <date>." when it had one: tasks are dated),
  or kept as the harness sent them when ``ConvertConfig.system`` is ``None`` (train on the prompt
  the student will be served with: the same harness for teacher and student);
  user, assistant (with structured ``tool_calls``) and tool messages are
  kept in order; empty assistant turns without tool calls are dropped;
* ``no_interaction`` — no user message with text followed by an assistant message;
* ``too_short`` — fewer than ``min_messages`` (5) messages, counting the system message;
* ``too_many_tool_calls`` — more than ``max_tool_calls`` (20) tool calls;
* each tool observation longer than ``max_observation`` (1,000) characters becomes its first 1,000
  characters + ``...[truncated]``;
* ``too_long`` — the total characters (message content plus JSON-serialized tool calls, marker
  included) exceed ``max_chars`` (40,000): the whole example is dropped.

Output messages are OpenAI/TRL-style dicts with every key present (``role``, ``content``,
``tool_calls`` — a list, ``tool_call_id``, ``name``) so JSON loaders infer one schema; tool-call
``arguments`` stay the JSON string the model produced (chat templates accept strings; a dict
would be widened by Arrow to the union of all rows' keys). :func:`dialogue_demos` keeps, for
multi-turn tasks, the highest-scoring trial per task and strips simulator prefixes from user turns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from coworkenv.proxy.messages import Message
from coworkenv.rollout.record import RolloutRecord

STANDARD_SYSTEM = (
    "You are a capable AI coworker. Use the available tools to look up information before acting, "
    "take only the actions the user asked for, and finish with a concise answer."
)
TRUNCATION_MARKER = "...[truncated]"
_TODAY = re.compile(r"Today is \d{4}-\d{2}-\d{2}\.")
SIMULATOR_PREFIXES = (
    r"\[(simulated )?user\]\s*:?\s*",
    r"(simulated )?user\s*:\s*",
    r"\[user simulator\]\s*:?\s*",
    r"<user>\s*",
)
_PREFIX = re.compile(r"^\s*(?:" + "|".join(SIMULATOR_PREFIXES) + ")", re.IGNORECASE)


@dataclass(frozen=True)
class ConvertConfig:
    min_messages: int = 5
    max_tool_calls: int = 20
    max_observation: int = 1000
    max_chars: int = 40_000
    system: str | None = STANDARD_SYSTEM
    """The system message of every example; ``None`` keeps the rollout's own system messages."""


def _msg(role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "tool_calls": extra.get("tool_calls", []),
        "tool_call_id": extra.get("tool_call_id"),
        "name": extra.get("name"),
    }


def _tool_calls(m: Message) -> list[dict[str, Any]]:
    return [
        {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
        for tc in m.tool_calls
    ]


def example_chars(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        total += len(m["content"] or "")
        if m["tool_calls"]:
            total += len(json.dumps(m["tool_calls"], ensure_ascii=False))
    return total


def strip_simulator_prefix(text: str) -> str:
    return _PREFIX.sub("", text, count=1).strip()


def convert(
    messages: tuple[Message, ...], cfg: ConvertConfig | None = None, *, dialogue: bool = False
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(SFT messages, None) or (None, rejection reason)."""
    c = cfg or ConvertConfig()
    if c.system is None:
        out = [_msg("system", m.content) for m in messages if m.role == "system"]
    else:
        # the standardized message keeps the one task fact a system prompt carries: the services' date
        found = (_TODAY.search(x.content) for x in messages if x.role == "system")
        dated = next((hit.group(0) for hit in found if hit), None)
        out = [_msg("system", f"{c.system} {dated}" if dated else c.system)]
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user":
            text = strip_simulator_prefix(m.content) if dialogue else m.content.strip()
            out.append(_msg("user", text))
        elif m.role == "assistant":
            if not m.content.strip() and not m.tool_calls:
                continue
            out.append(_msg("assistant", m.content, tool_calls=_tool_calls(m)))
        else:
            out.append(_msg("tool", m.content, tool_call_id=m.tool_call_id, name=m.name))
    first_user = next((i for i, m in enumerate(out) if m["role"] == "user" and m["content"]), None)
    if first_user is None or not any(m["role"] == "assistant" for m in out[first_user:]):
        return None, "no_interaction"
    if len(out) < c.min_messages:
        return None, "too_short"
    if sum(len(m["tool_calls"]) for m in out) > c.max_tool_calls:
        return None, "too_many_tool_calls"
    for d in out:
        if d["role"] == "tool" and len(d["content"]) > c.max_observation:
            d["content"] = d["content"][: c.max_observation] + TRUNCATION_MARKER
    if example_chars(out) > c.max_chars:
        return None, "too_long"
    return out, None


def is_multi_turn(record: RolloutRecord) -> bool:
    return record.category == "multi_turn" or sum(m.role == "user" for m in record.messages) > 1


def dialogue_demos(records: list[RolloutRecord], score: dict[str, float]) -> list[RolloutRecord]:
    """The highest-scoring trial per multi-turn task (first on ties); ``score`` by rollout id."""
    best: dict[str, RolloutRecord] = {}
    for r in records:
        if r.status != "ok" or not is_multi_turn(r) or r.rollout_id not in score:
            continue
        cur = best.get(r.task_id)
        if cur is None or score[r.rollout_id] > score[cur.rollout_id]:
            best[r.task_id] = r
    return list(best.values())
