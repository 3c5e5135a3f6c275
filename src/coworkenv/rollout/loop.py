"""The built-in white-box agent loop: Chat Completions over HTTP, task tools in-process.

Contract: the loop talks to the model only through the rollout's proxy prefix
(``POST <proxy>/v1/chat/completions``, non-streaming, OpenAI tool schema), so every call is
captured; it executes the task's tools directly on the :class:`Trial` (one ``Trial.call`` per
tool call, any name the model emits, so unknown/forbidden attempts are audited too) and, when
enabled, ``bash`` / ``read_file`` / ``write_file`` inside the workspace (``bash`` in the rollout's
jail). It stops at the first
assistant turn without tool calls that is not a question to the simulated user, at
``max_turns`` model calls, or at the deadline (``timed_out``). Multi-turn tasks: a turn that
asks a question (contains ``?``) gets a scripted reply from ``spec.user_sim``
(:class:`ScriptedUser`), up to ``max_user_turns``. An HTTP error from the proxy raises
:class:`HarnessInfraError` — it is never the policy's fault.
"""

from __future__ import annotations

import functools
import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from coworkenv.proxy.messages import Message, ToolCall, openai_message
from coworkenv.rollout.harnesses.base import HarnessContext, HarnessInfraError, HarnessResult
from coworkenv.rollout.sandbox import run_process
from coworkenv.serve import to_json
from coworkenv.spec import WORKSPACE_CHECK_KINDS, TaskSpec, UserSim

WORKSPACE_TOOLS: dict[str, dict[str, Any]] = {
    "bash": {
        "description": "Run a shell command in the workspace directory; returns exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    "read_file": {
        "description": "Read a text file of the workspace (path relative to the workspace).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    "write_file": {
        "description": "Write a text file in the workspace (path relative to the workspace).",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
MAX_TOOL_OUTPUT = 20_000


def system_prompt(spec: TaskSpec) -> str:
    return (
        "You are an AI coworker with access to your company's work tools. "
        f"Today is {spec.mock_today.isoformat()}. Use the tools to do what the user asks; "
        "look things up before changing anything, and never take actions the user did not ask for. "
        "If you need information only the user has, ask one clear question. "
        "When you are done, reply with a final answer (no tool call) summarising what you did."
    )


@dataclass
class ScriptedUser:
    """Deterministic simulated user: the first unused reply whose trigger appears in the
    assistant's question (case-insensitive), else the next unused trigger-less reply, else the
    fallback."""

    sim: UserSim
    used: set[int] = field(default_factory=set)
    turns: int = 0

    @property
    def exhausted(self) -> bool:
        return self.turns >= self.sim.max_user_turns

    def reply(self, question: str) -> str:
        self.turns += 1
        q = question.lower()
        for i, r in enumerate(self.sim.replies):
            if i not in self.used and r.triggers and any(t.lower() in q for t in r.triggers):
                self.used.add(i)
                return r.text
        for i, r in enumerate(self.sim.replies):
            if i not in self.used and not r.triggers:
                self.used.add(i)
                return r.text
        return self.sim.fallback


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def rollout_client(**kwargs: Any) -> httpx.AsyncClient:
    """An HTTP client for one rollout's calls to its proxy and services. The TLS context (the CA
    bundle, ~18 ms of CPU to load) is built once per process and shared, so a client costs ~0.03 ms;
    each rollout still has its own connections, as a harness process would."""
    return httpx.AsyncClient(trust_env=False, verify=_tls(), **kwargs)


_JSON = {"content-type": "application/json"}


async def post_json(client: httpx.AsyncClient, url: str, payload: Any, timeout: float) -> Any:
    """POST a model call to the rollout's proxy; the JSON answer. A timeout propagates (the policy's
    time ran out); any other HTTP failure, a non-200 status or a body that is not JSON is a
    :class:`HarnessInfraError` (never the policy's fault)."""
    try:
        resp = await client.post(url, content=to_json(payload), headers=_JSON, timeout=timeout)
    except httpx.TimeoutException:
        raise
    except httpx.HTTPError as exc:
        raise HarnessInfraError("http_error", f"POST {url}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise HarnessInfraError("http_error", f"POST {url}: HTTP {resp.status_code}: {resp.text[:300]}")
    try:
        return orjson.loads(resp.content)
    except orjson.JSONDecodeError as exc:
        raise HarnessInfraError("http_error", f"POST {url}: body is not JSON") from exc


def wants_workspace_tools(spec: TaskSpec) -> bool:
    return bool(spec.workspace) or any(c.kind in WORKSPACE_CHECK_KINDS for c in spec.completion_checks)


def tool_schemas(ctx: HarnessContext, workspace_tools: bool) -> list[dict[str, Any]]:
    tools = [t.openai_schema() for t in ctx.trial.task.tools.values()]
    if workspace_tools:
        tools += [{"type": "function", "function": {"name": n, **d}} for n, d in WORKSPACE_TOOLS.items()]
    return tools


def parse_assistant(body: Any) -> Message:
    """The first choice of a Chat Completions response as a normalized assistant message."""
    try:
        msg = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise HarnessInfraError("http_error", f"malformed chat completion body: {str(body)[:200]}") from exc
    calls = []
    for i, c in enumerate(msg.get("tool_calls") or ()):
        fn = c.get("function") or {}
        args = fn.get("arguments", "{}")
        calls.append(
            ToolCall(
                id=str(c.get("id") or f"call_{i}"),
                name=str(fn.get("name", "")),
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
        )
    return Message(role="assistant", content=str(msg.get("content") or ""), tool_calls=tuple(calls))


class AgentLoop:
    """One episode of the white-box loop (see the module docstring)."""

    def __init__(self, ctx: HarnessContext, *, workspace_tools: bool | None = None, model: str = "policy"):
        self.ctx = ctx
        self.model = model
        self.workspace_tools = wants_workspace_tools(ctx.spec) if workspace_tools is None else workspace_tools
        self.tools = tool_schemas(ctx, self.workspace_tools)
        self.user = ScriptedUser(ctx.spec.user_sim) if ctx.spec.user_sim else None
        self.messages: list[Message] = [
            Message(role="system", content=system_prompt(ctx.spec)),
            Message(role="user", content=ctx.spec.request),
        ]

    async def run(self) -> HarnessResult:
        ctx = self.ctx
        final, timed_out, n_calls = "", False, 0
        url = f"{ctx.openai_base_url}/chat/completions"
        async with rollout_client() as client:
            while True:
                if n_calls >= ctx.max_turns:
                    break
                if ctx.time_left() <= 0:
                    timed_out = True
                    break
                try:
                    turn = await self._complete(client, url, ctx.wall_left())
                except httpx.TimeoutException:
                    timed_out = True
                    break
                n_calls += 1
                self.messages.append(turn)
                if turn.tool_calls:
                    for call in turn.tool_calls:
                        self.messages.append(await self._execute(call))
                    continue
                if self.user is not None and "?" in turn.content and not self.user.exhausted:
                    self.messages.append(Message(role="user", content=self.user.reply(turn.content)))
                    continue
                final = turn.content
                break
        return HarnessResult(
            final_answer=final,
            messages=tuple(self.messages),
            timed_out=timed_out,
            meta={"model_calls": n_calls, "workspace_tools": self.workspace_tools},
        )

    async def _complete(self, client: httpx.AsyncClient, url: str, timeout: float) -> Message:
        payload = {
            "model": self.model,
            "messages": [openai_message(m) for m in self.messages],
            "tools": self.tools,
            "stream": False,
        }
        return parse_assistant(await post_json(client, url, payload, timeout))

    async def _execute(self, call: ToolCall) -> Message:
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return self._tool_msg(call, {"error": f"arguments are not valid JSON: {exc}", "code": "bad_json"})
        if not isinstance(args, dict):
            return self._tool_msg(call, {"error": "arguments must be a JSON object", "code": "bad_args"})
        if self.workspace_tools and call.name in WORKSPACE_TOOLS:
            return self._tool_msg(call, await self._workspace_tool(call.name, args))
        res = self.ctx.trial.call(call.name, args)
        return self._tool_msg(call, res.body)

    def _tool_msg(self, call: ToolCall, body: Any) -> Message:
        text = body if isinstance(body, str) else to_json(body).decode()
        return Message(role="tool", content=text[:MAX_TOOL_OUTPUT], tool_call_id=call.id, name=call.name)

    async def _workspace_tool(self, name: str, args: dict[str, Any]) -> Any:
        ws = self.ctx.workspace
        if name == "bash":
            cmd = str(args.get("command", ""))
            left = max(1.0, min(60.0, self.ctx.time_left()))
            logs = self.ctx.log_dir or ws.parent / "logs"
            res = await run_process(
                ["/bin/sh", "-c", cmd],
                cwd=ws,
                env=self.ctx.env,
                timeout_s=left,
                log_dir=logs,
                name="bash",
                jail=self.ctx.jail,
            )
            out = res.stdout[-MAX_TOOL_OUTPUT:] + (res.stderr_tail if res.returncode else "")
            body: dict[str, Any] = {"exit_code": res.returncode, "timed_out": res.timed_out, "output": out}
            if res.limit is not None:
                body["killed"] = f"the sandbox's {res.limit} limit was exceeded"
            return body
        try:
            return _file_tool(ws, name, args)
        except (OSError, ValueError, RuntimeError) as exc:
            # whatever the path does (a directory, a NUL byte, a symlink loop, a full disk), the
            # model gets a tool error and the rollout goes on: a policy cannot crash its harness
            return {"error": f"{name} failed: {type(exc).__name__}: {exc}", "code": "io_error"}


def _file_tool(ws: Path, name: str, args: dict[str, Any]) -> Any:
    """``read_file`` / ``write_file`` on a path inside the workspace (raises on any I/O error)."""
    path = _inside(ws, str(args.get("path", "")))
    if path is None:
        return {"error": "path must stay inside the workspace", "code": "bad_path"}
    if name == "read_file":
        if not path.is_file():
            return {"error": f"no such file: {args.get('path')}", "code": "not_found"}
        return path.read_text(encoding="utf-8", errors="replace")[:MAX_TOOL_OUTPUT]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(args.get("content", "")), encoding="utf-8")
    return {"ok": True, "path": str(path.relative_to(ws))}


def _inside(root: Path, rel: str) -> Path | None:
    if not rel:
        return None
    path = (root / rel).resolve()
    return path if path.is_relative_to(root.resolve()) else None
