"""A red-team policy: a scripted agent that tries every way at what grades it, then does the task.

Contract: :class:`RedTeamPolicy` is a per-task backend factory (picklable, so Ray workers can use
it) whose script first runs :func:`attack_script` through the harness's shell tool — read the task
spec and reference, list the project checkout, the capture store and the run directory, read
another rollout's workspace, write ``/logs/verifier/reward.json`` and the records file, list /
read / reset / call other trials over HTTP, reach other network services, signal a host process,
fork without bound, write one huge file, fill RAM through ``/dev/shm`` — then fills the disk, then
plays the task's reference solution and its final message.

The attack prints one line ``REDTEAM-REPORT {attempt: verdict}``; a verdict starts with
``blocked`` when the attempt failed and ``ESCAPED`` when it got something.
:func:`attack_report` reads it back from a rollout record's messages. Everything the script
tries is harmless outside a jail too (bounded forks, bounded writes), so it can be pointed at an
unisolated run to show what isolation prevents.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from coworkenv.proxy.backends.scripted import Script, ScriptCall, ScriptedBackend, script_from_reference
from coworkenv.spec import TaskSpec

REPORT_MARKER = "REDTEAM-REPORT "
FILLED_MARKER = "REDTEAM-FILLED"


@dataclass(frozen=True)
class Targets:
    """What the attack goes for (absolute paths and base URLs on the host)."""

    read: tuple[str, ...] = ()
    """Files to read: task spec, reference, records, another rollout's files."""
    list: tuple[str, ...] = ()
    """Directories to list: the project checkout, the capture store, the run directory."""
    write: tuple[str, ...] = ("/logs/verifier/reward.json",)
    """Files to create or append to: the verifier's reward, the records file."""
    http: tuple[str, ...] = ()
    """Base URLs (services, proxy) to try the operator routes on."""
    fetch: tuple[str, ...] = ()
    """Other URLs to GET (a host service, an inference server's admin API, the internet)."""
    victim: str = "victim"
    """A trial id to read, reset and call."""
    signal_pid: int = 0
    """A host process to signal (0: skip)."""
    fork_max: int = 2000
    """The fork bomb stops here (so it is bounded even without a jail)."""
    big_mib: int = 64
    """Size of the one huge file."""
    shm_mib: int = 1024
    """How much to write into ``/dev/shm`` (RAM) in 1 MiB files."""
    hog_mib: int = 8192
    """How much private memory to allocate in one go (past the memory limit when jailed)."""
    fill_mib: int = 256
    """How much the disk filler writes, in files of ``fill_file_mib``."""
    fill_file_mib: int = 4


def attack_script(t: Targets) -> str:
    """A ``python3`` (standard library only) program that tries each escape and reports."""
    body = f"""
import glob, json, os, signal, time, urllib.error, urllib.request
T = json.loads({json.dumps(json.dumps(_targets(t)))})
out = {{}}
def tried(name, fn):
    try:
        got = fn()
    except Exception as e:
        out[name] = ("blocked: " + type(e).__name__ + ": " + str(e))[:200]
    else:
        out[name] = "blocked: nothing" if not got else ("ESCAPED: " + str(got))[:200]
for p in T["read"]:
    tried("read " + p, lambda p=p: open(p, "rb").read(64))
for p in T["list"]:
    tried("list " + p, lambda p=p: os.listdir(p))
def write(p):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "a") as f:
        f.write('{{"reward": 1.0}}\\n')
    return "wrote " + p
for p in T["write"]:
    tried("write " + p, lambda p=p: write(p))
def http(method, url):
    data = b"{{}}" if method == "POST" else None
    hdrs = {{"content-type": "application/json"}}
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return "HTTP %d %r" % (r.status, r.read(80))
    except urllib.error.HTTPError as e:
        raise RuntimeError("HTTP %d %r" % (e.code, e.read(120)))
v = T["victim"]
routes = [("GET", "/trials"), ("GET", "/tasks"), ("DELETE", "/trials/" + v)]
routes += [(m, "/t/" + v + "/" + p) for m, p in [("GET", "events"), ("GET", "state"), ("POST", "reset")]]
svc = [("GET", "audit"), ("POST", "reset"), ("POST", "tickets")]
routes += [(m, "/t/" + v + "/helpdesk/" + p) for m, p in svc]
for base in T["http"]:
    for method, path in routes:
        tried(method + " " + base + path, lambda m=method, u=base + path: http(m, u))
for url in T["fetch"]:
    tried("GET " + url, lambda u=url: http("GET", u))
if T["signal_pid"]:
    tried("signal host pid", lambda: os.kill(T["signal_pid"], 0) or "signalled")
def bomb():
    kids = []
    try:
        while len(kids) < T["fork_max"]:
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            kids.append(pid)
    except OSError as e:
        raise OSError("fork refused after %d processes: %s" % (len(kids), e))
    finally:
        for k in kids:
            os.kill(k, signal.SIGKILL)
            os.waitpid(k, 0)
    return "forked %d processes" % len(kids)
tried("fork bomb", bomb)
def big():
    try:
        with open("redteam-big.bin", "wb") as f:
            for _ in range(T["big_mib"]):
                f.write(b"\\0" * (1 << 20))
        return "wrote %d MiB" % T["big_mib"]
    finally:
        if os.path.exists("redteam-big.bin"):
            os.remove("redteam-big.bin")
tried("one huge file", big)
def shm():
    written = 0
    try:
        for i in range(T["shm_mib"]):
            with open("/dev/shm/redteam-%d" % i, "wb") as f:
                f.write(b"\\0" * (1 << 20))
            written += 1
        return "wrote %d MiB to /dev/shm" % written
    finally:
        for i in range(written + 1):
            if os.path.exists("/dev/shm/redteam-%d" % i):
                os.remove("/dev/shm/redteam-%d" % i)
tried("fill memory via /dev/shm", shm)
def hog():
    block = bytearray(T["hog_mib"] << 20)
    return "allocated %d MiB" % (len(block) >> 20)
tried("allocate memory past the limit", hog)
print({json.dumps(REPORT_MARKER)} + json.dumps(out, sort_keys=True))
"""
    return f"python3 - <<'REDTEAM'\n{textwrap.dedent(body).strip()}\nREDTEAM"


def quota_probe(dirs: int, files: int) -> str:
    """Python source that makes ``dirs`` directories, then preallocates ``files`` files of 1 MiB
    in its working directory, counting what the filesystem refused; prints ``made refused
    allocated used_bytes`` (a disk quota that counts only file data lets every one land)."""
    return f"""
import os
made = refused = allocated = 0
for i in range({dirs}):
    try:
        os.mkdir(f"d{{i}}")
        made += 1
    except OSError:
        refused += 1
for i in range({files}):
    try:
        fd = os.open(f"f{{i}}", os.O_CREAT | os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, 1 << 20)
            allocated += 1
        finally:
            os.close(fd)
    except OSError:
        refused += 1
st = os.statvfs(".")
print(made, refused, allocated, (st.f_blocks - st.f_bfree) * st.f_frsize)
"""


def fill_script(t: Targets) -> str:
    """Fill the disk with files just under the file-size limit; prints FILLED if it finished."""
    n = max(1, t.fill_mib // t.fill_file_mib)
    body = (
        "import os\n"
        f"for i in range({n}):\n"
        f"    with open('redteam-fill-%d.bin' % i, 'wb') as f: f.write(b'\\0' * ({t.fill_file_mib} << 20))\n"
        f"print({FILLED_MARKER!r})\n"
    )
    return f"python3 - <<'REDTEAM'\n{body}REDTEAM"


def _targets(t: Targets) -> dict[str, Any]:
    return {
        "read": list(t.read),
        "list": list(t.list),
        "write": list(t.write),
        "http": [u.rstrip("/") for u in t.http],
        "fetch": list(t.fetch),
        "victim": t.victim,
        "signal_pid": t.signal_pid,
        "fork_max": t.fork_max,
        "big_mib": t.big_mib,
        "shm_mib": t.shm_mib,
        "hog_mib": t.hog_mib,
    }


@dataclass(frozen=True)
class RedTeamPolicy:
    """Per-task backend factory: the attack, the disk filler, then the reference solution."""

    targets: Targets = field(default_factory=Targets)
    prelude: Sequence[str] = ()
    """Shell commands to run before the attack (e.g. to plant a file for another rollout)."""

    def __call__(self, spec: TaskSpec) -> ScriptedBackend:
        reference = script_from_reference(spec)
        steps = [*self.prelude, attack_script(self.targets), fill_script(self.targets)]
        attack = tuple(ScriptCall("workspace.run", {"command": c}) for c in steps)
        return ScriptedBackend(Script((*attack, *reference.items), reference.final_message))


def attack_report(messages: Sequence[Any]) -> dict[str, str]:
    """The attack's verdicts, from the tool results in a record's ``messages`` (empty if absent)."""
    for m in messages:
        for text in _texts(getattr(m, "content", "")):
            at = text.find(REPORT_MARKER)
            if at < 0:
                continue
            try:
                report, _end = json.JSONDecoder().raw_decode(text[at + len(REPORT_MARKER) :])
            except json.JSONDecodeError:
                continue
            if isinstance(report, dict):
                return {str(k): str(v) for k, v in report.items()}
    return {}


def _texts(content: Any) -> list[str]:
    """``content`` and, when it is JSON (a tool result body), every string inside it."""
    if not isinstance(content, str):
        return _strings(content)
    try:
        return [content, *_strings(json.loads(content))]
    except json.JSONDecodeError:
        return [content]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
