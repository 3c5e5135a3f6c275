"""Proxy overhead: coworkenv's capturing proxy vs LiteLLM's proxy, in front of the same null upstream.

Processes (all on 127.0.0.1): a *null upstream* (a minimal asyncio HTTP server answering OpenAI Chat
Completions at once: streamed as 20 one-token chunks, or as one JSON body), the proxy under test
(one uvicorn process), and a separate load-generator process speaking raw HTTP/1.1 keep-alive.
Every request is ``POST /v1/chat/completions`` with a small chat (system, user, one tool), with
``stream: true`` except on the ``*/json`` sides. Sides:

* ``ours/json`` vs ``litellm/json`` — LIKE FOR LIKE, THE HEADLINE COMPARISON: the client asks for
  one JSON body (``stream: false``), each proxy asks the null upstream for one JSON body and
  returns one JSON body; the same access logging on both (uvicorn's access log, see below);

* ``ours/http``         — the goals' side: our proxy forwarding over HTTP with ``PassthroughBackend``
  (``stream=True``) to the null upstream, which streams its 20 chunks to it exactly as it does to
  LiteLLM; the proxy assembles them, records the call, and writes the whole turn to the client at
  once (buffered pseudo-streaming) — NOT like for like with ``litellm``, which relays each chunk;
* ``litellm``           — ``litellm --config`` (litellm[proxy], its own venv) forwarding to the same
  null upstream, which streams its 20 chunks through LiteLLM to the client, chunk by chunk;
* ``ours/http-json``    — context: the same, the upstream asked for one JSON body (``stream=False``);
* ``ours/inproc``       — context: our proxy with the null upstream as an in-process Backend (20
  tokens at once): the proxy's own cost, without an upstream client;
* ``ours/inproc+fsync`` — context: ``ours/inproc`` with ``CaptureStore(fsync=True)`` (an fsync per record);
* ``direct``            — the null upstream itself (the baseline for added latency).

Recording is on for every ``ours`` side, into the real :class:`CaptureStore` (default: a flush per
record, no fsync — survives a proxy crash, not a power cut). Measured per side: proxy CPU per
streamed request (``utime+stime`` of the proxy process and its children over the load window /
completed requests) at 64 clients, throughput at 64 clients, and p50 latency with one client (added
latency = p50(side) − p50(direct)). Other work on the machine inflates req/s differences most; the
load average is recorded at the start of each side.

Logging: our proxy runs with uvicorn's access log on (``--access-log on``, the default, as LiteLLM's
uvicorn has it) or off; each side's result counts the access-log lines its process wrote
(``access_log_lines``), so the JSON shows whether both sides logged alike.

A side whose load window completed fewer than ``--min-requests`` requests has its window extended
(up to 10× ``--seconds``); a side still short is marked ``"reliable": false``. (A quick run once
recorded 770 ms of LiteLLM CPU per request from a 1-second window in which LiteLLM completed one
request under 64 clients: the CPU of warming up spread over one request, not a per-request cost.)

Run:  .venv/bin/python benchmarks/bench_proxy.py [--litellm PATH]   (or COWORKENV_BENCH_LITELLM=PATH)
      [--seconds 5] [--clients 64] [--latency-n 400] [--sides ours/http,litellm,...] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Any

from _machine import cpu_model  # benchmarks/_machine.py

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
LOCAL = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TOKENS = 20
MASTER_KEY = "sk-bench-" + os.urandom(16).hex()  # LiteLLM refuses to start without one; ours ignore it
LITELLM_ENV = "COWORKENV_BENCH_LITELLM"  # the litellm CLI in its own venv; no machine default
BODY = {
    "model": "null-model",
    "stream": True,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Say hello twenty times."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a shell command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ],
}


# ---------------------------------------------------------------- utilities


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        port: int = s.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d.name))
    return kids


def tree_cpu_s(pid: int) -> float:
    """utime + stime of a process and all its live descendants (seconds)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / CLK_TCK
            todo.extend(_children(p))
    return total


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with rc={proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((LOCAL, port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s}s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- the null upstream (own process)


def _chunk(i: int) -> bytes:
    delta = {"role": "assistant", "content": ""} if i < 0 else {"content": f"tok{i} "}
    obj = {
        "id": "chatcmpl-null",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "null-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _null_responses() -> tuple[bytes, bytes]:
    frames = [_chunk(-1), *(_chunk(i) for i in range(TOKENS))]
    final = {
        "id": "chatcmpl-null",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "null-model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": TOKENS, "total_tokens": 30 + TOKENS},
    }
    frames += [b"data: " + json.dumps(final).encode() + b"\n\n", b"data: [DONE]\n\n"]
    stream = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    for f in frames:  # one HTTP chunk per SSE event, as token streaming servers send them
        stream += f"{len(f):x}\r\n".encode() + f + b"\r\n"
    stream += b"0\r\n\r\n"
    text = "".join(f"tok{i} " for i in range(TOKENS))
    body = json.dumps(
        {
            "id": "chatcmpl-null",
            "object": "chat.completion",
            "created": 0,
            "model": "null-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 30, "completion_tokens": TOKENS, "total_tokens": 30 + TOKENS},
        }
    ).encode()
    plain = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    )
    return stream, plain


class _NullProtocol(asyncio.Protocol):
    STREAM, PLAIN = _null_responses()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].lower()
            n = 0
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    n = int(line[15:])
            if len(self.buf) < head_end + 4 + n:
                return
            body = self.buf[head_end + 4 : head_end + 4 + n]
            self.buf = self.buf[head_end + 4 + n :]
            stream = b'"stream":true' in body.replace(b" ", b"")
            self.transport.write(self.STREAM if stream else self.PLAIN)


def _serve_null(port: int) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_NullProtocol, LOCAL, port)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    asyncio.run(main())


# ---------------------------------------------------------------- our proxy (own process)


def _serve_ours(  # noqa: PLR0917
    port: int, mode: str, upstream_port: int, capture: str, prefix_file: str, access_log: bool = False
) -> None:
    import uvicorn

    from coworkenv.proxy.backends.base import Completion
    from coworkenv.proxy.capture import CaptureStore
    from coworkenv.proxy.messages import AssistantTurn, ChatRequest
    from coworkenv.proxy.server import ProxyServer

    text = "".join(f"tok{i} " for i in range(TOKENS))
    done = Completion(
        turn=AssistantTurn(content=text),
        text=text,
        prompt_ids=tuple(range(30)),
        output_ids=tuple(range(TOKENS)),
        logprobs=(-0.1,) * TOKENS,
        model="null-model",
    )

    class NullBackend:
        name = "null"
        policy_version = "0"

        async def complete(self, request: ChatRequest) -> Completion:
            return done

    backend: Any = NullBackend()
    if mode.startswith("http") or mode == "json":
        from coworkenv.proxy.backends.passthrough import PassthroughBackend

        backend = PassthroughBackend(
            f"http://{LOCAL}:{upstream_port}/v1", model="null-model", api_key="x", stream=mode == "http"
        )
    store = CaptureStore(Path(capture), fsync=mode == "inproc+fsync")
    proxy = ProxyServer(backend, store)
    Path(prefix_file).write_text(proxy.open_rollout("bench"))
    uvicorn.run(
        proxy.app,
        host=LOCAL,
        port=port,
        log_level="info" if access_log else "warning",
        access_log=access_log,
        loop="uvloop",
        http="httptools",
        lifespan="on",
    )


# ---------------------------------------------------------------- load generator (own process)


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes, expect: bytes = b"[DONE]"
) -> bool:
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    ok = head[9:12] == b"200"
    low = head.lower()
    if b"content-length:" in low:
        n = int(low.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        body = await reader.readexactly(n)
    else:  # chunked
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            parts.append(await reader.readexactly(size + 2))
            if size == 0:
                break
        body = b"".join(parts)
    return ok and expect in body


async def _load(cfg: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps(cfg["body"]).encode()
    expect = str(cfg.get("expect", "[DONE]")).encode()
    req = (
        f"POST {cfg['path']} HTTP/1.1\r\nHost: {LOCAL}:{cfg['port']}\r\n"
        f"Authorization: Bearer {cfg['auth']}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    out: dict[str, Any] = {}
    # 1. latency with one client
    reader, writer = await asyncio.open_connection(LOCAL, cfg["port"])
    for _ in range(cfg["warmup_n"]):
        await _request(reader, writer, req, expect)
    samples, bad = [], 0
    for _ in range(cfg["latency_n"]):
        t0 = time.perf_counter_ns()
        ok = await _request(reader, writer, req, expect)
        samples.append(time.perf_counter_ns() - t0)
        bad += not ok
    writer.close()
    samples.sort()
    out["latency"] = {
        "p50_ms": statistics.median(samples) / 1e6,
        "p90_ms": samples[len(samples) * 9 // 10] / 1e6,
        "n": len(samples),
        "errors": bad,
    }
    # 2. throughput and CPU per request with many clients
    state = {"phase": 0, "ok": 0, "bad": 0}

    async def client() -> None:
        r, w = await asyncio.open_connection(LOCAL, cfg["port"])
        try:
            while state["phase"] < 2:
                ok = await _request(r, w, req, expect)
                if state["phase"] == 1:
                    state["ok" if ok else "bad"] += 1
        finally:
            w.close()

    tasks = [asyncio.create_task(client()) for _ in range(cfg["clients"])]
    await asyncio.sleep(cfg["warmup_s"])
    pids = cfg["cpu_pids"]
    cpu0 = [tree_cpu_s(p) for p in pids]
    me0, t0 = time.process_time(), time.perf_counter()
    state["phase"] = 1
    await asyncio.sleep(cfg["seconds"])
    # too few completed requests make CPU per request meaningless: extend the window (bounded)
    deadline = time.perf_counter() + 9 * cfg["seconds"]
    while state["ok"] < cfg.get("min_requests", 0) and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    state["phase"] = 2
    cpu1 = [tree_cpu_s(p) for p in pids]
    me1, t1 = time.process_time(), time.perf_counter()
    await asyncio.gather(*tasks, return_exceptions=True)
    wall, n = t1 - t0, max(state["ok"], 1)
    out["throughput"] = {
        "requests": state["ok"],
        "errors": state["bad"],
        "wall_s": wall,
        "rps": state["ok"] / wall,
        "proxy_cpu_per_req_ms": 1e3 * (cpu1[0] - cpu0[0]) / n,
        "proxy_util": (cpu1[0] - cpu0[0]) / wall,
        "upstream_util": (cpu1[1] - cpu0[1]) / wall if len(pids) > 1 else None,
        "loadgen_util": (me1 - me0) / wall,
        "reliable": state["ok"] >= cfg.get("min_requests", 0),
    }
    return out


def loadgen(cfg: dict[str, Any]) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, __file__, "--_loadgen", json.dumps(cfg)], capture_output=True, text=True, check=False
    )
    if run.returncode != 0:
        raise RuntimeError(f"load generator failed:\n{run.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def _loadgen_main(cfg_json: str) -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    print(json.dumps(asyncio.run(_load(json.loads(cfg_json)))))


# ---------------------------------------------------------------- sides


def measure(o: argparse.Namespace, side: str, up_port: int, up_pid: int, tmp: Path) -> dict[str, Any]:
    loadavg = os.getloadavg()
    port = free_port()
    env = {**os.environ}
    log = open(tmp / f"{side.replace('/', '_')}.log", "wb")  # noqa: SIM115
    if side == "direct":
        proc, path, port = None, "/v1/chat/completions", up_port
        pids = [up_pid]
    elif side.startswith("ours/"):
        mode = side.split("/", 1)[1]
        prefix_file = tmp / f"prefix-{mode}"
        capture = tmp / f"capture-{mode.replace('+', '_')}"
        cmd = [
            sys.executable,
            __file__,
            "--_serve",
            json.dumps([port, mode, up_port, str(capture), str(prefix_file), o.access_log == "on"]),
        ]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_port(port, proc, side)
        path = prefix_file.read_text() + "/v1/chat/completions"
        pids = [proc.pid, up_pid]
    else:  # litellm, litellm/json
        cfg = tmp / "litellm.yaml"
        cfg.write_text(
            "model_list:\n  - model_name: null-model\n    litellm_params:\n      model: openai/null-model\n"
            f"      api_base: http://{LOCAL}:{up_port}/v1\n      api_key: x\n"
            "litellm_settings:\n  telemetry: false\n"
        )
        env.update(
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            LITELLM_LOG="ERROR",
            DISABLE_SCHEMA_UPDATE="True",
            LITELLM_MASTER_KEY=MASTER_KEY,
        )
        cmd = [
            str(o.litellm),
            "--config",
            str(cfg),
            "--host",
            LOCAL,
            "--port",
            str(port),
            "--num_workers",
            "1",
        ]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_port(port, proc, "litellm", timeout_s=300)
        except RuntimeError:
            log.flush()
            print((tmp / "litellm.log").read_text()[-3000:], file=sys.stderr)
            raise
        path = "/v1/chat/completions"
        pids = [proc.pid, up_pid]
    try:
        json_side = side.endswith("/json")
        result = loadgen(
            {
                "port": port,
                "path": path,
                "body": {**BODY, "stream": False} if json_side else BODY,
                "expect": '"choices"' if json_side else "[DONE]",
                "min_requests": o.min_requests,
                "clients": o.clients,
                "seconds": o.seconds,
                "warmup_s": o.warmup_s,
                "warmup_n": 50,
                "latency_n": o.latency_n,
                "cpu_pids": pids,
                "auth": MASTER_KEY,
            }
        )
        result["loadavg_at_start"] = loadavg
        if side.startswith("ours/"):
            from coworkenv.proxy.capture import read_calls

            calls, problems = read_calls(capture / "bench.calls.jsonl")
            result["recorded"] = {
                "calls": len(calls),
                "problems": len(problems),
                "errors": sum(c.error is not None for c in calls),
            }
    finally:
        if proc is not None:
            stop(proc)
        log.close()
    text = (tmp / f"{side.replace('/', '_')}.log").read_text(errors="replace")
    result["access_log_lines"] = sum(1 for ln in text.splitlines() if '"POST /' in ln)
    return result


def machine(loadavg: tuple[float, float, float]) -> dict[str, Any]:
    model = cpu_model()
    versions = {}
    for pkg in ("uvicorn", "pydantic", "uvloop", "httptools", "httpx", "orjson"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[pkg] = metadata.version(pkg)
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "loadavg": loadavg,
    }


def litellm_version(exe: Path) -> str | None:
    py = exe.parent / "python"
    run = subprocess.run(
        [str(py), "-c", "from importlib.metadata import version; print(version('litellm'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return run.stdout.strip() or None


def report(o: argparse.Namespace, results: dict[str, Any], meta: dict[str, Any]) -> str:
    base = results["direct"]["latency"]["p50_ms"]
    lite = results.get("litellm")
    lines = [
        f"# Proxy benchmark ({meta['date']}{', quick' if o.quick else ''})",
        "",
        f"Machine: {meta['machine']['nproc']} cores, {meta['machine']['cpu_model']}; "
        f"python {meta['machine']['python']}; LiteLLM {meta.get('litellm_version') or 'not run'}.",
        f"Load average at start: {', '.join(f'{x:.1f}' for x in meta['machine']['loadavg'])} "
        "(other work on the machine lowers every side's req/s; CPU per request is the stable figure).",
        f"Load: {o.clients} clients × {o.seconds}s, streamed Chat Completions (20 one-token chunks); "
        f"latency: 1 client × {o.latency_n} requests.",
        "",
        "| side | proxy CPU / streamed req | req/s | p50 latency (1 client) | added p50 | recorded |",
        "|---|---|---|---|---|---|",
    ]
    for side, r in results.items():
        t, lat = r["throughput"], r["latency"]
        rec = r.get("recorded")
        added = "–" if side == "direct" else f"{lat['p50_ms'] - base:+.3f} ms"
        recorded = f"{rec['calls']} ({rec['errors']} err)" if rec else "–"
        lines.append(
            f"| {side} | {t['proxy_cpu_per_req_ms']:.3f} ms | {t['rps']:.0f} | {lat['p50_ms']:.3f} ms | "
            f"{added} | {recorded} |"
        )
    ours_json, lite_json = results.get("ours/json"), results.get("litellm/json")
    if ours_json and lite_json:
        a, b = ours_json["throughput"], lite_json["throughput"]
        logs = f"{ours_json.get('access_log_lines', '?')} vs {lite_json.get('access_log_lines', '?')}"
        sure = a.get("reliable", True) and b.get("reliable", True)
        lines += [
            "",
            "Like for like (ours/json vs litellm/json: one JSON body in and out on both sides, access "
            f"log lines {logs}): "
            f"proxy CPU per request {a['proxy_cpu_per_req_ms']:.3f} vs {b['proxy_cpu_per_req_ms']:.3f} ms "
            f"({b['proxy_cpu_per_req_ms'] / max(a['proxy_cpu_per_req_ms'], 1e-9):.1f}× less), "
            f"{a['rps']:.0f} vs {b['rps']:.0f} req/s" + ("" if sure else " — UNRELIABLE: too few requests"),
        ]
    lines += [
        "",
        "Streaming sides are not like for like: ours/http buffers the turn and writes it once, litellm "
        "relays each of the 20 chunks.",
        "",
        "Goals (ours/http: pass-through over HTTP to the null upstream, recording on):",
    ]
    ours = results.get("ours/http")
    if ours:
        cpu = ours["throughput"]["proxy_cpu_per_req_ms"]
        added = ours["latency"]["p50_ms"] - base
        lines.append(
            f"- proxy CPU per streamed request ≤ 1 ms: {cpu:.3f} ms — {'PASS' if cpu <= 1 else 'FAIL'}"
        )
        lines.append(f"- added p50 latency ≤ 1 ms: {added:+.3f} ms — {'PASS' if added <= 1 else 'FAIL'}")
        if lite:
            ratio = ours["throughput"]["rps"] / max(lite["throughput"]["rps"], 1e-9)
            cpu_ratio = lite["throughput"]["proxy_cpu_per_req_ms"] / max(cpu, 1e-9)
            lines.append(
                f"- throughput ≥ 20× LiteLLM: {ratio:.1f}× — {'PASS' if ratio >= 20 else 'FAIL'} "
                f"(CPU per request: {cpu_ratio:.0f}× less than LiteLLM)"
            )
    inproc = results.get("ours/inproc")
    if inproc:
        lines.append(
            f"- context: the proxy's own share (ours/inproc, no upstream client): "
            f"{inproc['throughput']['proxy_cpu_per_req_ms']:.3f} ms CPU, "
            f"{inproc['latency']['p50_ms'] - base:+.3f} ms p50"
        )
    lines += ["", "Notes:"]
    for side, r in results.items():
        t = r["throughput"]
        lines.append(
            f"- {side}: proxy util {t['proxy_util']:.2f} cores, loadgen util {t['loadgen_util']:.2f}"
            + (f", upstream util {t['upstream_util']:.2f}" if t.get("upstream_util") is not None else "")
            + f", errors {t['errors']}, load average at start {r['loadavg_at_start'][0]:.1f}"
            + f", {t['requests']} requests in the window"
            + ("" if t.get("reliable", True) else " (UNRELIABLE: fewer than --min-requests)")
            + f", access log lines {r.get('access_log_lines', '?')}"
        )
    return "\n".join(lines) + "\n"


def _options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--litellm",
        type=Path,
        default=Path(os.environ[LITELLM_ENV]) if os.environ.get(LITELLM_ENV) else None,
        help=f"litellm CLI in its own venv (default ${LITELLM_ENV}; none: the litellm side is skipped)",
    )
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--min-requests", dest="min_requests", type=int, default=200)
    ap.add_argument("--access-log", dest="access_log", choices=("on", "off"), default="on")
    ap.add_argument("--warmup-s", dest="warmup_s", type=float, default=1.0)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--latency-n", dest="latency_n", type=int, default=400)
    ap.add_argument(
        "--sides",
        default="direct,ours/json,litellm/json,ours/http,litellm,ours/http-json,ours/inproc,ours/inproc+fsync",
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--quick", action="store_true", help="small samples (a smoke test, not a result)")
    ap.add_argument("--_loadgen", help=argparse.SUPPRESS)
    ap.add_argument("--_serve", help=argparse.SUPPRESS)
    ap.add_argument("--_null", type=int, help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> None:
    o = _options()
    if o._loadgen:
        _loadgen_main(o._loadgen)
        return
    if o._serve:
        _serve_ours(*json.loads(o._serve))
        return
    if o._null:
        _serve_null(o._null)
        return
    if o.quick:
        o.seconds, o.latency_n, o.warmup_s = 1.0, 100, 0.3
    sides = [s for s in o.sides.split(",") if s]
    if any(x.startswith("litellm") for x in sides) and (o.litellm is None or not o.litellm.exists()):
        where = f"at {o.litellm}" if o.litellm else f"(pass --litellm PATH or set {LITELLM_ENV})"
        print(f"LiteLLM not found {where}; skipping it (install litellm[proxy] into its own venv)")
        sides = [x for x in sides if not x.startswith("litellm")]
    load_at_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    up_port = free_port()
    null = subprocess.Popen([sys.executable, __file__, "--_null", str(up_port)])
    results: dict[str, Any] = {}
    try:
        wait_port(up_port, null, "null upstream")
        for side in sides:
            print(f"measuring {side} ...", flush=True)
            results[side] = measure(o, side, up_port, null.pid, tmp)
            t, lat = results[side]["throughput"], results[side]["latency"]
            print(
                f"  {t['rps']:.0f} req/s, {t['proxy_cpu_per_req_ms']:.3f} ms CPU/req, "
                f"p50 {lat['p50_ms']:.3f} ms",
                flush=True,
            )
    finally:
        stop(null)
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {
        "date": date.today().isoformat(),
        "command": "benchmarks/bench_proxy.py " + " ".join(sys.argv[1:]),
        "machine": machine(load_at_start),
        "litellm_version": litellm_version(o.litellm)
        if o.litellm is not None and any(x.startswith("litellm") for x in sides)
        else None,
        "options": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(o).items() if not k.startswith("_")
        },
    }
    md = report(o, results, meta)
    print(md)
    o.out.mkdir(parents=True, exist_ok=True)
    stem = f"proxy-{meta['date']}" + ("-quick" if o.quick else "")
    (o.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (o.out / f"{stem}.md").write_text(md)
    print(f"wrote {o.out / stem}.json and .md")


if __name__ == "__main__":
    main()
