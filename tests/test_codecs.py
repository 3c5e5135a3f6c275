"""Chat templates and tool-call parsing: rendering per family, parse fallbacks, never-raise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.errors import CoworkError
from coworkenv.proxy.codecs import get_codec, parse_turn, resolve_tool_name
from coworkenv.proxy.codecs.smollm2 import example_arguments
from coworkenv.proxy.messages import ChatRequest, Message, ToolCall, ToolSpec

LIST = ToolSpec(
    name="helpdesk_list_tickets",
    description="List tickets",
    parameters={"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]},
)
UPDATE = ToolSpec(name="helpdesk_update_ticket", description="Update a ticket")
TOOLS = (LIST, UPDATE)
NAMES = [t.name for t in TOOLS]


def convo() -> ChatRequest:
    call = ToolCall(id="call_0", name="helpdesk_list_tickets", arguments='{"status":"open"}')
    return ChatRequest(
        messages=(
            Message(role="system", content="You are a support agent."),
            Message(role="user", content="Escalate the stale ticket."),
            Message(role="assistant", content="Looking.", tool_calls=(call,)),
            Message(role="tool", content='[{"ticket_id": "TK-1"}]', tool_call_id="call_0"),
        ),
        tools=TOOLS,
    )


# ---------------------------------------------------------------- rendering


def test_smollm2_puts_tools_and_an_example_call_in_the_system_prompt() -> None:
    text = get_codec("smollm2").render_text(convo())
    system = text.split("<|im_end|>")[0]
    # the tool block first (shared by a task family), the caller's system text (per task) after it
    assert system.startswith("<|im_start|>system\nYou can call tools.")
    assert system.endswith("\n\nYou are a support agent.")
    assert "\nhelpdesk_list_tickets(status: string) — List tickets\n" in system
    assert "\nhelpdesk_update_ticket() — Update a ticket\n" in system
    assert (
        '<tool_call>{"name": "helpdesk_list_tickets", "arguments": {"status": "..."}}</tool_call>' in system
    )
    # history: the assistant's call in the same format, the tool result as a user turn
    assert (
        '<|im_start|>assistant\nLooking.\n<tool_call>{"name": "helpdesk_list_tickets", '
        '"arguments": {"status": "open"}}</tool_call><|im_end|>' in text
    )
    assert '<|im_start|>user\n<tool_response>\n[{"ticket_id": "TK-1"}]\n</tool_response><|im_end|>' in text
    assert text.endswith("<|im_start|>assistant\n")


def test_smollm2_json_keeps_the_full_schema_lines() -> None:
    system = get_codec("smollm2-json").render_text(convo()).split("<|im_end|>")[0]
    assert json.dumps(LIST.model_dump()) in system
    assert '"required": ["status"]' in system


def test_compact_signature_keeps_every_fact_a_call_needs() -> None:
    tool = ToolSpec(
        name="todo_create_task",
        description="Create a to-do item.",
        parameters={
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "task_id": {"type": "string", "description": "Task ID"},
                "title": {"type": "string", "minLength": 1, "description": "Task title"},
                "priority": {"type": "string", "enum": ["high", "low"], "default": "low"},
                "days": {"type": "integer", "minimum": 1, "maximum": 366, "description": "Days ahead"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels"},
                "owner": {
                    "type": "object",
                    "properties": {"email": {"type": "string", "description": "Work address"}},
                    "required": ["email"],
                },
                "amount": {"type": ["number", "null"], "x-unit": "EUR"},
            },
            "required": ["task_id", "title"],
        },
    )
    line = get_codec("smollm2").render_text(
        ChatRequest(messages=(Message(role="user", content="hi"),), tools=(tool,))
    )
    sig = next(x for x in line.splitlines() if x.startswith("todo_create_task("))
    assert sig.startswith(
        "todo_create_task(task_id: string, title: string len>=1, "
        'priority?: "high"|"low" = "low", days?: integer 1..366, tags?: string[], '
        'owner?: {email: string}, amount?: number|null x-unit="EUR") — Create a to-do item'
    )
    # descriptions that restate the name are dropped, informative ones kept (nested ones too)
    assert "Task ID" not in sig
    assert "Task title" not in sig
    assert "days: Days ahead" in sig
    assert "tags: Labels" in sig
    assert "owner.email: Work address" in sig


def test_compact_tool_block_is_smaller_than_the_json_lines() -> None:
    from coworkenv.proxy.codecs.smollm2 import tool_block

    assert len(tool_block(TOOLS, "compact")) < len(tool_block(TOOLS, "json"))
    with pytest.raises(ValueError, match="tool_format"):
        get_codec("smollm2").__class__(tool_format="yaml")  # type: ignore[arg-type]


def test_hermes_renders_the_native_tools_section() -> None:
    text = get_codec("hermes").render_text(convo())
    assert "# Tools" in text
    assert "<tools>\n" in text
    assert json.dumps({"type": "function", "function": LIST.model_dump()}) in text
    assert (
        '<tool_call>\n{"name": "helpdesk_list_tickets", "arguments": {"status": "open"}}\n</tool_call>'
        in text
    )


def test_consecutive_tool_results_share_one_user_turn() -> None:
    req = ChatRequest(
        messages=(
            Message(role="user", content="go"),
            Message(
                role="assistant",
                tool_calls=(ToolCall(id="a", name="helpdesk_list_tickets"), ToolCall(id="b", name="x")),
            ),
            Message(role="tool", content="R1", tool_call_id="a"),
            Message(role="tool", content="R2", tool_call_id="b"),
        ),
        tools=TOOLS,
    )
    text = get_codec("smollm2").render_text(req)
    assert (
        "<|im_start|>user\n<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response>"
        in text
    )
    assert text.count("<|im_start|>user") == 2


def test_example_arguments_follow_required_types() -> None:
    tool = ToolSpec(
        name="t",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "opt": {"type": "string"}},
            "required": ["n", "ok"],
        },
    )
    assert example_arguments(tool) == {"n": 1, "ok": True}


def test_unknown_family_and_generic_without_tokenizer_are_clear_errors() -> None:
    with pytest.raises(CoworkError, match="unknown codec family 'llama9'"):
        get_codec("llama9")
    with pytest.raises(CoworkError, match="needs a tokenizer"):
        get_codec("generic")


# ---------------------------------------------------------------- parsing


def test_hermes_tags_several_calls_with_deterministic_ids_and_compact_arguments() -> None:
    text = (
        "I will check.\n"
        '<tool_call>{"name": "helpdesk_list_tickets", "arguments": {"status": "open"}}</tool_call>\n'
        '<tool_call>\n{"name": "helpdesk_update_ticket", '
        '"arguments": "{\\"ticket_id\\": \\"TK-1\\"}"}\n</tool_call>'
    )
    turn = parse_turn(text, NAMES, first_call_index=3)
    assert turn.content == "I will check."
    assert turn.finish_reason == "tool_calls"
    assert not turn.malformed
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_3", "helpdesk_list_tickets", '{"status":"open"}'),
        ("call_4", "helpdesk_update_ticket", '{"ticket_id":"TK-1"}'),
    ]


def test_unclosed_tag_at_the_end_still_parses() -> None:
    turn = parse_turn('<tool_call>{"name": "helpdesk_list_tickets", "arguments": {}}', NAMES)
    assert [c.name for c in turn.tool_calls] == ["helpdesk_list_tickets"]


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "helpdesk_list_tickets", "arguments": {"status": "open"}}\n```',
        '{"name": "helpdesk_list_tickets", "arguments": {"status": "open"}}',
        '[{"name": "helpdesk_list_tickets", "parameters": {"status": "open"}}]',
        'Sure: {"name": "helpdesk_list_tickets", "arguments": {"status": "open"}} done',
    ],
)
def test_json_fallbacks(text: str) -> None:
    turn = parse_turn(text, NAMES)
    assert not turn.malformed
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("helpdesk_list_tickets", '{"status":"open"}')
    ]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "helpdesk_list_tickets", "arguments": {"status": </tool_call>',
        '<tool_call>{"name": "drop_database", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "helpdesk_list_tickets", "arguments": [1, 2]}</tool_call>',
        '<tool_call>{"name": "helpdesk_list_tickets", "arguments": "not json"}</tool_call>',
        '```json\n{"name": "drop_database", "arguments": {}}\n```',
        '{"name": "drop_database", "arguments": {}}',
    ],
)
def test_malformed_calls_become_plain_text_with_the_flag(text: str) -> None:
    turn = parse_turn(text, NAMES, finish_reason="length")
    assert turn.malformed
    assert not turn.tool_calls
    assert turn.content == text.strip()
    assert turn.finish_reason == "length"


def test_json_that_is_not_a_call_is_ordinary_content() -> None:
    text = 'Summary:\n```json\n{"tickets": ["TK-1"], "name": "report"}\n```'
    turn = parse_turn(text, NAMES)
    assert turn.content == text
    assert not turn.tool_calls
    assert not turn.malformed
    prose = 'The ticket {"name": "other", "arguments": {}} was closed.'
    assert parse_turn(prose, NAMES).malformed is False


def test_tool_tags_without_tools_in_the_request_are_malformed() -> None:
    turn = parse_turn('<tool_call>{"name": "x", "arguments": {}}</tool_call>', [])
    assert turn.malformed


def test_tool_names_resolve_through_mcp_prefixes() -> None:
    tools = ["mcp__svc__helpdesk_list_tickets", "Bash"]
    assert resolve_tool_name("helpdesk_list_tickets", tools) == "mcp__svc__helpdesk_list_tickets"
    assert resolve_tool_name("svc_helpdesk_list_tickets", ["svc_helpdesk_list_tickets"]) is not None
    assert resolve_tool_name("list_tickets", ["a_list_tickets", "b_list_tickets"]) is None  # ambiguous
    assert resolve_tool_name("tickets", ["helpdesk_list_tickets_x"]) is None
    turn = parse_turn('<tool_call>{"name": "helpdesk_list_tickets", "arguments": {}}</tool_call>', tools)
    assert turn.tool_calls[0].name == "mcp__svc__helpdesk_list_tickets"


# ---------------------------------------------------------------- properties

FRAGMENTS = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "{",
        "}",
        "[",
        "]",
        '"name"',
        '"arguments"',
        ":",
        ",",
        "```json\n",
        "```",
        '"helpdesk_list_tickets"',
        "null",
        "1e999",
        "\\u0000",
        '"',
        " ",
        "\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=40).map("".join)))
def test_parse_never_raises(text: str) -> None:
    turn = parse_turn(text, NAMES)
    assert turn.malformed or turn.tool_calls or turn.content == text.strip()
    for call in turn.tool_calls:
        assert call.name in NAMES
        assert isinstance(json.loads(call.arguments), dict)


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=5), c, max_size=3)),
    max_leaves=8,
)
CONTENT = st.text(
    alphabet=st.characters(blacklist_characters="<{[`", blacklist_categories=("Cs",)), max_size=30
)


@pytest.mark.parametrize("family", ["smollm2", "hermes"])
@settings(max_examples=100, deadline=None)
@given(
    content=CONTENT,
    calls=st.lists(
        st.tuples(st.sampled_from(NAMES), st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4)),
        min_size=1,
        max_size=3,
    ),
    first=st.integers(min_value=0, max_value=50),
)
def test_render_parse_round_trip(
    family: str, content: str, calls: list[tuple[str, dict[str, Any]]], first: int
) -> None:
    codec = get_codec(family)
    tool_calls = [
        ToolCall(
            id=f"call_{first + i}", name=n, arguments=json.dumps(a, separators=(",", ":"), ensure_ascii=False)
        )
        for i, (n, a) in enumerate(calls)
    ]
    text = codec.format_assistant(content.strip(), tool_calls)
    turn = codec.parse(text, TOOLS, first_call_index=first)
    assert not turn.malformed
    assert turn.content == content.strip()
    assert list(turn.tool_calls) == tool_calls
    # the same text is what the history rendering contains for that turn
    req = ChatRequest(
        messages=(Message(role="assistant", content=content.strip(), tool_calls=tuple(tool_calls)),)
    )
    assert f"<|im_start|>assistant\n{text}<|im_end|>" in codec.render_text(req)
