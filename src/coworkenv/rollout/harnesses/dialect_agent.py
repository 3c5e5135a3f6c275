"""A lightweight async agent that speaks one wire dialect, for load tests at thousands of rollouts.

Harness names ``agent-chat`` (OpenAI Chat Completions), ``agent-responses`` (OpenAI Responses) and
``agent-messages`` (Anthropic Messages). Contract of :class:`DialectAgent`:

* in-process and async (no child process), so ten thousand can run in one event loop; each rollout
  has its own HTTP client and connections, as a harness process would (one client shared by
  thousands of rollouts costs O(connections) per request in httpcore's pool: 60% of the rig's CPU
  at 50 rollouts when measured);
* every model call goes to the rollout's proxy prefix in the chosen dialect (non-streaming), so the
  proxy parses, captures and answers it as it would a real harness of that dialect;
* every tool call goes over HTTP to the trial's own services routes (``POST
  <services>/t/<capability>/<route>``), as a black-box harness's MCP calls reach the services, so the
  services server is under the same load; a tool name the task does not expose is called on the
  trial in-process (refused there and audited, as the built-in loop does);
* the episode ends like the built-in loop's (:mod:`coworkenv.rollout.loop`): the first turn without
  tool calls that is not a question to the simulated user, ``max_turns`` model calls, or the
  deadline. An HTTP failure raises :class:`HarnessInfraError` (never the policy's fault);
* ``meta`` gives the client-side seconds of each model call (``model_call_s``) and each tool call
  (``tool_call_s``), which ``benchmarks/bench_scale.py`` sets against the engine's own time.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import httpx

from coworkenv import __version__
from coworkenv.proxy.messages import Message, ToolCall, openai_message
from coworkenv.rollout.harnesses.base import HarnessContext, HarnessInfraError, HarnessResult
from coworkenv.rollout.loop import ScriptedUser, parse_assistant, post_json, rollout_client, system_prompt
from coworkenv.serve import to_json
from coworkenv.services.trial import Trial

Dialect = Literal["chat", "responses", "messages"]
DIALECTS: tuple[Dialect, ...] = ("chat", "responses", "messages")
MAX_TOKENS = 1024


# ---------------------------------------------------------------- the three wires


def _schemas(ctx: HarnessContext) -> list[dict[str, Any]]:
    return [t.openai_schema()["function"] for t in ctx.trial.task.tools.values()]


def chat_payload(model: str, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [openai_message(m) for m in messages],
        "tools": [{"type": "function", "function": f} for f in tools],
        "stream": False,
    }


def responses_payload(model: str, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    instructions = ""
    for m in messages:
        if m.role == "system":
            instructions = m.content
        elif m.role == "user":
            items.append({"type": "message", "role": "user", "content": m.content})
        elif m.role == "assistant":
            if m.content:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": m.content}],
                    }
                )
            items += [
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in m.tool_calls
            ]
        else:
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content})
    return {
        "model": model,
        "instructions": instructions,
        "input": items,
        "tools": [{"type": "function", **f} for f in tools],
        "stream": False,
    }


def messages_payload(model: str, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
    system = ""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system = m.content
        elif m.role == "user":
            turns.append({"role": "user", "content": m.content})
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": json_object(c.arguments)}
                for c in m.tool_calls
            ]
            turns.append({"role": "assistant", "content": blocks})
        else:
            result = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            last = turns[-1] if turns else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(result)
            else:
                turns.append({"role": "user", "content": [result]})
    return {
        "model": model,
        "system": system,
        "max_tokens": MAX_TOKENS,
        "messages": turns,
        "tools": [
            {"name": f["name"], "description": f.get("description", ""), "input_schema": f["parameters"]}
            for f in tools
        ],
    }


def parse_responses(body: Any) -> Message:
    try:
        output = body["output"]
        text: list[str] = []
        calls: list[ToolCall] = []
        for item in output:
            if item.get("type") == "message":
                text += [
                    p.get("text", "") for p in item.get("content") or () if p.get("type") == "output_text"
                ]
            elif item.get("type") == "function_call":
                calls.append(
                    ToolCall(id=str(item["call_id"]), name=str(item["name"]), arguments=item["arguments"])
                )
    except (KeyError, TypeError, AttributeError) as exc:
        raise HarnessInfraError("http_error", f"malformed Responses body: {str(body)[:200]}") from exc
    return Message(role="assistant", content="".join(text), tool_calls=tuple(calls))


def parse_messages(body: Any) -> Message:
    try:
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in body["content"]:
            if block.get("type") == "text":
                text.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                args = json.dumps(block.get("input") or {})
                calls.append(ToolCall(id=str(block["id"]), name=str(block["name"]), arguments=args))
    except (KeyError, TypeError, AttributeError) as exc:
        raise HarnessInfraError("http_error", f"malformed Messages body: {str(body)[:200]}") from exc
    return Message(role="assistant", content="".join(text), tool_calls=tuple(calls))


_WIRES = {
    "chat": ("/v1/chat/completions", chat_payload, parse_assistant),
    "responses": ("/v1/responses", responses_payload, parse_responses),
    "messages": ("/v1/messages", messages_payload, parse_messages),
}


def json_object(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as a JSON object (``{"_unparsed": ...}`` when they are not one)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {"_unparsed": arguments}
    return value if isinstance(value, dict) else {"_unparsed": arguments}


# ---------------------------------------------------------------- the harness


class DialectAgent:
    """The harness (see the module docstring); ``DialectAgent("responses").name == "agent-responses"``."""

    starts_processes = False
    """In-process: its rollouts get plain sandbox directories, no filesystem of their own."""

    def __init__(self, dialect: Dialect = "chat", *, model: str = "policy") -> None:
        if dialect not in _WIRES:
            raise ValueError(f"dialect {dialect!r}: use one of {', '.join(DIALECTS)}")
        self.dialect = dialect
        self.name = f"agent-{dialect}"
        self.model = model

    @property
    def version(self) -> str:
        return __version__

    def check_installed(self) -> None:
        return None

    async def run(self, ctx: HarnessContext) -> HarnessResult:
        if ctx.mcp_url is None:
            raise HarnessInfraError("start_failure", f"{self.name} reaches tools over HTTP; no services URL")
        async with rollout_client(timeout=None) as client:
            return await self._episode(ctx, client, ctx.mcp_url.removesuffix("/mcp"))

    async def _episode(
        self, ctx: HarnessContext, client: httpx.AsyncClient, tools_base: str
    ) -> HarnessResult:
        path, payload, parse = _WIRES[self.dialect]
        url = ctx.proxy_url + path
        routes = {t.name: t.route for t in ctx.trial.task.tools.values()}
        schemas = _schemas(ctx)
        user = ScriptedUser(ctx.spec.user_sim) if ctx.spec.user_sim else None
        messages = [
            Message(role="system", content=system_prompt(ctx.spec)),
            Message(role="user", content=ctx.spec.request),
        ]
        model_s: list[float] = []
        tool_s: list[float] = []
        final, timed_out = "", False
        while len(model_s) < ctx.max_turns:
            if ctx.time_left() <= 0:
                timed_out = True
                break
            t0 = time.perf_counter()
            try:
                body = await post_json(client, url, payload(self.model, messages, schemas), ctx.wall_left())
            except httpx.TimeoutException:
                timed_out = True
                break
            model_s.append(time.perf_counter() - t0)
            turn = parse(body)
            messages.append(turn)
            if turn.tool_calls:
                for call in turn.tool_calls:
                    t0 = time.perf_counter()
                    result = await self._tool(
                        client, call, trial=ctx.trial, base=tools_base, routes=routes, timeout=ctx.wall_left()
                    )
                    tool_s.append(time.perf_counter() - t0)
                    messages.append(
                        Message(role="tool", content=result, tool_call_id=call.id, name=call.name)
                    )
                continue
            if user is not None and "?" in turn.content and not user.exhausted:
                messages.append(Message(role="user", content=user.reply(turn.content)))
                continue
            final = turn.content
            break
        return HarnessResult(
            final_answer=final,
            messages=tuple(messages),
            timed_out=timed_out,
            meta={
                "model_calls": len(model_s),
                "model_call_s": model_s,
                "tool_call_s": tool_s,
                "dialect": self.dialect,
            },
        )

    async def _tool(
        self,
        client: httpx.AsyncClient,
        call: ToolCall,
        *,
        trial: Trial,
        base: str,
        routes: dict[str, str],
        timeout: float,
    ) -> str:
        args = json_object(call.arguments)
        route = routes.get(call.name)
        if route is None:  # not a tool of this task: refused and audited by the trial, as in the loop
            return to_json(trial.call(call.name, args).body).decode()
        try:
            resp = await client.post(
                base + route,
                content=to_json(args),
                headers={"content-type": "application/json"},
                timeout=timeout,
            )
        except httpx.TimeoutException as exc:
            raise HarnessInfraError(
                "http_error", f"tool {call.name}: the services did not answer in time"
            ) from exc
        except httpx.HTTPError as exc:
            raise HarnessInfraError("http_error", f"tool {call.name}: {type(exc).__name__}: {exc}") from exc
        return resp.text  # an error status (an injected fault, a refusal) is the tool's answer
