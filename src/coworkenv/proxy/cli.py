"""CLI commands of the proxy stage, added to the main app by :func:`register`.

``coworkenv proxy --backend SPEC --capture DIR [--rollout ID ...] [--port N]`` serves the capturing
proxy standalone: it opens the named rollouts, prints each one's base URLs (OpenAI and Anthropic
style) and serves until interrupted; every model call is recorded under ``DIR/<rollout>.calls.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""
    app.command("proxy")(proxy)


def proxy(
    *,
    backend: Annotated[
        str,
        typer.Option(
            "--backend", help="Backend spec: embedded | scripted[:TASKS] | vllm:URL | passthrough:URL ..."
        ),
    ] = "scripted",
    capture: Annotated[Path, typer.Option("--capture", help="Capture directory (append-only JSONL).")] = Path(
        "capture"
    ),
    rollout: Annotated[
        list[str] | None, typer.Option("--rollout", help="Rollout id to open (repeatable).")
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to bind.")] = 8400,
    keepalive: Annotated[
        float, typer.Option("--keepalive", min=0.05, help="Seconds between SSE keep-alives while generating.")
    ] = 2.0,
) -> None:
    """Serve the capturing proxy (Chat Completions, Responses, Anthropic Messages) standalone."""
    import uvicorn
    from rich.console import Console

    from coworkenv.errors import CoworkError
    from coworkenv.proxy.backends import make_backend
    from coworkenv.proxy.capture import CaptureStore
    from coworkenv.proxy.server import ProxyServer

    server = ProxyServer(make_backend(backend), CaptureStore(capture), keepalive_s=keepalive)
    console = Console()
    for rid in rollout or ["default"]:
        try:
            prefix = server.open_rollout(rid)
        except ValueError as exc:
            raise CoworkError(str(exc)) from None
        base = f"http://{host}:{port}{prefix}"
        console.print(f"[bold]{rid}[/]: OpenAI base_url {base}/v1   Anthropic base_url {base}")
    console.print(f"capturing to {capture.resolve()}  (Ctrl+C to stop)")
    try:
        uvicorn.run(server.app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    finally:
        server.shutdown()
