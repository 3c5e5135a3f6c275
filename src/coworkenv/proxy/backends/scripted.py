"""A deterministic scripted policy: the offline "teacher" for tests and demos. No model needed.

A :class:`Script` is an ordered list of items — tool calls (:class:`ScriptCall`) and questions to the
user (:class:`ScriptAsk`) — and a final message. At each request the backend counts the assistant
turns already in ``request.messages`` (a run of consecutive assistant messages counts once, so a
dialect that splits one turn into several messages does not shift the script): turn ``i`` plays
item ``i``, and every turn after the last item is the final message. An ask is a plain-text turn;
the harness's simulated user answers and the script continues.

Tool names resolve against ``request.tools``: the exact name, or the one tool whose name ends with it
after a separator (``mcp__svc__helpdesk_list_tickets``, ``svc_helpdesk_list_tickets``, ...). The
replayer's workspace pseudo-tools (``workspace.write_file``, ``workspace.run``) map to the harness's
shell tool (or a write-file tool); with neither, those steps are dropped. A harness whose only tool
is a shell (mini-swe-agent) reaches the services through the ``cowork-tool`` command
(:mod:`coworkenv.rollout.harnesses.service_cli`): when a system or user message names
:data:`SERVICE_CLI`, an unresolvable service step becomes the shell call ``cowork-tool <tool>
'<json>'``. Otherwise an unresolvable service tool raises :class:`BackendError` (kind ``scripted``)
naming the step and the tools offered. When the prompt asks the model to finish by running ``echo
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (:data:`SUBMIT_MARKER`, mini-swe-agent's protocol) and a shell
tool is offered, the final message and questions to the user are submitted that way: the marker,
then the text as the command's output.

Tokens come from :class:`ByteTokenizer` (UTF-8 bytes are ids, 256 is end-of-turn): the prompt is the
codec's rendering (SmolLM2 ChatML by default), the output the codec's canonical turn text plus the
end id, and every logprob is 0.0 — the scripted policy is deterministic, so each emitted token has
probability 1. Given a model's ``tokenizer`` instead (``encode`` + ``eos_token_id``), prompt and
output are that model's token ids — the scripted turn as the model would have had to generate it
(used to give a job's CI run groups with mixed outcomes; never training data for a real run).
``faults`` injects, at a seeded rate, BackendError(timeout | http_5xx | truncated) or
a garbage tool call (broken JSON / unknown tool) that parses as a malformed turn.
"""

from __future__ import annotations

import asyncio
import json
import random
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.codecs import Codec, get_codec, resolve_tool_name
from coworkenv.proxy.codecs.base import TokenizerLike, compact_json, count_tool_calls
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, Message, ToolCall, ToolSpec
from coworkenv.spec import TaskSpec, UserTurn

EOS_ID = 256
FAULT_KINDS = ("timeout", "http_5xx", "truncated", "garbage")
SHELL_TOOLS = ("bash", "shell", "exec_command", "run_shell_command", "shell_command", "terminal")
WRITE_TOOLS = ("write", "write_file", "writefile", "create_file")
SERVICE_CLI = "cowork-tool"
"""The shell command that calls a task tool (kept equal to ``service_cli.SERVICE_CLI``)."""
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class ByteTokenizer:
    """UTF-8 bytes as token ids; id 256 is the end-of-turn special token, spelled ``<|im_end|>`` in
    text (as a real chat tokenizer does, so a turn's output ids are a prefix of the next prompt's).
    Reversible for any text."""

    eos_token_id = EOS_ID
    eot_text = "<|im_end|>"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        for n, part in enumerate(text.split(self.eot_text)):
            if n:
                ids.append(EOS_ID)
            ids.extend(part.encode("utf-8"))
        return ids

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        out: list[str] = []
        run: list[int] = []
        for i in token_ids:
            if 0 <= i < 256:
                run.append(i)
            elif i == EOS_ID:
                out.append(bytes(run).decode("utf-8", errors="replace"))
                run = []
                if not skip_special_tokens:
                    out.append(self.eot_text)
        out.append(bytes(run).decode("utf-8", errors="replace"))
        return "".join(out)


@dataclass(frozen=True)
class ScriptCall:
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScriptAsk:
    """An assistant message that asks the user something and waits for the reply."""

    text: str


ScriptItem = ScriptCall | ScriptAsk


@dataclass(frozen=True)
class Script:
    items: tuple[ScriptItem, ...]
    final_message: str


@dataclass(frozen=True)
class Faults:
    """Inject a fault into ``rate`` of the calls (seeded, in call order)."""

    rate: float
    seed: int = 0
    kinds: tuple[str, ...] = FAULT_KINDS
    delay_s: float = 0.0
    """How long a ``timeout`` fault waits before raising."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be in [0, 1], got {self.rate}")
        bad = sorted(set(self.kinds) - set(FAULT_KINDS))
        if bad:
            raise ValueError(f"unknown fault kinds {bad}; choose from {list(FAULT_KINDS)}")


def assistant_turns(messages: Sequence[Message]) -> int:
    """Assistant turns so far: runs of consecutive assistant messages."""
    turns, prev = 0, ""
    for m in messages:
        if m.role == "assistant" and prev != "assistant":
            turns += 1
        prev = m.role
    return turns


def _find_tool(tools: Sequence[ToolSpec], names: Sequence[str]) -> ToolSpec | None:
    for tool in tools:
        short = tool.name.rsplit("__", 1)[-1].rsplit(".", 1)[-1].lower()
        if tool.name.lower() in names or short in names:
            return tool
    return None


def _prop(tool: ToolSpec, candidates: Sequence[str]) -> tuple[str, dict[str, Any]]:
    props = tool.parameters.get("properties") or {}
    for key in candidates:
        if key in props:
            spec = props[key]
            return key, spec if isinstance(spec, dict) else {}
    return candidates[0], {}


def _shell_call(tool: ToolSpec, command: str) -> ScriptCall:
    key, spec = _prop(tool, ("command", "cmd", "script"))
    value: Any = ["bash", "-lc", command] if spec.get("type") == "array" else command
    return ScriptCall(tool.name, {key: value})


def resolve_workspace_step(item: ScriptCall, tools: Sequence[ToolSpec]) -> ScriptCall | None:
    """Map ``workspace.write_file`` / ``workspace.run`` onto the harness's tools, or None."""
    shell = _find_tool(tools, SHELL_TOOLS)
    if item.tool == "workspace.run":
        return _shell_call(shell, str(item.args.get("command", ""))) if shell else None
    path, content = str(item.args.get("path", "")), str(item.args.get("content", ""))
    if shell is not None:
        parent = path.rsplit("/", 1)[0] if "/" in path else "."
        cmd = f"mkdir -p {shlex.quote(parent)} && printf '%s' {shlex.quote(content)} > {shlex.quote(path)}"
        return _shell_call(shell, cmd)
    writer = _find_tool(tools, WRITE_TOOLS)
    if writer is None:
        return None
    pkey, _ = _prop(writer, ("file_path", "path", "filePath", "absolute_path", "filename"))
    ckey, _ = _prop(writer, ("content", "text", "file_text", "contents"))
    return ScriptCall(writer.name, {pkey: path, ckey: content})


def _prompt_mentions(request: ChatRequest, text: str) -> bool:
    return any(text in m.content for m in request.messages if m.role in ("system", "user"))


def resolve_script(
    script: Script, tools: Sequence[ToolSpec], *, service_cli: bool = False
) -> list[ScriptItem]:
    """The script's items with tool names resolved against the request's tools (``service_cli``:
    an unresolvable service step goes through the :data:`SERVICE_CLI` command in the shell tool)."""
    names = [t.name for t in tools]
    shell = _find_tool(tools, SHELL_TOOLS) if service_cli else None
    out: list[ScriptItem] = []
    for index, item in enumerate(script.items):
        if isinstance(item, ScriptAsk):
            out.append(item)
        elif item.tool.startswith("workspace."):
            mapped = resolve_workspace_step(item, tools)
            if mapped is not None:
                out.append(mapped)
        elif not names:
            out.append(item)
        else:
            resolved = resolve_tool_name(item.tool, names)
            if resolved is None and shell is not None:
                args = compact_json(dict(item.args))
                out.append(_shell_call(shell, f"{SERVICE_CLI} {item.tool} {shlex.quote(args)}"))
                continue
            if resolved is None:
                raise BackendError(
                    "scripted",
                    f"script step {index} calls {item.tool!r}, which matches none (or several) of the "
                    f"request's {len(names)} tools: {names[:12]}",
                )
            out.append(ScriptCall(resolved, item.args))
    return out


def ask_text(turn: UserTurn, spec: TaskSpec) -> str:
    """A question whose wording triggers the scripted user reply matching ``turn``."""
    trigger = ""
    if spec.user_sim is not None:
        for reply in spec.user_sim.replies:
            if reply.text == turn.text and reply.triggers:
                trigger = reply.triggers[0]
                break
    about = f" about {trigger}" if trigger else ""
    return f"Before I continue, I need to check something with you{about}. Could you tell me how to proceed?"


def script_from_reference(spec: TaskSpec) -> Script:
    items: list[ScriptItem] = []
    for step in spec.reference.steps:
        if isinstance(step, UserTurn):
            items.append(ScriptAsk(ask_text(step, spec)))
        else:
            items.append(ScriptCall(step.tool, dict(step.args)))
    return Script(tuple(items), spec.reference.final_message)


class ScriptedBackend:
    """Deterministic turns from one script, or from several routed by the task request text."""

    name = "scripted"

    def __init__(
        self,
        scripts: Script | Mapping[str, Script],
        *,
        codec: Codec | None = None,
        faults: Faults | None = None,
        version: str = "scripted",
        tokenizer: TokenizerLike | None = None,
    ) -> None:
        self._scripts: dict[str, Script] = {"": scripts} if isinstance(scripts, Script) else dict(scripts)
        if not self._scripts:
            raise ValueError("ScriptedBackend needs at least one script")
        self.codec = codec or get_codec("smollm2")
        self.tokenizer: TokenizerLike = tokenizer if tokenizer is not None else ByteTokenizer()
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self._eos = int(eos) if eos is not None else EOS_ID
        self.faults = faults
        self._rng = random.Random(faults.seed if faults else 0)
        self._version = version
        self.calls = 0

    # ------------------------------------------------------------ constructors

    @classmethod
    def from_steps(
        cls, steps: Sequence[tuple[str, dict[str, Any]]], final_message: str, **kwargs: Any
    ) -> ScriptedBackend:
        """Tool steps ``(tool, args)`` in order, then ``final_message``."""
        items = tuple(ScriptCall(tool, dict(args)) for tool, args in steps)
        return cls(Script(items, final_message), **kwargs)

    @classmethod
    def from_reference(cls, spec: TaskSpec, **kwargs: Any) -> ScriptedBackend:
        """The task's reference solution (user turns become questions to the user)."""
        return cls(script_from_reference(spec), **kwargs)

    @classmethod
    def from_references(cls, specs: Sequence[TaskSpec], **kwargs: Any) -> ScriptedBackend:
        """Several tasks: each request is routed to the task whose request text its user turn holds."""
        return cls({s.request: script_from_reference(s) for s in specs}, **kwargs)

    # ------------------------------------------------------------ the Backend protocol

    @property
    def policy_version(self) -> str:
        return self._version

    def script_for(self, request: ChatRequest) -> Script:
        if "" in self._scripts and len(self._scripts) == 1:
            return self._scripts[""]
        users = [m.content for m in request.messages if m.role == "user"]
        hits = [key for key in self._scripts if key and any(key in u for u in users)]
        if not hits:
            first = users[0][:80] if users else ""
            raise BackendError("scripted", f"no scripted task matches the request's user turn {first!r}")
        return self._scripts[max(hits, key=len)]

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        fault = self._draw_fault()
        if fault in ("timeout", "http_5xx", "truncated"):
            if fault == "timeout" and self.faults and self.faults.delay_s:
                await asyncio.sleep(self.faults.delay_s)
            raise BackendError(fault, f"injected {fault} fault (scripted backend, call {self.calls})")
        prompt = self.codec.render(request, self.tokenizer)
        first = count_tool_calls(request.messages)
        if fault == "garbage":
            text = self._garbage(request)
            turn = self.codec.parse(text, request.tools, first_call_index=first)
        else:
            turn = self._turn(request, first)
            text = self.codec.format_assistant(turn.content, turn.tool_calls)
        out = (*self.tokenizer.encode(text, add_special_tokens=False), self._eos)
        return Completion(
            turn=turn,
            text=text,
            prompt_ids=prompt.ids,
            output_ids=out,
            logprobs=(0.0,) * len(out),
            policy_version=self._version,
            model=request.model or self.name,
            usage_prompt_tokens=len(prompt.ids),
            usage_completion_tokens=len(out),
        )

    # ------------------------------------------------------------ internals

    def _draw_fault(self) -> str | None:
        if self.faults is None or self.faults.rate <= 0:
            return None
        hit = self._rng.random() < self.faults.rate
        kind = self._rng.choice(self.faults.kinds)
        return kind if hit else None

    def _turn(self, request: ChatRequest, first_call: int) -> AssistantTurn:
        script = self.script_for(request)
        items = resolve_script(script, request.tools, service_cli=_prompt_mentions(request, SERVICE_CLI))
        index = assistant_turns(request.messages)
        text = script.final_message if index >= len(items) else None
        item = None if text is not None else items[index]
        if isinstance(item, ScriptAsk):
            text = item.text
        if text is not None:
            shell = _find_tool(request.tools, SHELL_TOOLS)
            if shell is None or not _prompt_mentions(request, SUBMIT_MARKER):
                return AssistantTurn(content=text, finish_reason="stop")
            item = _shell_call(shell, f"echo {SUBMIT_MARKER} && printf '%s\\n' {shlex.quote(text)}")
        assert isinstance(item, ScriptCall)
        call = ToolCall(id=f"call_{first_call}", name=item.tool, arguments=compact_json(dict(item.args)))
        return AssistantTurn(tool_calls=(call,), finish_reason="tool_calls")

    def _garbage(self, request: ChatRequest) -> str:
        name = request.tools[0].name if request.tools else "tool"
        if self._rng.random() < 0.5:
            return '<tool_call>{"name": ' + json.dumps(name) + ', "arguments": {"id": '
        return '<tool_call>{"name": "no_such_tool_zz", "arguments": {}}</tool_call>'
