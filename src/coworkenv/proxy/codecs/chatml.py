"""ChatML rendering shared by the SmolLM2 and Hermes codecs.

``<|im_start|>{role}\n{content}<|im_end|>\n`` per turn; leading system messages merge into one
system turn (the family adds its tool block there); consecutive tool results merge into one user
turn of ``<tool_response>`` blocks; the prompt ends with ``<|im_start|>assistant\n``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from coworkenv.proxy.messages import ChatRequest, Message, ToolCall

START, END = "<|im_start|>", "<|im_end|>"


def turn(role: str, content: str) -> str:
    return f"{START}{role}\n{content}{END}\n"


def tool_results(messages: Sequence[Message]) -> str:
    return "\n".join(f"<tool_response>\n{m.content}\n</tool_response>" for m in messages)


def render_chatml(
    request: ChatRequest,
    system_text: Callable[[str | None], str],
    assistant_text: Callable[[str, Sequence[ToolCall]], str],
) -> str:
    """Render ``request``; ``system_text(joined leading system text or None)`` builds the first
    turn, ``assistant_text`` renders assistant history."""
    msgs = list(request.messages)
    lead: list[str] = []
    while msgs and msgs[0].role == "system":
        lead.append(msgs.pop(0).content)
    parts = [turn("system", system_text("\n\n".join(lead) if lead else None))]
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m.role == "tool":
            j = i
            while j < len(msgs) and msgs[j].role == "tool":
                j += 1
            parts.append(turn("user", tool_results(msgs[i:j])))
            i = j
            continue
        if m.role == "assistant":
            parts.append(turn("assistant", assistant_text(m.content, m.tool_calls)))
        else:
            parts.append(turn(m.role, m.content))
        i += 1
    parts.append(f"{START}assistant\n")
    return "".join(parts)
