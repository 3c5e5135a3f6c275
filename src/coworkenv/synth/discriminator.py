"""Generator–Discriminator for safety slots (CoworkEnv, "A Constructed Safety Workflow").

Two roles in separate contexts. The *generator* drafts the request and the initial records (plus
the safety note, the evidence ids and the distractor ids). The *discriminator* receives only the
task id, the service ids, the records and the safety note — never the request — and returns the
completion checks, the forbidden tools and the read-only investigation (reference) that satisfies
them. :func:`assemble` inserts both into one TaskSpec JSON text, which then goes through the same
validation as any candidate.

Repair routes the diagnostics to the role that owns the failing part: parse/records/leakage
problems go to the generator (and the discriminator re-runs on the new records); conflict,
weights, gate, replay and mutation problems go to the discriminator, whose draft is revised in its
own context.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from coworkenv.synth.base import Diagnostic, Slot
from coworkenv.synth.prompts import (
    ChatMessage,
    discriminator_messages,
    feedback_text,
    safety_generator_messages,
)

Chat = Callable[[Sequence[ChatMessage]], str]
"""One chat call: messages → reply text."""

GENERATOR_STAGES = frozenset({"json_parse", "services", "leakage"})


def _strip(text: str) -> str:
    from coworkenv.synth.llm import extract_json

    return extract_json(text)


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def assemble(slot: Slot, draft: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """The TaskSpec data of a safety slot from the generator's draft and the discriminator's verdict."""
    from coworkenv.services.registry import SERVICES

    services = draft.get("services") or {}
    tools = draft.get("tools") or sorted(
        t for name in services if name in SERVICES for t in SERVICES[name].tool_table
    )
    return {
        "id": slot.task_id,
        "name": draft.get("name") or slot.task_id,
        "category": slot.category,
        "difficulty": slot.difficulty,
        "language": slot.language,
        "mock_today": slot.mock_today.isoformat(),
        "tags": ["safety", "synth"],
        "request": draft.get("request", ""),
        "services": services,
        "tools": tools,
        "completion_checks": verdict.get("completion_checks", []),
        "forbidden": verdict.get("forbidden", []),
        "reference": verdict.get("reference", {}),
        "answer_ids": draft.get("answer_ids", []),
        "distractor_ids": draft.get("distractor_ids", []),
        "safety_note": draft.get("safety_note", ""),
        "source": "synth:generator-discriminator",
    }


@dataclass
class _State:
    draft_msgs: list[ChatMessage]
    draft_text: str
    verdict_msgs: list[ChatMessage] | None = None
    verdict_text: str | None = None


def _revise(messages: list[ChatMessage], previous: str, feedback: Sequence[Diagnostic]) -> list[ChatMessage]:
    return [
        *messages,
        {"role": "assistant", "content": previous},
        {
            "role": "user",
            "content": "The assembled task was rejected:\n"
            + feedback_text(feedback)
            + "\n\nReply with your full revised JSON object (complete, not a patch). JSON only.",
        },
    ]


class GeneratorDiscriminator:
    """A :class:`~coworkenv.synth.base.Generator` for safety slots built from two chat roles."""

    name = "generator-discriminator"

    def __init__(self, generate: Chat, discriminate: Chat | None = None) -> None:
        self.generate = generate
        self.discriminate = discriminate or generate
        self._state: dict[str, _State] = {}
        self.discriminator_prompts: list[list[ChatMessage]] = []
        """Every prompt the discriminator received (for inspection and tests)."""

    def draft(self, slot: Slot, feedback: Sequence[Diagnostic] = (), *, attempt: int = 0) -> str:
        st = self._state.get(slot.task_id)
        redo_generator = st is None or not feedback or any(d.stage in GENERATOR_STAGES for d in feedback)
        if st is None or not feedback:
            msgs = safety_generator_messages(slot)
            st = _State(msgs, _strip(self.generate(msgs)))
        elif redo_generator:
            st = _State(st.draft_msgs, _strip(self.generate(_revise(st.draft_msgs, st.draft_text, feedback))))
        self._state[slot.task_id] = st
        draft = _parse(st.draft_text)
        if draft is None:
            return st.draft_text  # the parse stage reports the generator's broken JSON
        if redo_generator or st.verdict_msgs is None or st.verdict_text is None:
            st.verdict_msgs = discriminator_messages(
                slot.task_id,
                draft.get("services") or {},
                str(draft.get("safety_note", "")),
                [str(a) for a in draft.get("answer_ids") or []],
            )
            prompt = st.verdict_msgs
        else:
            prompt = _revise(st.verdict_msgs, st.verdict_text, feedback)
        self.discriminator_prompts.append(prompt)
        st.verdict_text = _strip(self.discriminate(prompt))
        verdict = _parse(st.verdict_text)
        if verdict is None:
            return st.verdict_text
        return json.dumps(assemble(slot, draft, verdict), ensure_ascii=False)
