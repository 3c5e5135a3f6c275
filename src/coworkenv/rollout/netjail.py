"""The jail's network: nothing but the rollout's own endpoints (its proxy prefix and services).

Contract: a jail with an isolated network (``bwrap --unshare-net``) has only its own loopback.
For each endpoint a harness must reach (``http://127.0.0.1:P/...``), :func:`relays` serves a
unix socket on the host that relays to ``127.0.0.1:P``, in a short-lived directory the jail
mounts read-only at :data:`JAIL_DIR`; :func:`forwarder_argv` wraps the harness command in a tiny
standard-library forwarder (the jail's ``python3``) that listens on ``127.0.0.1:P`` inside the
jail, relays each connection to its socket, runs the command and exits with its status. So the
harness uses its URLs unchanged, and nothing else on the host or the internet — another
rollout's proxy, an inference server's admin API, a Ray cluster, a developer's server — is
reachable. Every relayed connection's host-side port is registered in :data:`RELAYED` while it
is open, so a refused request is attributed to its rollout without a ``/proc`` scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

JAIL_DIR = "/run/coworkenv-net"
"""Where the jail sees the relay sockets."""

RELAYED: dict[int, str] = {}
"""Host-side local port of an open relayed connection → the rollout id it serves."""

FORWARDER = """
import asyncio, signal, sys
i = sys.argv.index("--")
maps, cmd = [a.split("=", 1) for a in sys.argv[1:i]], sys.argv[i + 1:]
async def pipe(r, w):
    try:
        while True:
            data = await r.read(65536)
            if not data:
                break
            w.write(data)
            await w.drain()
    except Exception:  # a peer hung up: this direction of the relay ends
        pass
    finally:
        w.close()
def relay(path):
    async def handle(r, w):
        try:
            ur, uw = await asyncio.open_unix_connection(path)
        except OSError:
            w.close()
            return
        await asyncio.gather(pipe(r, uw), pipe(ur, w))
    return handle
async def main():
    for port, path in maps:
        await asyncio.start_server(relay(path), "127.0.0.1", int(port))
    proc = await asyncio.create_subprocess_exec(*cmd)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, proc.send_signal, sig)
    code = await proc.wait()
    return code if code >= 0 else 128 - code
sys.exit(asyncio.run(main()))
"""


def jail_python() -> str | None:
    """A ``python3`` the jail can run (it sees only ``/usr`` and the ``/bin`` links), or None."""
    found = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    return found if found is not None else None


def endpoint_ports(endpoints: Sequence[str]) -> list[int]:
    """The loopback ports of ``endpoints`` (base URLs); anything not on loopback is refused."""
    ports: list[int] = []
    for url in endpoints:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise ValueError(f"a jailed harness can only be given loopback endpoints, not {url!r}")
        if parts.port not in ports:
            ports.append(parts.port)
    return ports


def forwarder_argv(python: str, ports: Sequence[int], argv: Sequence[str]) -> list[str]:
    maps = [f"{p}={JAIL_DIR}/{p}.sock" for p in ports]
    return [python, "-I", "-S", "-c", FORWARDER, *maps, "--", *argv]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        with contextlib.suppress(ConnectionError, OSError):  # a peer hung up: the relay ends
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def relays(ports: Sequence[int], rollout_id: str) -> AsyncIterator[Path | None]:
    """Unix-socket relays to ``127.0.0.1:<port>`` for one jailed process; yields their directory
    (``None`` when there are no ports). Removed on exit."""
    if not ports:
        yield None
        return
    directory = Path(tempfile.mkdtemp(prefix="cwnet-"))  # short: unix socket paths are <= 107 bytes
    directory.chmod(0o755)
    servers: list[asyncio.base_events.Server] = []

    def handler(port: int) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                writer.close()
                return
            local = int(up_w.get_extra_info("sockname")[1])
            RELAYED[local] = rollout_id
            try:
                await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))
            finally:
                RELAYED.pop(local, None)

        return handle

    try:
        for port in ports:
            path = directory / f"{port}.sock"
            servers.append(await asyncio.start_unix_server(handler(port), path=str(path)))
            os.chmod(path, 0o777)  # the jail's uid connects
        yield directory
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(directory, ignore_errors=True)
