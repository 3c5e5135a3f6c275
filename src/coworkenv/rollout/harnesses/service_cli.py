"""``cowork-tool``: the task's MCP tools as a shell command, for harnesses whose only tool is a shell.

Contract: a harness without an MCP client (mini-swe-agent) gets this file copied into its sandbox
HOME as an executable (:func:`install_service_cli`, shebang = the harness's own Python), with the
trial's streamable-HTTP MCP endpoint in ``COWORKENV_MCP_URL``. ``cowork-tool --list`` prints each
tool's name, description and input schema; ``cowork-tool <tool> '<json arguments>'`` calls it and
prints the result's text (exit status 1 when the result is an error, 2 on bad usage or an
unreachable endpoint). It speaks MCP over HTTP with the standard library only (initialize, the
initialized notification, then ``tools/list`` or ``tools/call``; JSON or SSE answers), so the
services see exactly what they see from any MCP client: the same tools, the same audit.
:data:`SERVICE_CLI` is the command's name; the scripted reference policy calls it through the shell
tool when a prompt names it and the task's tools are not offered as tools.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

SERVICE_CLI = "cowork-tool"
URL_ENV = "COWORKENV_MCP_URL"
PROTOCOL = "2025-06-18"


def install_service_cli(home: Path, python: str) -> Path:
    """Write the command into ``home/bin`` (run by ``python``); returns its path."""
    path = home / "bin" / SERVICE_CLI
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{python}\n" + Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
    path.chmod(0o755)
    return path


class _Client:
    def __init__(self, url: str) -> None:
        self.url = url
        self.session: str | None = None
        self.next_id = 0

    def post(self, method: str, params: dict[str, Any], *, notify: bool = False) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
        }
        if self.session:
            headers["mcp-session-id"] = self.session
        req = urllib.request.Request(self.url, json.dumps(msg).encode(), headers, method="POST")
        with urllib.request.urlopen(req, timeout=120) as res:
            self.session = res.headers.get("mcp-session-id") or self.session
            body = res.read().decode("utf-8")
        if notify:
            return None
        for data in _messages(body):
            if data.get("id") == msg["id"]:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error'].get('message', data['error'])}")
                return data.get("result")
        raise RuntimeError(f"{method}: no answer in the server's response")

    def open(self) -> None:
        info = {"name": SERVICE_CLI, "version": "1"}
        self.post("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
        self.post("notifications/initialized", {}, notify=True)


def _messages(body: str) -> list[dict[str, Any]]:
    """JSON-RPC messages of a response body: one JSON document, or SSE ``data:`` lines."""
    text = body.strip()
    if text.startswith("{"):
        return [json.loads(text)]
    out = []
    for line in body.splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload.startswith("{"):
                out.append(json.loads(payload))
    return out


def _text(result: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text"]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    url = os.environ.get(URL_ENV, "")
    usage = f"usage: {SERVICE_CLI} --list | {SERVICE_CLI} <tool> '<json arguments>'"
    if not url or not argv or argv[0] in ("-h", "--help"):
        print(usage if url else f"{SERVICE_CLI}: {URL_ENV} is not set", file=sys.stderr)
        return 2
    client = _Client(url)
    try:
        client.open()
        if argv[0] == "--list":
            for tool in client.post("tools/list", {}).get("tools", []):
                schema = json.dumps(tool.get("inputSchema", {}), separators=(",", ":"))
                print(f"{tool['name']}: {tool.get('description', '')}\n  arguments: {schema}")
            return 0
        args = json.loads(argv[1]) if len(argv) > 1 else {}
        if not isinstance(args, dict):
            print(f"{SERVICE_CLI}: the arguments must be a JSON object", file=sys.stderr)
            return 2
        result = client.post("tools/call", {"name": argv[0], "arguments": args})
    except (OSError, RuntimeError, urllib.error.URLError, json.JSONDecodeError) as exc:
        print(f"{SERVICE_CLI}: {exc}", file=sys.stderr)
        return 2
    print(_text(result))
    return 1 if result.get("isError") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
