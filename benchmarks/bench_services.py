"""Side-by-side benchmark: coworkenv's services vs Claw-Eval's own mock services, in one run.

Both sides serve the same Claw-Eval task (T160_vip_ticket_escalation: helpdesk, crm, gmail,
contacts, kb) from the same fixture files and answer the same call sequence. Measured:

1. trial start  — Claw-Eval: spawn the 5 server processes until every health check answers, and
   their summed RSS; coworkenv: ``Host.open_trial`` in-process and ``POST /trials`` over HTTP.
2. reset        — Claw-Eval: ``POST /<svc>/reset`` on all 5 with a warm client; coworkenv:
   ``Trial.reset()`` in-process and ``POST /t/{tid}/reset`` over HTTP.
3. throughput   — ``helpdesk_get_ticket`` from 64 keep-alive clients for N seconds against one
   uvicorn server process per side; server CPU per call from /proc/<pid>/stat.
4. memory       — 1,000 live 5-service trials (each with a few writes) in one fresh process.

Claw-Eval code is never vendored: pass ``--claw-eval DIR`` (a checkout holding ``mock_services/``);
without it the Claw-Eval side is skipped with a message. Its servers are launched exactly as
Claw-Eval's ``ServiceManager`` does (its ``server.py`` module, its uvicorn defaults, fixtures via
``<SVC>_FIXTURES``), except that they bind 127.0.0.1 on free ports instead of 0.0.0.0. Both sides run
under the same interpreter with the same uvicorn settings.

Run:  .venv/bin/python benchmarks/bench_services.py --claw-eval DIR   (or COWORKENV_BENCH_CLAW_EVAL=DIR)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import yaml
from _machine import cpu_model  # benchmarks/_machine.py

TASK_ID = "T160_vip_ticket_escalation"
SERVICES = ("helpdesk", "crm", "gmail", "contacts", "kb")
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
# Claw-Eval's task data (COWORKENV_CLAW_EVAL, as for the tests), else the shared/ folder beside the repo
DEFAULT_TASK_DIRS = tuple(
    Path(d) / TASK_ID
    for d in (
        os.environ.get("COWORKENV_CLAW_EVAL"),
        Path(__file__).resolve().parents[2] / "shared" / "claw-eval" / "tasks",
    )
    if d
)
LOCAL = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")

_DRAFT_CUSTOMER = {
    "to": "zhao@wantong-logistics.com",
    "subject": "Re: URGENT: System unavailable",
    "body": "Director Zhao, we confirmed the database connection pool issue (TK-1401); our senior DBA "
    "Ma Qiang is on it and we expect resolution within the 4-hour SLA.",
    "reply_to_message_id": "msg_1401",
}
_DRAFT_INTERNAL = {
    "to": "wangming@company.com, zhaolei@company.com",
    "subject": "P0 escalation: TK-1401 Wantong Logistics (VIP)",
    "body": "TK-1401 critical: DB connection pool exhaustion. Ma Qiang (DBA) assigned; KB-1401 steps: "
    "check connections, kill idle, restart pool, expand max_connections. SLA 1h response / 4h fix.",
}
WRITES: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "helpdesk_update_ticket",
        {"ticket_id": "TK-1401", "priority": "critical", "tags": ["vip", "escalated"]},
    ),
    ("gmail_save_draft", _DRAFT_CUSTOMER),
    ("gmail_save_draft", _DRAFT_INTERNAL),
)
# The task's reference solution (task.yaml ``reference_solution``) plus one ticket update: 13 calls.
REFERENCE_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("helpdesk_list_tickets", {}),
    ("helpdesk_get_ticket", {"ticket_id": "TK-1401"}),
    ("crm_get_customer", {"customer_id": "CUS-1401"}),
    ("gmail_list_messages", {}),
    ("gmail_get_message", {"message_id": "msg_1401"}),
    ("kb_search", {"query": "database connection pool"}),
    ("kb_get_article", {"article_id": "KB-1401"}),
    ("contacts_search", {"query": "Ma Qiang"}),
    ("contacts_search", {"query": "Wang Ming"}),
    ("contacts_search", {"query": "Zhao Lei"}),
    *WRITES,
)
HOT_CALL = ("helpdesk_get_ticket", {"ticket_id": "TK-1401"})


# ---------------------------------------------------------------- small utilities


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        port: int = s.getsockname()[1]
        return port


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (seconds, CLK_TCK resolution)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def stats_ms(samples_ns: list[int]) -> dict[str, float]:
    xs = sorted(samples_ns)
    return {
        "median_ms": statistics.median(xs) / 1e6,
        "p10_ms": xs[len(xs) // 10] / 1e6,
        "p90_ms": xs[(len(xs) * 9) // 10] / 1e6,
        "n": len(xs),
    }


def timed(fn: Callable[[], Any], n: int, before: Callable[[], Any] | None = None) -> dict[str, float]:
    samples = []
    for _ in range(n):
        if before is not None:
            before()
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return stats_ms(samples)


def wait_http(
    probe: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, timeout_s: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with rc={proc.returncode}; see its stderr above")
        if probe():
            return
        time.sleep(0.005)
    raise RuntimeError(f"{what} did not answer within {timeout_s}s")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# ---------------------------------------------------------------- the task


@dataclass(frozen=True)
class Task:
    """T160 as both sides see it: fixture files, Claw-Eval routes, and the coworkenv spec data."""

    dir: Path
    raw: dict[str, Any]
    fixture_files: dict[str, Path]  # service -> fixture file
    health: dict[str, str]  # service -> health-check path (POST)
    routes: dict[str, tuple[str, str]]  # tool -> (service, path)

    @classmethod
    def load(cls, task_dir: Path) -> Task:
        raw = yaml.safe_load((task_dir / "task.yaml").read_text())
        fixture_files, health = {}, {}
        for svc in raw["services"]:
            (env_value,) = svc["env"].values()
            fixture_files[svc["name"]] = task_dir / "fixtures" / svc["name"] / Path(env_value).name
            health[svc["name"]] = "/" + svc["health_check"].split("/", 3)[3]
        routes = {}
        for ep in raw["tool_endpoints"]:
            path = "/" + ep["url"].split("/", 3)[3]
            routes[ep["tool_name"]] = (path.split("/")[1], path)
        return cls(task_dir, raw, fixture_files, health, routes)

    def mock_today(self) -> date:
        """The newest email's date: the day the scenario happens."""
        emails = json.loads(self.fixture_files["gmail"].read_text())
        return max(datetime.fromisoformat(e["date"].replace("Z", "+00:00")).date() for e in emails)

    def spec_data(self) -> dict[str, Any]:
        raw = self.raw
        return {
            "id": raw["task_id"],
            "name": raw["task_name"],
            "category": raw["category"],
            "difficulty": raw["difficulty"],
            "mock_today": self.mock_today().isoformat(),
            "request": raw["prompt"]["text"],
            "services": {s: {p.name: json.loads(p.read_text())} for s, p in self.fixture_files.items()},
            "tools": [t["name"] for t in raw["tools"]],
            "source": "claw-eval",
        }


def cowork_spec(task: Task) -> tuple[Any, str]:
    """T160 as a TaskSpec, through coworkenv's Claw-Eval importer when it is there."""
    from coworkenv.spec import TaskSpec

    try:
        from coworkenv.importers.claw_eval import import_task
    except ImportError:
        return TaskSpec.model_validate(task.spec_data()), "built by the benchmark from task.yaml"
    spec, _notes = import_task(task.dir)
    return spec, "coworkenv.importers.claw_eval.import_task"


def cowork_host(task: Task) -> Any:
    from coworkenv.services.trial import Host

    host = Host()
    host.add_task(cowork_spec(task)[0], str(task.dir))
    return host


# ---------------------------------------------------------------- Claw-Eval side

_CLAW_LAUNCH = (
    "import runpy, sys, uvicorn\n"
    "path, port = sys.argv[1], int(sys.argv[2])\n"
    "sys.argv = [path]\n"
    "app = runpy.run_path(path, run_name='claw_eval_mock')['app']\n"
    "uvicorn.run(app, host='127.0.0.1', port=port)\n"
)


@dataclass
class ClawServer:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    health: str

    @property
    def base(self) -> str:
        return f"http://{LOCAL}:{self.port}"


class ClawEval:
    def __init__(self, root: Path, task: Task, stderr_dir: Path) -> None:
        self.root = root
        self.task = task
        self.stderr_dir = stderr_dir

    def spawn(self, svc: str, port: int) -> ClawServer:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env |= {
            f"{svc.upper()}_FIXTURES": str(self.task.fixture_files[svc]),
            "PORT": str(port),
            "ERROR_RATE": "0",
        }
        server_py = self.root / "mock_services" / svc / "server.py"
        err = (self.stderr_dir / f"claw-{svc}-{port}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-c", _CLAW_LAUNCH, str(server_py), str(port)],
            cwd=self.root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        return ClawServer(svc, port, proc, self.task.health[svc])

    @staticmethod
    def healthy(client: httpx.Client, s: ClawServer) -> bool:
        try:
            r = client.post(s.base + s.health, headers={"X-Health-Check": "1"})
        except httpx.HTTPError:
            return False
        return r.status_code < 500

    def start_parallel(self) -> tuple[list[ClawServer], float]:
        """Spawn all five at once and poll every 5 ms: a lower bound on Claw-Eval's start time."""
        ports = {s: free_port() for s in SERVICES}
        t0 = time.perf_counter()
        servers = [self.spawn(s, ports[s]) for s in SERVICES]
        pending = list(servers)
        with httpx.Client(trust_env=False, timeout=2.0) as c:
            deadline = time.monotonic() + 30
            while pending:
                for s in list(pending):
                    if s.proc.poll() is not None:
                        stop([x.proc for x in servers])
                        raise RuntimeError(
                            f"claw-eval {s.name} exited rc={s.proc.returncode}; see {self.stderr_dir}"
                        )
                    if self.healthy(c, s):
                        pending.remove(s)
                if pending:
                    if time.monotonic() > deadline:
                        stop([x.proc for x in servers])
                        raise RuntimeError(f"claw-eval services {[s.name for s in pending]} never answered")
                    time.sleep(0.005)
        return servers, time.perf_counter() - t0

    def start_like_service_manager(self) -> tuple[list[ClawServer], float]:
        """Claw-Eval's ServiceManager: one service at a time, a fresh client per probe, 0.3 s polls."""
        t0 = time.perf_counter()
        servers = []
        for svc in SERVICES:
            s = self.spawn(svc, free_port())
            servers.append(s)
            while True:
                if s.proc.poll() is not None:
                    stop([x.proc for x in servers])
                    raise RuntimeError(f"claw-eval {svc} exited rc={s.proc.returncode}")
                with httpx.Client(trust_env=False, timeout=2.0) as c:
                    if self.healthy(c, s):
                        break
                time.sleep(0.3)
        return servers, time.perf_counter() - t0

    def url(self, servers: list[ClawServer], tool: str) -> str:
        svc, path = self.task.routes[tool]
        (s,) = [x for x in servers if x.name == svc]
        return s.base + path


# ---------------------------------------------------------------- coworkenv side (HTTP face)


class CoworkHTTP:
    """A coworkenv HTTP server (``serve.http.create_app``) in its own uvicorn process."""

    def __init__(self, task: Task, stderr_dir: Path) -> None:
        self.port = free_port()
        self.base = f"http://{LOCAL}:{self.port}"
        err = (stderr_dir / f"coworkenv-{self.port}.log").open("wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--_serve-coworkenv", str(self.port), "--task-dir", str(task.dir)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        with httpx.Client(trust_env=False, timeout=2.0) as c:

            def probe() -> bool:
                try:
                    return c.get(self.base + "/health").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_http(probe, self.proc, f"coworkenv server (stderr: {err.name})")
        self.cold_start_s = time.perf_counter() - t0

    @staticmethod
    def open_trial(client: httpx.Client, base: str) -> str:
        r = client.post(base + "/trials", json={"task_id": TASK_ID})
        r.raise_for_status()
        body = r.json()
        tid = body.get("trial_id") or body.get("id")
        if not isinstance(tid, str):
            raise RuntimeError(f"POST /trials answered without a trial id: {body}")
        return tid

    def url(self, tid: str, tool: str) -> str:
        from coworkenv.services.registry import TOOLS

        return f"{self.base}/t/{tid}{TOOLS[tool].route}"


def serve_coworkenv(port: int, task_dir: Path) -> None:
    import uvicorn

    from coworkenv.serve.http import create_app

    host = cowork_host(Task.load(task_dir))
    uvicorn.run(create_app(host), host=LOCAL, port=port)  # uvicorn defaults, as Claw-Eval's servers


# ---------------------------------------------------------------- load generator (own process)


async def _load(cfg: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps(cfg["body"]).encode()
    req = (
        f"POST {cfg['path']} HTTP/1.1\r\nHost: {LOCAL}:{cfg['port']}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    state = {"phase": 0, "ok": 0, "bad": 0}

    async def client() -> None:
        reader, writer = await asyncio.open_connection(LOCAL, cfg["port"])
        try:
            while state["phase"] < 2:
                writer.write(req)
                head = await reader.readuntil(b"\r\n\r\n")
                n = -1
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        n = int(line[15:])
                if n < 0:
                    raise RuntimeError(f"response without Content-Length: {head[:200]!r}")
                await reader.readexactly(n)
                if state["phase"] == 1:
                    state["ok" if head[9:12] == b"200" else "bad"] += 1
        finally:
            writer.close()

    tasks = [asyncio.create_task(client()) for _ in range(cfg["clients"])]
    await asyncio.sleep(cfg["warmup_s"])
    pid = cfg["server_pid"]
    cpu0, me0, t0 = proc_cpu_s(pid), time.process_time(), time.perf_counter()
    state["phase"] = 1
    await asyncio.sleep(cfg["seconds"])
    state["phase"] = 2
    cpu1, me1, t1 = proc_cpu_s(pid), time.process_time(), time.perf_counter()
    await asyncio.gather(*tasks)
    wall = t1 - t0
    return {
        "requests": state["ok"],
        "errors": state["bad"],
        "wall_s": wall,
        "rps": state["ok"] / wall,
        "server_cpu_s": cpu1 - cpu0,
        "loadgen_cpu_s": me1 - me0,
        "server_cpu_per_call_ms": 1e3 * (cpu1 - cpu0) / max(state["ok"], 1),
        "server_util": (cpu1 - cpu0) / wall,
        "loadgen_util": (me1 - me0) / wall,
    }


def loadgen(cfg: dict[str, Any]) -> dict[str, Any]:
    """Run the load generator in a fresh process (its own core and GIL) and return its report."""
    out = subprocess.run(
        [sys.executable, __file__, "--_loadgen", json.dumps(cfg)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _loadgen_main(cfg_json: str) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(_load(json.loads(cfg_json)))))


# ---------------------------------------------------------------- memory (own process)


def _memory_main(n: int, task_dir: Path) -> None:
    host = cowork_host(Task.load(task_dir))
    warm = host.open_trial(TASK_ID)
    for tool, args in REFERENCE_CALLS:
        if not warm.call(tool, args).ok:
            raise RuntimeError(f"{tool} failed: {warm.audit[-1].error}")
    host.close_trial(warm.id)
    del warm
    gc.collect()
    base = rss_kib()
    trials = [host.open_trial(TASK_ID) for _ in range(n)]
    gc.collect()
    opened = rss_kib()
    failed = 0
    for t in trials:
        for tool, args in WRITES:
            failed += not t.call(tool, args).ok
    gc.collect()
    written = rss_kib()
    print(
        json.dumps(
            {
                "trials": n,
                "live": len(host.trials),
                "writes_per_trial": len(WRITES),
                "failed_writes": failed,
                "rss_base_mib": base / 1024,
                "rss_open_delta_mib": (opened - base) / 1024,
                "rss_delta_mib": (written - base) / 1024,
                "rss_delta_per_trial_kib": (written - base) / n,
            }
        )
    )


def memory(n: int, task: Task) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--_memory", str(n), "--task-dir", str(task.dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"memory run failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- the run


@dataclass
class Options:
    task: Task
    claw_root: Path | None
    seconds: float
    clients: int
    trials: int
    rounds: int
    n_fast: int
    n_http: int
    start_reps: int
    quick: bool
    out: Path
    results: dict[str, Any] = field(default_factory=dict)


def _volatile_free(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _volatile_free(v) for k, v in x.items() if k not in ("timestamp", "date", "last_updated")}
    if isinstance(x, list):
        return [_volatile_free(v) for v in x]
    return x


def run_claw(o: Options, logs: Path) -> tuple[dict[str, Any], list[Any]]:
    assert o.claw_root is not None
    ce = ClawEval(o.claw_root, o.task, logs)
    res: dict[str, Any] = {}
    print("[claw-eval] trial start: 5 processes spawned at once, health-polled every 5 ms ...", flush=True)
    times, rss, pss, kept = [], [], [], None
    for i in range(o.start_reps):
        servers, dt = ce.start_parallel()
        times.append(dt)
        rss.append(sum(rss_kib(s.proc.pid) for s in servers) / 1024)
        pss.append(sum(pss_kib(s.proc.pid) or 0 for s in servers) / 1024)
        if i == o.start_reps - 1:
            kept = servers
        else:
            stop([s.proc for s in servers])
    assert kept is not None
    res["start_parallel_s"] = {"median": statistics.median(times), "all": times}
    res["rss_per_trial_mib"] = statistics.median(rss)
    res["pss_per_trial_mib"] = statistics.median(pss)
    try:
        print("[claw-eval] trial start like ServiceManager (sequential, 0.3 s polls) ...", flush=True)
        seq = []
        for _ in range(max(1, o.start_reps // 2)):
            servers, dt = ce.start_like_service_manager()
            seq.append(dt)
            stop([s.proc for s in servers])
        res["start_service_manager_s"] = {"median": statistics.median(seq), "all": seq}

        print("[claw-eval] reset, episode, responses ...", flush=True)
        resets = [s.base + p for s in kept for p in [f"/{s.name}/reset"]]
        with httpx.Client(trust_env=False, timeout=10.0) as c:
            draft_url = ce.url(kept, "gmail_save_draft")

            def reset_all() -> None:
                for u in resets:
                    c.post(u).raise_for_status()

            res["reset_http"] = timed(
                reset_all, o.n_http, before=lambda: c.post(draft_url, json=_DRAFT_CUSTOMER)
            )
            reset_all()
            responses = [c.post(ce.url(kept, t), json=a).json() for t, a in REFERENCE_CALLS]

            def episode() -> None:
                reset_all()
                for t, a in REFERENCE_CALLS:
                    c.post(ce.url(kept, t), json=a).raise_for_status()

            pids = [s.proc.pid for s in kept]
            cpu0 = sum(proc_cpu_s(p) for p in pids)
            res["episode_http"] = timed(episode, max(10, o.n_http // 4))
            res["episode_server_cpu_ms"] = (
                1e3 * (sum(proc_cpu_s(p) for p in pids) - cpu0) / res["episode_http"]["n"]
            )
            reset_all()
    finally:
        stop([s.proc for s in kept])

    return res, responses


def run_cowork(o: Options, logs: Path) -> tuple[dict[str, Any], list[Any]]:
    res: dict[str, Any] = {}
    print("[coworkenv] in-process: open_trial, reset, call, episode ...", flush=True)
    host = cowork_host(o.task)
    res["open_trial_inproc"] = timed(lambda: host.close_trial(host.open_trial(TASK_ID).id), 200)  # warm-up
    samples = []
    for _ in range(o.n_fast):
        t0 = time.perf_counter_ns()
        tr = host.open_trial(TASK_ID)
        samples.append(time.perf_counter_ns() - t0)
        host.close_trial(tr.id)
    res["open_trial_inproc"] = stats_ms(samples)
    tr = host.open_trial(TASK_ID)
    res["reset_inproc"] = timed(
        tr.reset, o.n_fast, before=lambda: tr.call("gmail_save_draft", _DRAFT_CUSTOMER)
    )
    tr.reset()
    res["call_inproc"] = timed(lambda: tr.call(*HOT_CALL), o.n_fast)

    def episode_inproc() -> None:
        tr.reset()
        for t, a in REFERENCE_CALLS:
            if not tr.call(t, a).ok:
                raise RuntimeError(f"coworkenv {t} failed in-process: {tr.audit[-1].error}")

    res["episode_inproc"] = timed(episode_inproc, max(100, o.n_fast // 10))
    res["setup_plus_reset_inproc_ms"] = (
        res["open_trial_inproc"]["median_ms"] + res["reset_inproc"]["median_ms"]
    )
    gc.collect()

    print(
        f"[coworkenv] memory: {o.trials} live trials with {len(WRITES)} writes each (fresh process) ...",
        flush=True,
    )
    res["memory"] = memory(o.trials, o.task)

    print("[coworkenv] HTTP face: server start, POST /trials, reset, episode ...", flush=True)
    srv = CoworkHTTP(o.task, logs)
    try:
        res["server_cold_start_s"] = srv.cold_start_s
        res["server_rss_idle_mib"] = rss_kib(srv.proc.pid) / 1024
        with httpx.Client(trust_env=False, timeout=10.0) as c:
            CoworkHTTP.open_trial(c, srv.base)  # warm-up
            res["open_trial_http"] = timed(lambda: CoworkHTTP.open_trial(c, srv.base), o.n_http)
            tid = CoworkHTTP.open_trial(c, srv.base)
            reset_url, draft_url = f"{srv.base}/t/{tid}/reset", srv.url(tid, "gmail_save_draft")
            res["reset_http"] = timed(
                lambda: c.post(reset_url).raise_for_status(),
                o.n_http,
                before=lambda: c.post(draft_url, json=_DRAFT_CUSTOMER).raise_for_status(),
            )
            c.post(reset_url).raise_for_status()
            responses = [c.post(srv.url(tid, t), json=a).json() for t, a in REFERENCE_CALLS]

            def episode() -> None:
                c.post(reset_url).raise_for_status()
                for t, a in REFERENCE_CALLS:
                    c.post(srv.url(tid, t), json=a).raise_for_status()

            cpu0 = proc_cpu_s(srv.proc.pid)
            res["episode_http"] = timed(episode, max(10, o.n_http // 4))
            res["episode_server_cpu_ms"] = 1e3 * (proc_cpu_s(srv.proc.pid) - cpu0) / res["episode_http"]["n"]
    finally:
        stop([srv.proc])
    return res, responses


def _median_fields(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def run_throughput(o: Options, logs: Path, claw: dict[str, Any] | None, cw: dict[str, Any]) -> None:
    """Both servers up at once; rounds alternate sides (A B, B A, ...) so drift hits both alike."""
    procs: list[subprocess.Popen[bytes]] = []
    targets: list[tuple[str, int, str, int]] = []  # side, port, path, pid
    runs: dict[str, list[dict[str, Any]]] = {"claw-eval": [], "coworkenv": []}
    try:
        if o.claw_root is not None:
            ce = ClawEval(o.claw_root, o.task, logs)
            hd = ce.spawn("helpdesk", free_port())
            procs.append(hd.proc)
            with httpx.Client(trust_env=False, timeout=2.0) as c:
                wait_http(lambda: ce.healthy(c, hd), hd.proc, "claw-eval helpdesk")
            targets.append(("claw-eval", hd.port, o.task.routes[HOT_CALL[0]][1], hd.proc.pid))
        srv = CoworkHTTP(o.task, logs)
        procs.append(srv.proc)
        with httpx.Client(trust_env=False, timeout=10.0) as c:
            tid = CoworkHTTP.open_trial(c, srv.base)
        targets.append(
            ("coworkenv", srv.port, srv.url(tid, HOT_CALL[0]).removeprefix(srv.base), srv.proc.pid)
        )
        for r in range(o.rounds):
            for side, port, path, pid in targets if r % 2 == 0 else targets[::-1]:
                print(
                    f"[{side}] throughput round {r + 1}/{o.rounds}: {o.clients} clients x {o.seconds:g} s "
                    f"on {HOT_CALL[0]} ...",
                    flush=True,
                )
                runs[side].append(
                    loadgen(
                        {
                            "port": port,
                            "path": path,
                            "body": HOT_CALL[1],
                            "clients": o.clients,
                            "seconds": o.seconds,
                            "warmup_s": 1.0,
                            "server_pid": pid,
                        }
                    )
                )
        cw["server_rss_after_throughput_mib"] = rss_kib(srv.proc.pid) / 1024
    finally:
        stop(procs)
    for side, res in (("claw-eval", claw), ("coworkenv", cw)):
        if res is not None and runs[side]:
            res["throughput"] = {**_median_fields(runs[side]), "rounds": runs[side]}


def machine() -> dict[str, Any]:
    model = cpu_model()
    mem = next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal"))
    versions = {}
    for pkg in ("fastapi", "starlette", "uvicorn", "pydantic", "uvloop", "httptools", "httpx"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[pkg] = metadata.version(pkg)
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "mem_total_gib": int(mem.split()[1]) / 2**20,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
    }


def claw_fingerprint(root: Path) -> str:
    h = hashlib.sha256()
    for rel in ["mock_services/_base.py", *(f"mock_services/{s}/server.py" for s in SERVICES)]:
        h.update((root / rel).read_bytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- report


def _fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if unit == "ms":
        return f"{x:.4f} ms" if x < 0.1 else f"{x:.3f} ms" if x < 10 else f"{x:,.1f} ms"
    if unit == "s":
        return f"{x:.3f} s"
    if unit == "MiB":
        return f"{x:,.2f} MiB" if x < 10 else f"{x:,.1f} MiB"
    if unit == "rps":
        return f"{x:,.0f} req/s"
    return f"{x:g} {unit}"


def _get(d: dict[str, Any] | None, *path: str, scale: float = 1.0) -> float | None:
    cur: Any = d or {}
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return float(cur) * scale


def _ratio(cv: float | None, wv: float | None, *, higher_better: bool = False) -> str:
    if cv is None or wv is None or cv <= 0 or wv <= 0:
        return "—"
    r = wv / cv if higher_better else cv / wv
    return f"{r:,.0f}×" if r >= 100 else f"{r:.1f}×"


def rows(claw: dict[str, Any] | None, cw: dict[str, Any], trials: int) -> list[tuple[str, str, str, str]]:
    """metric | claw-eval | coworkenv | ratio (how many times better coworkenv is; >1 = better).

    Claw-Eval has no in-process mode: its column is always its HTTP path.
    """
    c = claw
    start = _get(c, "start_parallel_s", "median", scale=1e3)
    claw_rss = _get(c, "rss_per_trial_mib")
    mem = _get(cw, "memory", "rss_delta_mib")
    spec: list[tuple[str, float | None, str, float | None, str, bool]] = [
        (
            "trial start, in-process (claw: spawn 5 servers -> all healthy)",
            start,
            "ms",
            _get(cw, "open_trial_inproc", "median_ms"),
            "ms",
            False,
        ),
        (
            "trial start over HTTP (coworkenv: POST /trials)",
            start,
            "ms",
            _get(cw, "open_trial_http", "median_ms"),
            "ms",
            False,
        ),
        (
            "trial start, claw via its ServiceManager (sequential, 0.3 s polls)",
            _get(c, "start_service_manager_s", "median", scale=1e3),
            "ms",
            _get(cw, "open_trial_inproc", "median_ms"),
            "ms",
            False,
        ),
        (
            "reset all 5 services, in-process (claw: 5x POST /{svc}/reset)",
            _get(c, "reset_http", "median_ms"),
            "ms",
            _get(cw, "reset_inproc", "median_ms"),
            "ms",
            False,
        ),
        (
            "reset over HTTP (coworkenv: POST /t/{tid}/reset)",
            _get(c, "reset_http", "median_ms"),
            "ms",
            _get(cw, "reset_http", "median_ms"),
            "ms",
            False,
        ),
        (
            "trial setup + reset, in-process (claw: its reset)",
            _get(c, "reset_http", "median_ms"),
            "ms",
            _get(cw, "setup_plus_reset_inproc_ms"),
            "ms",
            False,
        ),
        (
            "RSS per live trial (claw: its 5 servers summed)",
            claw_rss,
            "MiB",
            None if mem is None else mem * 1024 / trials,
            "KiB",
            False,
        ),
        (
            f"RSS for {trials:,} live trials (claw: extrapolated x{trials:,})",
            None if claw_rss is None else claw_rss * trials,
            "MiB",
            mem,
            "MiB",
            False,
        ),
        (
            "helpdesk_get_ticket throughput over HTTP, 64 clients",
            _get(c, "throughput", "rps"),
            "rps",
            _get(cw, "throughput", "rps"),
            "rps",
            True,
        ),
        (
            "server CPU per tool call over HTTP",
            _get(c, "throughput", "server_cpu_per_call_ms"),
            "ms",
            _get(cw, "throughput", "server_cpu_per_call_ms"),
            "ms",
            False,
        ),
        (
            "reference episode over HTTP (reset + 13 calls), wall",
            _get(c, "episode_http", "median_ms"),
            "ms",
            _get(cw, "episode_http", "median_ms"),
            "ms",
            False,
        ),
        (
            "reference episode over HTTP, server CPU",
            _get(c, "episode_server_cpu_ms"),
            "ms",
            _get(cw, "episode_server_cpu_ms"),
            "ms",
            False,
        ),
        (
            "reference episode in-process (claw: over HTTP)",
            _get(c, "episode_http", "median_ms"),
            "ms",
            _get(cw, "episode_inproc", "median_ms"),
            "ms",
            False,
        ),
        (
            "one tool call in-process (helpdesk_get_ticket)",
            None,
            "ms",
            _get(cw, "call_inproc", "median_ms"),
            "ms",
            False,
        ),
    ]
    return [
        (
            name,
            _fmt(cv, cu),
            _fmt(wv, wu),
            _ratio(
                cv if cu == wu else _to_kib(cv, cu), wv if cu == wu else _to_kib(wv, wu), higher_better=hb
            ),
        )
        for name, cv, cu, wv, wu, hb in spec
    ]


def _to_kib(x: float | None, unit: str) -> float | None:
    return None if x is None else x * 1024 if unit == "MiB" else x


def goals(claw: dict[str, Any] | None, cw: dict[str, Any], trials: int) -> list[tuple[str, str, str]]:
    """The issue's targets, each with the measured value and PASS/FAIL."""
    out = []
    setup = cw["setup_plus_reset_inproc_ms"]
    http_setup = cw["open_trial_http"]["median_ms"]
    if claw:
        factor = claw["reset_http"]["median_ms"] / setup
        out.append(
            (
                "trial setup + reset >=100x faster than Claw-Eval, <=0.5 ms in-process",
                f"{setup:.4f} ms ({factor:,.0f}x vs its {claw['reset_http']['median_ms']:.1f} ms reset); "
                f"over HTTP POST /trials {http_setup:.2f} ms",
                "PASS" if factor >= 100 and setup <= 0.5 else "FAIL",
            )
        )
        cpu = claw["throughput"]["server_cpu_per_call_ms"] / cw["throughput"]["server_cpu_per_call_ms"]
        out.append(
            (
                "server CPU per tool call over HTTP >=3x lower",
                f"{cw['throughput']['server_cpu_per_call_ms']:.3f} vs "
                f"{claw['throughput']['server_cpu_per_call_ms']:.3f} ms ({cpu:.1f}x)",
                "PASS" if cpu >= 3 else "FAIL",
            )
        )
    else:
        out.append(
            (
                "trial setup + reset <=0.5 ms in-process",
                f"{setup:.4f} ms",
                "PASS" if setup <= 0.5 else "FAIL",
            )
        )
    mem = cw["memory"]["rss_delta_mib"]
    verdict = "FAIL" if mem > 1024 else "PASS" if trials >= 1000 else "n/a (fewer than 1,000 trials)"
    out.append(
        (
            "1,000 live 5-service trials in one process <=1 GiB RSS",
            f"{trials:,} trials: +{mem:,.1f} MiB",
            verdict,
        )
    )
    return out


ISSUE_REFERENCE = (
    "The issue's Claw-Eval figures (another machine): 0.88 s to start a trial's five services, 238 MiB RSS "
    "per trial, 5.8-7.3 ms reset over HTTP with a warm client, ~1,200 helpdesk calls/s at 64 clients, "
    "0.74 ms server CPU per call."
)


def markdown(o: Options, claw: dict[str, Any] | None, cw: dict[str, Any], meta: dict[str, Any]) -> str:
    m = meta["machine"]
    return "\n".join(
        [
            f"# Services benchmark: coworkenv vs Claw-Eval's mock services ({meta['date']})",
            "",
            f"- Machine: {m['nproc']} CPU(s), {m['cpu_model']}, {m['mem_total_gib']:.0f} GiB RAM; "
            f"load average {meta['loadavg_start']} at start, {meta['loadavg_end']} at end.",
            f"- Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()) + ".",
            f"- Task: {TASK_ID} (helpdesk, crm, gmail, contacts, kb), fixtures `{o.task.dir}`; "
            f"coworkenv spec via {meta['coworkenv_spec']}.",
            f"- Claw-Eval: {meta['claw_eval'] or 'skipped (no --claw-eval)'}.",
            f"- Command: `{meta['command']}`",
            "",
            "| metric | claw-eval | coworkenv | ratio (× better) |",
            "|---|---:|---:|---:|",
            *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows(claw, cw, o.trials)),
            "",
            "| goal | measured | verdict |",
            "|---|---|---|",
            *(f"| {a} | {b} | {c} |" for a, b, c in goals(claw, cw, o.trials)),
            "",
            "Notes:",
            "",
            *(f"- {n}" for n in meta["notes"]),
            "",
        ]
    )


def notes(claw: dict[str, Any] | None, cw: dict[str, Any], machine_: dict[str, Any], o: Options) -> list[str]:
    out = [
        "Times are medians. Ratio = claw-eval / coworkenv for costs, coworkenv / claw-eval for throughput. "
        "Claw-Eval has no in-process mode, so its column is always its HTTP path.",
        "Claw-Eval trial start = all five servers spawned at once and health-polled every 5 ms (a lower "
        "bound on its real start; its ServiceManager starts them one by one with 0.3 s polls, row 3). Its "
        "reset = POST /{svc}/reset on all five, sequentially, warm httpx client, after one draft write.",
        "Both sides serve HTTP from single uvicorn processes with uvicorn's defaults (uvloop/httptools, "
        "access log on, stdout to /dev/null) under the same interpreter; Claw-Eval binds 127.0.0.1 instead "
        "of 0.0.0.0.",
        f"Throughput: a separate asyncio/uvloop raw HTTP/1.1 keep-alive client process, {o.clients} "
        f"connections, {o.rounds} round(s) of {o.seconds:g} s per side after 1 s warm-up, sides alternating; "
        "medians over rounds. Server CPU = utime+stime from /proc/{pid}/stat (resolution "
        f"1/{CLK_TCK} s) over the window / completed requests.",
        f"coworkenv RSS per trial = RSS delta of a fresh process holding {o.trials:,} open trials after "
        f"{len(WRITES)} writes in each (ticket update + 2 drafts), / count. Claw-Eval = summed VmRSS of its "
        "5 servers just after start (summed PSS, which counts shared pages once: "
        f"{(claw or {}).get('pss_per_trial_mib', float('nan')):.1f} MiB).",
        ISSUE_REFERENCE,
    ]
    for side, res in (("claw-eval", claw), ("coworkenv", cw)):
        if not res or "throughput" not in res:
            continue
        tp = res["throughput"]
        sat = []
        if tp["loadgen_util"] > 0.9:
            sat.append(f"the load generator was saturated ({tp['loadgen_util']:.0%} of a core)")
        if tp["server_util"] > 0.9:
            sat.append(f"the server was saturated ({tp['server_util']:.0%} of a core)")
        per_round = ", ".join(f"{r['rps']:,.0f}" for r in tp["rounds"])
        cpu_round = ", ".join(f"{r['server_cpu_per_call_ms']:.3f}" for r in tp["rounds"])
        out.append(
            f"{side} throughput: req/s per round {per_round}; server CPU ms/call per round {cpu_round}; "
            f"{tp['errors']:g} errors; server busy "
            f"{tp['server_util']:.0%} of a core, load generator {tp['loadgen_util']:.0%}"
            + (f"; {' and '.join(sat)}" if sat else "")
            + "."
        )
    if machine_["nproc"] <= 4:
        out.append(
            f"Only {machine_['nproc']} CPU(s), shared with other work (see load average): server, load "
            "generator and anything else compete, so wall times and req/s are noisy floors for both sides; "
            "server CPU per call is the comparable number."
        )
    if "responses_identical" in cw:
        out.append(f"Same call sequence on both sides: {cw['responses_identical']}.")
    mem = cw["memory"]
    out.append(
        f"Memory run: {mem['trials']:,} trials live, {mem['failed_writes']} failed writes; base RSS "
        f"{mem['rss_base_mib']:.1f} MiB, +{mem['rss_open_delta_mib']:.2f} MiB after opening, "
        f"+{mem['rss_delta_mib']:.2f} MiB after the writes."
    )
    out.append(
        f"coworkenv HTTP server (all services, one process): cold start {cw['server_cold_start_s']:.2f} s, "
        f"idle RSS {cw['server_rss_idle_mib']:.1f} MiB."
    )
    return out


def compare_responses(claw: list[Any], cw: list[Any]) -> str:
    pairs = list(zip(REFERENCE_CALLS, claw, cw, strict=True))
    differ = [t for (t, _), a, b in pairs if _volatile_free(a) != _volatile_free(b)]
    return f"{len(pairs) - len(differ)}/{len(pairs)} responses identical ignoring timestamps/dates" + (
        f"; differ: {', '.join(differ)}" if differ else ""
    )


def parse_options() -> tuple[argparse.Namespace, Path]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--claw-eval",
        type=Path,
        default=Path(os.environ["COWORKENV_BENCH_CLAW_EVAL"])
        if os.environ.get("COWORKENV_BENCH_CLAW_EVAL")
        else None,
        help="a Claw-Eval checkout holding mock_services/ (default $COWORKENV_BENCH_CLAW_EVAL); "
        "none: the Claw-Eval side is skipped",
    )
    ap.add_argument("--task-dir", type=Path, help=f"the {TASK_ID} task dir (task.yaml + fixtures/)")
    ap.add_argument("--seconds", type=float, default=10.0, help="throughput window per round and side")
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds per side (alternating)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--trials", type=int, default=1000, help="live trials for the memory test")
    ap.add_argument("--quick", action="store_true", help="small sample counts (smoke test)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--_serve-coworkenv", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_loadgen", help=argparse.SUPPRESS)
    ap.add_argument("--_memory", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._loadgen:
        _loadgen_main(a._loadgen)
        sys.exit(0)
    candidates = (
        [a.task_dir]
        if a.task_dir
        else [*([a.claw_eval / "tasks" / TASK_ID] if a.claw_eval else []), *DEFAULT_TASK_DIRS]
    )
    task_dir = next((p for p in candidates if (p / "task.yaml").exists()), None)
    if task_dir is None:
        sys.exit(f"no {TASK_ID} task found (tried {[str(p) for p in candidates]}); pass --task-dir")
    return a, task_dir.resolve()


def main() -> None:
    a, task_dir = parse_options()
    if a._serve_coworkenv:
        serve_coworkenv(a._serve_coworkenv, task_dir)
        return
    if a._memory:
        _memory_main(a._memory, task_dir)
        return
    claw_root = a.claw_eval.resolve() if a.claw_eval else None
    if claw_root is not None and not (claw_root / "mock_services" / "helpdesk" / "server.py").exists():
        sys.exit(f"--claw-eval {claw_root}: no mock_services/helpdesk/server.py there")
    if claw_root is None:
        print("[claw-eval] skipped: pass --claw-eval DIR (a Claw-Eval checkout) to compare side by side.")
    o = Options(
        task=Task.load(task_dir),
        claw_root=claw_root,
        seconds=2.0 if a.quick else a.seconds,
        clients=a.clients,
        trials=a.trials,
        rounds=1 if a.quick else a.rounds,
        n_fast=1000 if a.quick else 10000,
        n_http=50 if a.quick else 300,
        start_reps=2 if a.quick else 6,
        quick=a.quick,
        out=a.out,
    )
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="bench-services-") as tmp:
        logs = Path(tmp)
        claw, claw_resp = run_claw(o, logs) if claw_root else (None, None)
        cw, cw_resp = run_cowork(o, logs)
        run_throughput(o, logs, claw, cw)
    if claw_resp is not None:
        cw["responses_identical"] = compare_responses(claw_resp, cw_resp)
    today = datetime.now(UTC).date().isoformat()
    meta: dict[str, Any] = {
        "date": today,
        "machine": machine(),
        "loadavg_start": load_start,
        "loadavg_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "task": TASK_ID,
        "task_dir": str(o.task.dir),
        "coworkenv_spec": cowork_spec(o.task)[1],
        "claw_eval": f"{claw_root} (mock_services sha256 {claw_fingerprint(claw_root)})"
        if claw_root
        else None,
        "command": "python benchmarks/bench_services.py " + " ".join(sys.argv[1:]),
        "params": {
            "seconds": o.seconds,
            "clients": o.clients,
            "trials": o.trials,
            "rounds": o.rounds,
            "n_fast": o.n_fast,
            "n_http": o.n_http,
            "start_reps": o.start_reps,
        },
    }
    meta["notes"] = notes(claw, cw, meta["machine"], o)
    report(o, claw, cw, meta)


def report(o: Options, claw: dict[str, Any] | None, cw: dict[str, Any], meta: dict[str, Any]) -> None:
    """Print the table, goals and notes; write services-<date>.{json,md} under ``o.out``."""
    table = rows(claw, cw, o.trials)
    width = [
        max(len(r[i]) for r in [("metric", "claw-eval", "coworkenv", "ratio"), *table]) for i in range(4)
    ]
    print()
    for r in [("metric", "claw-eval", "coworkenv", "ratio"), *table]:
        print(
            " | ".join(
                x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, width, strict=True))
            )
        )
    print()
    for g_ in goals(claw, cw, o.trials):
        print(" | ".join(g_))
    print()
    for n in meta["notes"]:
        print("-", n)
    o.out.mkdir(parents=True, exist_ok=True)
    stem = o.out / f"services-{meta['date']}{'-quick' if o.quick else ''}"
    doc = {
        **meta,
        "claw_eval_results": claw,
        "coworkenv_results": cw,
        "table": [dict(zip(("metric", "claw_eval", "coworkenv", "ratio"), r, strict=True)) for r in table],
        "goals": [
            dict(zip(("goal", "measured", "verdict"), g_, strict=True)) for g_ in goals(claw, cw, o.trials)
        ],
    }
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(o, claw, cw, meta))
    print(f"\nwrote {stem}.json and {stem}.md")


if __name__ == "__main__":
    main()
