"""Per-rollout sandbox: a fresh workspace and HOME, a scrubbed environment, process control.

Contract:

* :meth:`Sandbox.create` makes ``<run_dir>/sandboxes/<rollout_id>/{workspace,home,tmp,logs}``
  — with ``disk_bytes``, on a filesystem of that size of its own (:mod:`coworkenv.rollout.diskfs`)
  where the host allows one — and writes the task's initial workspace files;
  :meth:`Sandbox.cleanup` kills every process of the sandbox, unmounts its filesystem and removes
  the directory (unless ``keep``).
* :meth:`Sandbox.env` is the whole environment a harness process gets: HOME/XDG dirs/TMPDIR
  inside the sandbox, PATH and locale from the parent, the marker ``COWORKENV_SANDBOX=<id>`` —
  and nothing else (no API keys or proxies leak in from the parent).
* :func:`run_process` starts a child in its **own session/process group** (``start_new_session``),
  stdin ``/dev/null``, output to files — inside the rollout's :class:`~coworkenv.rollout.isolation.Jail`
  when given one (:meth:`Sandbox.jail`), whose disk quota it watches; on timeout, cancellation,
  quota overrun or normal exit it kills the whole group (TERM, then KILL after a grace period).
  :func:`kill_marked` then sweeps ``/proc`` for processes that carry the sandbox marker (they may
  have left the group with ``setsid``), so no process of a rollout outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from coworkenv.grading.replay import materialize_workspace
from coworkenv.rollout.diskfs import RolloutDisk, disk_problem
from coworkenv.rollout.isolation import Isolation, Jail
from coworkenv.rollout.netjail import RELAYED, endpoint_ports, relays
from coworkenv.spec import TaskSpec

log = logging.getLogger(__name__)

MARKER = "COWORKENV_SANDBOX"
"""Environment variable every sandbox process carries (value: the rollout id)."""

KILL_GRACE_S = 2.0
QUOTA_POLL_S = 0.1
_INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")


@dataclass(frozen=True)
class Sandbox:
    rollout_id: str
    root: Path
    workspace: Path
    home: Path
    tmp: Path
    logs: Path
    disk: RolloutDisk | None = None
    """The rollout's own size-limited filesystem, mounted on ``root`` (where the host allows one)."""
    disk_reason: str = ""
    """Why there is none (the disk quota is then only polled)."""
    hosts_processes: bool = True
    """False for an in-process harness: no filesystem was made, and no process is looked for at cleanup."""

    @classmethod
    def create(
        cls,
        run_dir: Path,
        rollout_id: str,
        spec: TaskSpec,
        *,
        disk_bytes: int | None = None,
        hosts_processes: bool = True,
    ) -> Sandbox:
        """The sandbox directories; with ``disk_bytes`` they live on a filesystem of that size
        (:mod:`coworkenv.rollout.diskfs`) where the host allows one, else a loud warning. With
        ``hosts_processes=False`` (a harness that starts none) they are plain directories."""
        root = run_dir / "sandboxes" / rollout_id
        remove_sandbox_dir(root)
        disk, reason = None, ""
        if disk_bytes is not None and hosts_processes:
            reason = disk_problem() or ""
            if not reason:
                try:
                    disk = RolloutDisk.mount(root, disk_bytes)
                except OSError as exc:
                    reason = str(exc)
            if reason:
                _warn_disk(reason)
        dirs = (root / "workspace", root / "home", root / "tmp", root / "logs")
        box = cls(rollout_id, root, *dirs, disk=disk, disk_reason=reason, hosts_processes=hosts_processes)
        for d in (box.workspace, box.home, box.tmp, box.logs):
            d.mkdir(parents=True, exist_ok=True)
        materialize_workspace(spec, box.workspace)
        return box

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.setdefault("LANG", "C.UTF-8")
        env.update(
            {
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                "TMPDIR": str(self.tmp),
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                MARKER: self.rollout_id,
            }
        )
        if extra:
            env.update(extra)
        return env

    def jail(self, isolation: Isolation) -> Jail:
        """This sandbox's jail: workspace, HOME and TMPDIR writable, nothing else of the host's (the
        logs, written through the process's stdout/stderr, count towards its disk quota too)."""
        writable = (self.workspace, self.home, self.tmp)
        jail = isolation.jail(self.rollout_id, writable, self.root, watched=(self.logs,))
        if self.disk is not None:
            jail.disk, jail.disk_fs = self.disk, f"ext4 of {self.disk.size_bytes} bytes on {self.root}"
        elif self.disk_reason:
            jail.disk_fs = f"polled only: {self.disk_reason}"
        return jail

    def cleanup(self, *, keep: bool = False) -> int:
        """Kill the sandbox's processes; unmount its filesystem; remove its directory unless
        ``keep`` (then its contents stay, copied off the filesystem). Returns #killed."""
        killed = kill_marked(self.rollout_id) if self.hosts_processes else 0
        if self.disk is not None:
            self.disk.unmount(keep=keep)
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
        return killed


def remove_sandbox_dir(root: Path) -> None:
    """Remove a sandbox directory a previous run left (unmounting its filesystem if it left one)."""
    if os.path.ismount(root):
        subprocess.run(["umount", "-l", str(root)], capture_output=True, check=False, timeout=60)
        root.with_name(root.name + ".img").unlink(missing_ok=True)
    if root.exists():
        shutil.rmtree(root)


@functools.cache
def _warn_disk(reason: str) -> None:
    log.warning(
        "\n%s\n!!! rollout disk quotas are only POLLED (%s): directories and preallocation can outrun "
        "them between polls\n%s",
        "!" * 100,
        reason,
        "!" * 100,
    )


# ---------------------------------------------------------------- processes


@dataclass(frozen=True)
class ProcessResult:
    returncode: int | None
    timed_out: bool
    wall_s: float
    stdout: str
    stderr_tail: str
    limit: str | None = None
    """The jail limit the process group was killed for (``"disk"``), if any."""


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    log_dir: Path,
    name: str = "proc",
    max_stdout: int = 4_000_000,
    jail: Jail | None = None,
    ro_paths: Sequence[Path] = (),
    endpoints: Sequence[str] = (),
) -> ProcessResult:
    """Run ``argv`` in its own process group with a wall-clock limit; the group never outlives it.

    With ``jail`` the command runs inside it (``ro_paths`` added read-only; ``endpoints``, base URLs
    on loopback, the only network it reaches when the jail's network is isolated) and is killed
    when the jail's writable directories outgrow its disk quota. Raises ``FileNotFoundError`` /
    ``PermissionError`` when it cannot start (a start failure).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.stdout", log_dir / f"{name}.stderr"
    t0 = time.monotonic()
    ports = endpoint_ports(endpoints) if jail is not None and jail.network == "isolated" else []
    async with relays(ports, jail.rollout_id if jail is not None else "") as relay_dir:
        if jail is not None:
            await asyncio.to_thread(jail.prepare)
            jail.open_group()
            argv = jail.wrap(argv, cwd, ro_paths, (relay_dir, ports) if relay_dir is not None else None)
        return await _run(argv, cwd, env, timeout_s, out_path, err_path, max_stdout, jail, t0)


async def _run(  # noqa: PLR0917
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    out_path: Path,
    err_path: Path,
    max_stdout: int,
    jail: Jail | None,
    t0: float,
) -> ProcessResult:
    limit: str | None = None
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        waiter = asyncio.ensure_future(proc.wait())
        quota = jail.limits.disk_bytes if jail is not None else None
        guard = asyncio.ensure_future(_over_quota(jail, quota)) if jail is not None and quota else None
        try:
            done, _ = await asyncio.wait(
                [f for f in (waiter, guard) if f is not None],
                timeout=timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            timed_out = not done
            over = guard is not None and guard in done and waiter not in done
            if over or (jail is not None and _disk_full(jail, quota)):  # over it, or filled it then ended
                limit = "disk"
        finally:
            # normal exit, timeout, quota or cancellation: nothing of the group survives
            for f in (waiter, guard):
                if f is not None:
                    f.cancel()
            await _kill_group(proc)
    with out_path.open("rb") as fh:  # a flood of output stays on disk (capped by RLIMIT_FSIZE)
        stdout = fh.read(max_stdout).decode("utf-8", "replace")
    with err_path.open("rb") as fh:
        fh.seek(max(0, err_path.stat().st_size - 4000))
        stderr = fh.read().decode("utf-8", "replace")
    return ProcessResult(
        None if timed_out else proc.returncode, timed_out, time.monotonic() - t0, stdout, stderr, limit
    )


def _disk_full(jail: Jail, quota: int | None) -> bool:
    """Whether the jail's own filesystem is full (recorded once as a disk limit)."""
    if jail.disk is None or not jail.disk.full():
        return False
    if not any(e.get("limit") == "disk" for e in jail.events):
        used = jail.disk.used_bytes()
        event = {"kind": "limit", "limit": "disk", "used_bytes": used, "quota_bytes": quota, "full": True}
        jail.events.append(event)
    return True


async def _over_quota(jail: Jail, quota: int) -> None:
    """Return once the jail's writable directories hold more than ``quota`` bytes (recorded)."""
    while True:
        await asyncio.sleep(QUOTA_POLL_S)
        if jail.disk is not None:  # its own filesystem refuses the writes; a full one ends the group
            if _disk_full(jail, quota):
                return
            continue
        used = await asyncio.to_thread(jail.disk_usage)
        if used > quota:
            jail.events.append({"kind": "limit", "limit": "disk", "used_bytes": used, "quota_bytes": quota})
            return


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    pgid = proc.pid  # start_new_session: the child leads its own group
    if not _signal_group(pgid, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
        return
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline:
        if proc.returncode is not None and not _group_alive(pgid):
            return
        await asyncio.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await asyncio.shield(proc.wait())


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def marked_pids(rollout_id: str) -> list[int]:
    """Live processes whose environment carries ``COWORKENV_SANDBOX=<rollout_id>`` (Linux /proc)."""
    needle = f"{MARKER}={rollout_id}".encode()
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def peer_rollout(client: str | None) -> str | None:
    """The rollout whose process holds the loopback TCP connection from ``client`` (``"ip:port"``).

    Linux ``/proc`` only: the socket's inode from ``/proc/net/tcp{,6}``, the process holding it,
    the sandbox marker in its environment. None when any step finds nothing (not a sandbox peer).
    Used to attribute a refused request to the rollout that made it; costs one ``/proc`` scan.
    """
    if not client or ":" not in client:
        return None
    try:
        port = int(client.rsplit(":", 1)[1])
    except ValueError:
        return None
    if port in RELAYED:  # relayed from a jail with an isolated network: known without a scan
        return RELAYED[port]
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and int(cols[1].rsplit(":", 1)[1], 16) == port and cols[9] != "0":
                inodes.add(f"socket:[{cols[9]}]")
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = list((entry / "fd").iterdir())
            if not any(os.readlink(fd) in inodes for fd in fds):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for var in environ:
            if var.startswith(f"{MARKER}=".encode()):
                return var.split(b"=", 1)[1].decode(errors="replace")
    return None


def kill_marked(rollout_id: str) -> int:
    """SIGKILL every process carrying the sandbox marker; returns how many were signalled."""
    n = 0
    for pid in marked_pids(rollout_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            n += 1
    return n
