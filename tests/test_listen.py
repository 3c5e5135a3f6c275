"""Our servers' listening sockets: no Nagle delay on kept-alive connections (serve/listen.py)."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from collections.abc import MutableMapping
from typing import Any

from coworkenv.rollout.loop import rollout_client
from coworkenv.rollout.runner import serve_app
from coworkenv.serve.listen import listen_socket, serve_lifespan


def test_accepted_connections_get_tcp_nodelay() -> None:
    async def main() -> int:
        accepted: list[int] = []

        def on_client(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_client, sock=listen_socket())
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if accepted:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        await server.wait_closed()
        return accepted[0]

    assert asyncio.run(main()) != 0


async def _ok(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await serve_lifespan(receive, send)
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_requests_on_a_kept_alive_connection_are_not_held_by_delayed_acks() -> None:
    """uvicorn writes headers and body apart; with Nagle on, each request after the first on a
    connection waited for the client's delayed ACK (>= 40 ms on Linux; measured ~44 ms)."""

    async def main() -> list[float]:
        took: list[float] = []
        async with serve_app(_ok) as url, rollout_client(timeout=10) as client:
            for _ in range(12):
                t0 = time.perf_counter()
                resp = await client.post(url + "/x", content=b"x" * 2000)
                took.append(time.perf_counter() - t0)
                assert resp.status_code == 200
        return took[1:]  # the first request opens the connection

    assert statistics.median(asyncio.run(main())) < 0.030
