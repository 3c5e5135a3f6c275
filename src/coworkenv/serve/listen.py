"""The listening socket every server of ours binds (proxy, services, sandboxes), and the ASGI
lifespan answer of a server with nothing to start.

Contract of :func:`listen_socket`: a bound, not yet listening, IPv4 TCP socket on ``host:port``
(``port=0``: a free one), with ``SO_REUSEADDR``, created with protocol ``IPPROTO_TCP`` and
``TCP_NODELAY`` set. Both matter: asyncio sets ``TCP_NODELAY`` on an accepted connection only when
the listening socket's protocol is ``IPPROTO_TCP`` (a plain ``socket.socket(AF_INET, SOCK_STREAM)``
has protocol 0), and uvicorn writes a response's headers and body in two writes. Without it, Nagle's
algorithm holds the body until the client acknowledges the headers, which the client delays by its
delayed-ACK timer (40 ms on Linux): every request after the first on a kept-alive connection took
~44 ms instead of ~0.7 ms (measured: ``benchmarks/bench_proxy_load.py``).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any


def listen_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """See the module docstring; pass it to ``uvicorn.Server.serve(sockets=[...])``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


async def serve_lifespan(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
) -> None:
    """Answer an ASGI ``lifespan`` scope: each startup and shutdown acknowledged, returning after
    shutdown (for an app with nothing to start or stop)."""
    while True:
        kind = (await receive())["type"]
        if kind in ("lifespan.startup", "lifespan.shutdown"):
            await send({"type": kind + ".complete"})
        if kind == "lifespan.shutdown":
            return
