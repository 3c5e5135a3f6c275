"""The proxy alone under load: what it and its capture add per call, its CPU per call, its memory
per live rollout (issue 29).

``bench_scale.py`` measures the whole stack in one process (agents, services, grading and the proxy
share a core), so its latency is queueing and its CPU an upper bound. Here the server runs alone in
its own fresh process and a load process drives N concurrent rollouts against it, so the server's
figures are its own. Three servers under the identical load, each in a fresh process:

* ``direct`` — the engine called directly: an HTTP server that parses the Chat Completions request,
  runs the engine and renders the answer (what an OpenAI-compatible engine server does); no proxy;
* ``nocapture`` — the proxy (routing and secret check, per-rollout bookkeeping, dialect parse and
  render) with a capture store that keeps nothing;
* ``proxy`` — the proxy as a run uses it: each call's record built and appended, one JSON line per
  call flushed to the OS, before the answer goes out.

The engine is :class:`~coworkenv.proxy.backends.simulated.SimulatedBackend` over each rig task's
reference solution, at a fixed time per call (``ttft`` = N / ``--rate``, no per-token time), so every
call's engine time is known exactly: ``added_ms`` = what the client saw − ttft. The load: N rollouts
over the 25 rig tasks of ``bench_scale.py``, each a Chat Completions conversation (system prompt,
request, the task's tools in full JSON Schema) driven to the end of the reference solution (or
``--max-calls``), tool results computed by a real trial of the task in the load process (real payload
sizes; that CPU is the load process's). Rollouts start spread over one ttft, so calls arrive at about
``--rate`` per second: neither process is saturated, and the figures are the server's cost, not a
queue's.

Per server and level:

* ``added_ms`` p50/p90/p99/max — client-observed seconds per call less the engine's; the proxy's own
  addition is ``proxy`` − ``direct`` at each percentile, the capture's ``proxy`` − ``nocapture``;
* ``server_added_ms`` — inside the server, per request: from the app's call (headers parsed) to the
  answer sent, less the engine's time; client, kernel and network excluded — the proxy's own
  addition is ``proxy`` − ``direct`` here too, without the load process's noise;
* ``server_gc`` — the server's cyclic-collector passes under load per generation: count, total
  and longest pause (a long pause stalls every call in flight);
* ``capture_ms`` (``proxy`` only) — inside the proxy, per call: building the record and appending it
  (wall); ``capture_cpu_ms`` the same in thread CPU time (the work alone, without descheduling);
  ``capture_switched_share`` the share of calls during which the kernel switched the thread out
  (involuntary context switches), ``capture_ms_unswitched`` the wall of the others;
* ``server_cpu_ms_per_call`` — the server process's CPU (user + system) over the load / calls;
* ``rss_per_live_rollout_kb`` — (the server's RSS peak under load, the kernel's high-water mark
  ``VmHWM`` — no sampling thread in the server — − its RSS once serving, before any rollout was
  opened) / N; at the peak every rollout is open with about one call in flight;
* ``load_cpu_util`` / ``server_cpu_util`` — CPU seconds / wall seconds of each process (well under
  1.0: not saturated).

``--pin yes`` puts the server on one core and the load process on the other (``both``: each run
unpinned, then pinned), so neither preempts the other: what a deployment with a core per proxy
process sees.

Both processes follow the runner's rule for many live rollouts (:func:`fewer_collections` at
``MANY_ROLLOUTS`` or more), as the proxy inside a run does.

The JSON names the date, commit, machine, load average at start and end, and the command.

    .venv/bin/python benchmarks/bench_proxy_load.py --rollouts 100,1000 --rate 100
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import datetime as dt
import gc
import json
import multiprocessing
import os
import random
import resource
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson
from _machine import provenance  # benchmarks/_machine.py
from bench_scale import machine, percentiles, raise_fd_limit, reset_peak_rss, rig_tasks, rss_kb

from coworkenv.proxy.backends.scripted import ScriptedBackend
from coworkenv.proxy.backends.simulated import SimulatedBackend
from coworkenv.proxy.capture import CapturedCall, CaptureStore
from coworkenv.proxy.dialects.base import Outcome, deliverable
from coworkenv.proxy.dialects.openai_chat import OpenAIChat
from coworkenv.proxy.messages import Message
from coworkenv.proxy.server import ProxyServer
from coworkenv.proxy.sse import JSON_HEADERS
from coworkenv.rollout.harnesses.dialect_agent import chat_payload, json_object
from coworkenv.rollout.loop import ScriptedUser, parse_assistant, post_json, rollout_client, system_prompt
from coworkenv.rollout.runner import MANY_ROLLOUTS, UnassignedBackend, fewer_collections, serve_app
from coworkenv.serve import to_json
from coworkenv.serve.listen import serve_lifespan
from coworkenv.services.trial import Trial, load_task
from coworkenv.spec import TaskSpec

MODES = ("direct", "nocapture", "proxy")


# ---------------------------------------------------------------- the server process


class NullStore(CaptureStore):
    """A capture store that keeps nothing (the ``nocapture`` server)."""

    def create(self, rollout_id: str) -> None:
        return None

    def append(self, call: CapturedCall) -> None:
        return None


class DirectEngine:
    """The engine's own HTTP face: ``POST /d/<i>/v1/chat/completions`` parses the request, runs
    backend ``i`` and renders its answer; nothing recorded, no rollout bookkeeping."""

    def __init__(self, backends: list[SimulatedBackend]) -> None:
        self.backends = backends
        self.dialect = OpenAIChat()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        parsed = self.dialect.parse(orjson.loads(body))
        completion = await self.backends[int(scope["path"].split("/")[2])].complete(parsed.request)
        outcome = Outcome(
            turn=deliverable(completion.turn, completion.text),
            response_id=f"{self.dialect.id_prefix}{random.getrandbits(64):016x}",
            model=parsed.model or completion.model,
            created=int(time.time()),
            prompt_tokens=len(completion.prompt_ids),
            completion_tokens=len(completion.output_ids),
        )
        await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
        await send({"type": "http.response.body", "body": self.dialect.render(parsed, outcome)})


class Timed:
    """Wraps a method of one object, appending each call's wall and thread CPU seconds and the
    thread's involuntary context switches meanwhile to ``into`` (the capture's cost): the wall time
    includes the thread being descheduled, the CPU time is the work alone, and a switch says the
    kernel gave the core to another task mid-step. An ``array`` of doubles, so the measurement adds
    no object for the server's collector."""

    def __init__(self, target: Any, name: str, into: array.array[float]) -> None:
        inner = getattr(target, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            s0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
                into.extend((wall, cpu, resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw - s0))

        setattr(target, name, timed)


class ServerClock:
    """Wraps an ASGI app: per HTTP request, the seconds from the app's call (headers parsed) to its
    return (answer sent) — the server's own handling time, client and network excluded."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.took: list[float] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.took.append(time.perf_counter() - t0)


class GcPauses:
    """Times the cyclic collector's passes in this process (``gc.callbacks``), per generation."""

    def __init__(self) -> None:
        self.passes: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.passes[info["generation"]].append(time.perf_counter() - self._t0)

    def summary(self) -> dict[str, Any]:
        return {
            f"gen{g}": {
                "count": len(xs),
                "total_ms": round(1e3 * sum(xs), 1),
                "max_ms": round(1e3 * max(xs, default=0), 2),
            }
            for g, xs in self.passes.items()
        }


def engines(tasks: list[TaskSpec], n: int, ttft_s: float) -> list[SimulatedBackend]:
    """One engine per rollout over its task's reference solution, as the runner gives each rollout."""
    return [
        SimulatedBackend(ScriptedBackend.from_reference(tasks[i % len(tasks)]), ttft_s=ttft_s, tpot_s=0.0)
        for i in range(n)
    ]


def serve(mode: str, n: int, ttft_s: float, conn: Connection, cpu: int | None = None) -> None:
    """The server process (on CPU ``cpu`` alone when given, before any thread starts): serve, open
    ``n`` rollouts, report, measure until told to stop."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    raise_fd_limit()
    asyncio.run(_serve(mode, n, ttft_s, conn))


async def _serve(mode: str, n: int, ttft_s: float, conn: Connection) -> None:
    tasks = rig_tasks()
    capture_s = array.array("d")  # wall, CPU of each timed step, flat
    proxy: ProxyServer | None = None
    with tempfile.TemporaryDirectory(prefix="coworkenv-proxy-load-") as tmp:
        if mode == "direct":
            app: Any = DirectEngine([])
        else:
            store = CaptureStore(Path(tmp)) if mode == "proxy" else NullStore(Path(tmp))
            proxy = ProxyServer(UnassignedBackend(), store)
            Timed(proxy, "_captured", capture_s)
            Timed(store, "append", capture_s)
            app = proxy.app
        clock = ServerClock(app)
        many = fewer_collections() if n >= MANY_ROLLOUTS else contextlib.nullcontext()
        async with serve_app(clock) as url:
            gc.collect()
            rss_serving = rss_kb()
            backends = engines(tasks, n, ttft_s)
            if proxy is None:
                app.backends = backends
                prefixes = [f"{url}/d/{i}" for i in range(n)]
            else:
                prefixes = [
                    url
                    + proxy.open_rollout(
                        f"load-{i:05d}", task_id=tasks[i % len(tasks)].id, harness="load", backend=b
                    )
                    for i, b in enumerate(backends)
                ]
            rss_opened = rss_kb()
            conn.send({"prefixes": prefixes})
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, conn.recv)  # go
            # the peak from the kernel's high-water mark: a sampling thread would take the GIL
            # from the event loop mid-call and show up in the very latencies measured here
            reset_peak_rss()
            del capture_s[:]
            clock.took.clear()
            many.__enter__()  # as the runner does with this many rollouts live
            pauses = GcPauses()
            gc.callbacks.append(pauses)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            calls = await loop.run_in_executor(None, conn.recv)  # stop, with the calls made
            cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
            gc.callbacks.remove(pauses)
            many.__exit__(None, None, None)
            peak = rss_kb("VmHWM")
    # the two timed steps of one call are adjacent (wall, CPU, switches) triples: sum them pairwise
    wall, cpu, switched = capture_s[0::3], capture_s[1::3], capture_s[2::3]
    per_call = [a + b for a, b in zip(wall[::2], wall[1::2], strict=False)]
    per_call_cpu = [a + b for a, b in zip(cpu[::2], cpu[1::2], strict=False)]
    per_call_sw = [a + b for a, b in zip(switched[::2], switched[1::2], strict=False)]
    kept = [w for w, sw in zip(per_call, per_call_sw, strict=True) if not sw]
    conn.send(
        {
            "server_cpu_s": round(cpu_s, 3),
            "server_cpu_util": round(cpu_s / wall_s, 3),
            "server_cpu_ms_per_call": round(1e3 * cpu_s / max(1, calls), 3),
            "rss_serving_mb": round(rss_serving / 1024, 1),
            "rss_opened_mb": round(rss_opened / 1024, 1),
            "rss_peak_mb": round(peak / 1024, 1),
            "rss_per_live_rollout_kb": round((peak - rss_serving) / n, 1),
            "rss_per_open_rollout_kb": round((rss_opened - rss_serving) / n, 1),
            "server_added_ms": percentiles([1e3 * (t - ttft_s) for t in clock.took]),
            "server_gc": pauses.summary(),
            "capture_ms": percentiles([1e3 * s for s in per_call]) if mode == "proxy" else None,
            "capture_cpu_ms": percentiles([1e3 * s for s in per_call_cpu]) if mode == "proxy" else None,
            # the wall tail split: calls during which the kernel switched the thread out, and the
            # wall of the others (what the capture takes when it keeps its core)
            "capture_switched_share": round(sum(1 for x in per_call_sw if x) / max(1, len(per_call_sw)), 4)
            if mode == "proxy"
            else None,
            "capture_ms_unswitched": percentiles([1e3 * s for s in kept])
            if mode == "proxy" and kept
            else None,
        }
    )


# ---------------------------------------------------------------- the load process


async def rollout(
    prefix: str, spec: TaskSpec, index: int, *, ttft_s: float, max_calls: int, added: list[float]
) -> int:
    """One conversation through ``prefix``; returns the calls made."""
    await asyncio.sleep(random.Random(index).uniform(0, ttft_s))  # spread the starts over one ttft
    loaded = load_task(spec)
    trial = Trial(loaded, f"load-{index}")
    schemas = [t.openai_schema()["function"] for t in loaded.tools.values()]
    user = ScriptedUser(spec.user_sim) if spec.user_sim else None
    messages = [
        Message(role="system", content=system_prompt(spec)),
        Message(role="user", content=spec.request),
    ]
    calls = 0
    async with rollout_client(timeout=None) as client:
        while calls < max_calls:
            payload = chat_payload("policy", messages, schemas)
            t0 = time.perf_counter()
            body = await post_json(client, prefix + "/v1/chat/completions", payload, 600.0)
            added.append(time.perf_counter() - t0 - ttft_s)
            calls += 1
            turn = parse_assistant(body)
            messages.append(turn)
            if turn.tool_calls:
                for call in turn.tool_calls:
                    result = to_json(trial.call(call.name, json_object(call.arguments)).body).decode()
                    tool = Message(role="tool", content=result, tool_call_id=call.id, name=call.name)
                    messages.append(tool)
                continue
            if user is not None and "?" in turn.content and not user.exhausted:
                messages.append(Message(role="user", content=user.reply(turn.content)))
                continue
            break
    return calls


async def load(prefixes: list[str], ttft_s: float, max_calls: int) -> tuple[int, list[float], float, float]:
    tasks = rig_tasks()
    added: list[float] = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    many = fewer_collections() if len(prefixes) >= MANY_ROLLOUTS else contextlib.nullcontext()
    with many:  # one process plays many harnesses: its collector must not pause them all
        counts = await asyncio.gather(
            *(
                rollout(p, tasks[i % len(tasks)], i, ttft_s=ttft_s, max_calls=max_calls, added=added)
                for i, p in enumerate(prefixes)
            )
        )
    return sum(counts), added, time.process_time() - cpu0, time.perf_counter() - wall0


async def _keepalive(sock: Any, repeats: int) -> list[float]:
    """Sequential POSTs on one kept-alive connection to a trivial app served on ``sock``: ms each."""
    import uvicorn

    async def ok(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
            return
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
        await send({"type": "http.response.body", "body": b"{}"})

    server = uvicorn.Server(uvicorn.Config(ok, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/x"
    took: list[float] = []
    async with rollout_client(timeout=10) as client:
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            await client.post(url, content=b"{}" * 1000)
            took.append(1e3 * (time.perf_counter() - t0))
    server.should_exit = True
    await task
    return took[1:]  # the first opens the connection


def keepalive(repeats: int) -> dict[str, Any]:
    """The delayed-ACK stall that ``serve/listen.py`` removes: the same server on a listening socket
    made as before (protocol 0: asyncio leaves Nagle on for accepted connections) and on ours."""
    import socket

    from coworkenv.serve.listen import listen_socket

    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    plain.bind(("127.0.0.1", 0))
    return {
        "requests": repeats,
        "before_ms": percentiles(asyncio.run(_keepalive(plain, repeats))),
        "listen_socket_ms": percentiles(asyncio.run(_keepalive(listen_socket(), repeats))),
    }


def level(mode: str, n: int, rate: float, max_calls: int, pin: bool = False) -> dict[str, Any]:
    """One server under one load. ``pin``: the server on the first CPU this process may use, the
    load process on the second (each keeps its core: the other process never preempts it)."""
    ttft_s = n / rate
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    allowed = os.sched_getaffinity(0)
    first, second = sorted(allowed)[:2] if pin else (None, None)
    server = ctx.Process(target=serve, args=(mode, n, ttft_s, child, first), daemon=True)
    server.start()
    if second is not None:
        os.sched_setaffinity(0, {second})
    try:
        prefixes = parent.recv()["prefixes"]
        parent.send("go")
        gc.collect()
        calls, added, load_cpu_s, wall_s = asyncio.run(load(prefixes, ttft_s, max_calls))
        parent.send(calls)
        stats = parent.recv()
    finally:
        os.sched_setaffinity(0, allowed)
        server.join(timeout=30)
        if server.is_alive():
            server.kill()
    return {
        "mode": mode,
        "pinned": pin,
        "rollouts": n,
        "ttft_ms": round(1e3 * ttft_s, 1),
        "calls": calls,
        "wall_s": round(wall_s, 2),
        "calls_per_s": round(calls / wall_s, 1),
        "added_ms": percentiles([1e3 * a for a in added]),
        "load_cpu_util": round(load_cpu_s / wall_s, 3),
        **stats,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rollouts", default="100,1000", help="levels, comma-separated (concurrent rollouts)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"servers, comma-separated: {', '.join(MODES)}")
    ap.add_argument("--rate", type=float, default=100.0, help="model calls per second (ttft = N / rate)")
    ap.add_argument("--max-calls", type=int, default=20, help="model calls per rollout at most")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each (mode, level), reported apart")
    ap.add_argument(
        "--pin",
        default="no",
        choices=("no", "yes", "both"),
        help="pin the server and the load process to a core each (both: every run unpinned, then pinned)",
    )
    ap.add_argument(
        "--keepalive", type=int, default=0, help="also time N requests on one kept-alive connection"
    )
    ap.add_argument("--out", type=Path, default=None, help="default results/proxy-load-<date>.json")
    args = ap.parse_args()
    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    fd_limit = raise_fd_limit()
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise SystemExit(f"--modes: unknown {unknown}; use {', '.join(MODES)}")
    if args.pin != "no" and len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("--pin: needs two CPUs this process may run on (see `taskset -p $$`)")
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for n in (int(x) for x in args.rollouts.split(",") if x and x != "0"):
        for repeat in range(args.repeats):
            for mode in modes:  # interleaved, so a drift in the machine touches every mode alike
                for pin in {"no": (False,), "yes": (True,), "both": (False, True)}[args.pin]:
                    row = level(mode, n, args.rate, args.max_calls, pin) | {"repeat": repeat}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    doc = {
        **provenance("proxy-load", started),
        "setup": {
            "tasks": len(rig_tasks()),
            "rate_calls_per_s": args.rate,
            "max_calls": args.max_calls,
            "fd_limit": fd_limit,
            "what": "the server alone in a fresh process; a load process drives Chat Completions rollouts",
        },
        "machine": machine(load_start),
        "levels": rows,
    }
    if args.keepalive:
        doc["keepalive"] = keepalive(args.keepalive)
    out = args.out or Path(__file__).parent / "results" / f"proxy-load-{started.date().isoformat()}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
