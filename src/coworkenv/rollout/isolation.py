"""Jails for harness processes: bubblewrap namespaces plus resource limits, or a loud fallback.

Contract of :meth:`Jail.wrap` (mode ``bwrap``): the wrapped command sees an empty read-only root
holding only the system, read-only (``/usr`` and its ``/bin``, ``/lib*`` links; ``/etc`` without
the shadow files and, as root, with a passwd that names only root and the agent); a fresh
``/proc`` of its own pid namespace; a minimal ``/dev``; small private ``/tmp`` and ``/dev/shm``;
the sandbox's workspace, HOME and TMPDIR read-write at their host paths; and the read-only paths
it is given (a harness installation). Nothing else is mounted — not the project checkout, the task
specs and references, the graders, the capture store, the records or any other sandbox — so no
path, symlink or ``..`` reaches them. It runs in its own pid/ipc/uts namespaces and session and
dies with its parent. As root it runs as a per-rollout uid with no capabilities and no new
privileges (so the process limit binds that rollout alone), under a seccomp filter that refuses new
user namespaces (:mod:`coworkenv.rollout.seccomp`); otherwise in a user namespace that cannot make
more (``--disable-userns``). Its
network is its own loopback: it reaches only the endpoints it is given (the rollout's proxy
prefix and services), relayed by :mod:`coworkenv.rollout.netjail`; and those answer only the
rollout's secrets (:mod:`coworkenv.serve.access`). ``network="shared"`` (or no ``python3`` under
``/usr`` for the relay) leaves it the host's network, warned and recorded.

:meth:`Jail.verifier` runs a grader's ``command`` check in a clean room after the rollout's
processes are gone: a fresh jail (same uid and limits) whose only writable directories are a fresh
HOME and TMPDIR, the workspace mounted **read-only** as its working directory, and an environment
of our own (no variable the agent's session set), with Python in safe-path, no-user-site mode
(``PYTHONSAFEPATH=1``, ``PYTHONNOUSERSITE=1``: the workspace and ``~/.local`` are on no import
path), so nothing the agent left behind — a ``json.py`` beside the verifier, a ``.pth`` file, a
shell rc — runs in it.

Limits (``prlimit``, every mode): processes, address space, file size, open files, no core
dumps — each per process; and per rollout, where the kernel allows a control group
(:mod:`coworkenv.rollout.cgroups`): every process the rollout starts joins its group, which bounds
their resident memory together (``rollout_memory_bytes``) and their number (``processes``);
where it does not, a loud warning and ``meta.isolation.rollout_limits`` say so. The disk quota of
the writable directories is enforced by :func:`coworkenv.rollout.sandbox.run_process` with
:meth:`Jail.disk_usage`.

``COWORKENV_ISOLATION``: ``auto`` (default: bwrap when it starts here, else ``none`` with a loud
warning), ``bwrap`` (required: a jail that cannot start is a start failure), ``none`` (opt-out,
warned). The mode and any fallback reason go into every rollout's ``meta["isolation"]``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coworkenv.errors import CoworkError
from coworkenv.rollout.cgroups import RolloutGroup, cgroup_problem
from coworkenv.rollout.diskfs import RolloutDisk
from coworkenv.rollout.netjail import JAIL_DIR, forwarder_argv, jail_python
from coworkenv.rollout.seccomp import program as seccomp_program

log = logging.getLogger(__name__)

Mode = Literal["auto", "bwrap", "none"]
Network = Literal["isolated", "shared"]
MODE_ENV = "COWORKENV_ISOLATION"
NETWORK_ENV = "COWORKENV_ISOLATION_NETWORK"
GiB = 1 << 30
UID_BASE = 1_500_000_000
UID_SPAN = 100_000_000
_SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_HIDDEN_ETC = ("shadow", "gshadow", "shadow-", "gshadow-", "sudoers")
_SECCOMP_FD = 9


class IsolationError(CoworkError):
    """The jail cannot start here; the message says why and how to fix or opt out."""


@dataclass(frozen=True)
class Limits:
    """Per-rollout resource limits (``None``: unlimited)."""

    processes: int | None = 256
    """Processes and threads of the rollout (RLIMIT_NPROC)."""
    memory_bytes: int | None = 16 * GiB
    """Private writable memory (heap, anonymous mappings) of each process (RLIMIT_DATA). Not
    RLIMIT_AS: V8 reserves ~10 GiB of address space per WebAssembly instance (undici's HTTP
    parser), so an address-space limit breaks every Node harness's ``fetch``."""
    file_bytes: int | None = 1 * GiB
    """Largest file a process may write (RLIMIT_FSIZE)."""
    open_files: int | None = 4096
    disk_bytes: int | None = 2 * GiB
    """Total size of workspace + HOME + TMPDIR (watched while a process runs)."""
    tmpfs_bytes: int = 256 << 20
    """Size of each of the jail's in-memory ``/tmp`` and ``/dev/shm`` (held in RAM)."""
    rollout_memory_bytes: int | None = 4 * GiB
    """Resident memory of all the rollout's processes together (its control group, where the
    kernel allows one: :mod:`coworkenv.rollout.cgroups`); ``processes`` bounds the group too."""

    def prlimit(self, extra_processes: int = 0) -> list[str]:
        args = ["prlimit", "--core=0"]
        if self.processes is not None:
            args.append(f"--nproc={self.processes + extra_processes}")
        if self.memory_bytes is not None:
            args.append(f"--data={self.memory_bytes}")
        if self.file_bytes is not None:
            args.append(f"--fsize={self.file_bytes}")
        if self.open_files is not None:
            args.append(f"--nofile={self.open_files}")
        return [*args, "--"]


def requested_mode() -> Mode:
    raw = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if raw not in ("auto", "bwrap", "none"):
        raise IsolationError(f"{MODE_ENV}={raw!r}: expected auto, bwrap or none")
    return raw  # type: ignore[return-value]


@functools.cache
def bwrap_problem() -> str | None:
    """Why a bwrap jail cannot start here (None: it can). Probed once per process."""
    missing = [t for t in ("bwrap", "prlimit", "setpriv") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not found (apt-get install bubblewrap util-linux)"
    argv = [*_namespaces(True), *_system_mounts(), "--remount-ro", "/", *_as_agent(_probe_uid()), "/bin/true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to run: {exc}"
    if proc.returncode != 0:
        return f"the kernel refused the namespaces bwrap needs: {proc.stderr.strip()[-300:]}"
    return None


def _probe_uid() -> int | None:
    return UID_BASE + UID_SPAN if os.geteuid() == 0 else None


@functools.cache
def _warn_once(message: str) -> None:
    log.warning("\n%s\n!!! %s\n%s", "!" * 100, message, "!" * 100)


@dataclass(frozen=True)
class Isolation:
    """How a run isolates its harness processes: the mode and the limits."""

    mode: Mode = "auto"
    limits: Limits = field(default_factory=Limits)
    network: Network = "isolated"

    @classmethod
    def from_env(cls, limits: Limits | None = None) -> Isolation:
        net = os.environ.get(NETWORK_ENV, "isolated").strip().lower() or "isolated"
        if net not in ("isolated", "shared"):
            raise IsolationError(f"{NETWORK_ENV}={net!r}: expected isolated or shared")
        return cls(requested_mode(), limits or Limits(), net)  # type: ignore[arg-type]

    def effective_network(self) -> tuple[Network, str]:
        """(network used, reason when not isolated)."""
        if self.network == "shared":
            return "shared", f"shared network requested ({NETWORK_ENV}=shared)"
        if jail_python() is None:
            reason = "no python3 under /usr for the jail's endpoint relay"
            _warn_once(f"jailed harnesses share the host's network: {reason}")
            return "shared", reason
        return "isolated", ""

    def effective(self) -> tuple[Literal["bwrap", "none"], str]:
        """(mode used, reason when it is not bwrap). Raises when bwrap is required and refused."""
        if self.mode == "none":
            reason = f"isolation disabled ({MODE_ENV}=none)"
            _warn_once(f"harness processes are NOT isolated: {reason}; agents can read graders and records")
            return "none", reason
        problem = bwrap_problem()
        if problem is None:
            return "bwrap", ""
        if self.mode == "bwrap":
            raise IsolationError(f"{MODE_ENV}=bwrap but the jail cannot start: {problem}")
        _warn_once(
            f"harness processes are NOT isolated ({problem}); an agent's shell can read task specs, "
            f"references and records. Install bubblewrap, allow user namespaces, or set {MODE_ENV}=none "
            "to accept this knowingly."
        )
        return "none", problem

    def jail(
        self, rollout_id: str, writable: Sequence[Path], passwd_dir: Path, watched: Sequence[Path] = ()
    ) -> Jail:
        """A jail for one rollout: ``writable`` bound read-write, ``watched`` counted in its quota."""
        mode, reason = self.effective()
        uid = None
        if mode == "bwrap" and os.geteuid() == 0:
            digest = int(hashlib.sha256(rollout_id.encode()).hexdigest()[:12], 16)
            uid = UID_BASE + digest % UID_SPAN
        network, why = self.effective_network() if mode == "bwrap" else ("shared", reason)
        return Jail(
            mode,
            self.limits,
            tuple(writable),
            uid,
            passwd_dir,
            reason,
            watched=tuple(watched),
            network=network,
            network_reason=why,
            rollout_id=rollout_id,
        )


@dataclass
class Jail:
    """One rollout's jail (see the module docstring)."""

    mode: Literal["bwrap", "none"]
    limits: Limits
    writable: tuple[Path, ...]
    uid: int | None
    """The host uid the jailed processes run as (root hosts only)."""
    passwd_dir: Path
    reason: str = ""
    watched: tuple[Path, ...] = ()
    """Directories outside the jail that still count towards its disk quota (its logs)."""
    network: Network = "shared"
    network_reason: str = ""
    rollout_id: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Limits the rollout ran into (disk quota, ...): evidence for the record."""
    group: RolloutGroup | None = None
    """The rollout's control group (:meth:`open_group`; :func:`coworkenv.rollout.sandbox.run_process`
    and :meth:`verifier` open it), which every process :meth:`wrap` starts joins."""
    group_reason: str = ""
    """Why the rollout has no control group (per-process limits only), when it has none."""
    disk_fs: str = ""
    """The rollout's disk: its own filesystem, or why the quota is only polled."""
    disk: RolloutDisk | None = None
    """The rollout's own filesystem, when it has one (set by its sandbox)."""

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "uid": self.uid, "network": self.network}
        if self.reason:
            out["reason"] = self.reason
        if self.group_reason:
            out["rollout_limits"] = f"per process only: {self.group_reason}"
        if self.disk_fs:
            out["disk"] = self.disk_fs
        if self.network_reason and self.network_reason != self.reason:
            out["network_reason"] = self.network_reason
        return out

    def prepare(self) -> None:
        """Hand the writable directories to the jail's uid (files the host wrote in them too)."""
        if self.uid is None:
            return
        for root in self.writable:
            for path in (root, *root.rglob("*")):
                try:
                    if path.lstat().st_uid != self.uid:
                        os.lchown(path, self.uid, self.uid)
                except FileNotFoundError:
                    continue

    def disk_usage(self) -> int:
        """Bytes allocated in the writable and watched directories (st_blocks of files, directories
        and links)."""
        total = 0
        for root in (*self.writable, *self.watched):
            for dirpath, dirs, files in os.walk(root):
                for name in (*files, *dirs):  # a directory takes blocks too (30,000 of them: 118 MiB)
                    try:
                        total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                    except OSError:
                        continue
        return total

    def wrap(
        self,
        argv: Sequence[str],
        cwd: Path,
        ro_paths: Sequence[Path] = (),
        relay: tuple[Path, Sequence[int]] | None = None,
    ) -> list[str]:
        """``argv`` run inside the jail, starting in ``cwd`` (one of the writable directories).

        ``relay`` = (socket directory, ports) of :func:`coworkenv.rollout.netjail.relays`: with an
        isolated network those loopback ports, and only those, reach the host.
        """
        if self.mode == "none":
            return self._grouped([*self.limits.prlimit(_own_processes()), *argv])
        isolated = self.network == "isolated"
        out = [*self.limits.prlimit(0 if self.uid is not None else _own_processes()), *_namespaces(isolated)]
        out += _system_mounts()
        if self.uid is not None:
            out += ["--ro-bind", str(self._passwd()), "/etc/passwd"]
            out += ["--ro-bind", str(self._group()), "/etc/group"]
        for scratch in ("/tmp", "/dev/shm"):  # world-writable like the host's, but bounded
            out += ["--perms", "1777", "--size", str(self.limits.tmpfs_bytes), "--tmpfs", scratch]
        extra = [Path(p) for p in ro_paths if not _system_visible(Path(p))]
        binds = [(p, "--bind") for p in self.writable] + [(p, "--ro-bind") for p in extra]
        for parent in _parents([p for p, _ in binds]):
            out += ["--perms", "0755", "--dir", str(parent)]
        for path, how in binds:
            out += [how, str(path), str(path)]
        if isolated and relay is not None and relay[1]:
            python = jail_python()
            if python is None:
                raise IsolationError("the jail's endpoint relay needs python3 under /usr")
            out += [
                "--perms",
                "0755",
                "--dir",
                str(Path(JAIL_DIR).parent),
                "--ro-bind",
                str(relay[0]),
                JAIL_DIR,
            ]
            argv = forwarder_argv(python, relay[1], argv)
        out += ["--remount-ro", "/", "--chdir", str(cwd), *_as_agent(self.uid), *argv]
        if self.uid is not None and (bpf := self._seccomp()) is not None:
            # as root: no new user namespaces (bwrap reads the filter from fd 9, opened by a shell)
            at = out.index("--remount-ro")
            out[at:at] = ["--seccomp", str(_SECCOMP_FD)]
            out = ["/bin/sh", "-c", f'exec {_SECCOMP_FD}<"$0" && exec "$@"', str(bpf), *out]
        return self._grouped(out)  # joined on the host, before the namespaces: /sys is not in the jail

    def _seccomp(self) -> Path | None:
        """This jail's seccomp filter file (:mod:`coworkenv.rollout.seccomp`), written once."""
        path = self.passwd_dir / "seccomp.bpf"
        if not path.exists():
            prog = seccomp_program()
            if prog is None:
                _warn_once("no seccomp filter for this machine: a jailed process can make user namespaces")
                return None
            path.write_bytes(prog)
        return path

    def open_group(self) -> None:
        """Make the rollout's control group if the kernel allows one (once; the processes
        :meth:`wrap` starts from then on join it), else warn loudly and record why not."""
        if self.group is None and not self.group_reason:
            limits = self.limits
            problem = cgroup_problem()
            if problem is None:
                try:
                    self.group = RolloutGroup.create(
                        self.rollout_id or "rollout", limits.rollout_memory_bytes, limits.processes
                    )
                    weakref.finalize(self, self.group.close)  # a jail dropped unclosed still frees it
                except OSError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
            if problem is not None:
                self.group_reason = problem
                _warn_once(
                    f"rollout limits are PER PROCESS only ({problem}): a rollout's processes together "
                    "can exceed its memory and process limits and starve its neighbours"
                )

    def _grouped(self, argv: Sequence[str]) -> list[str]:
        return self.group.enter(argv) if self.group is not None and not self.group.closed else list(argv)

    def settle(self) -> None:
        """Add the limits the rollout's control group ran into (OOM kills, refused forks) to
        :attr:`events`."""
        if self.group is not None:
            self.events.extend(self.group.events())

    def close(self) -> None:
        """Kill what is left in the rollout's control group and remove it (after the rollout)."""
        if self.group is not None:
            self.group.close()

    def verifier(
        self, command: str, workspace: Path, timeout_s: float, room: Path
    ) -> subprocess.CompletedProcess[str]:
        """Run a ``command`` check in a clean room under ``room`` (see the module docstring); the
        caller has ended the rollout's processes."""
        home, tmp = room / "home", room / "tmp"
        if room.exists():
            shutil.rmtree(room)
        for d in (home, tmp):
            d.mkdir(parents=True)
        # this jail's mode, uid, limits and network; only the room writable (the jail's passwd
        # names writable[1] as the agent's home), nothing of the rollout's watched or recorded
        self.open_group()
        clean = dataclasses.replace(self, writable=(tmp, home), passwd_dir=room, watched=(), events=[])
        clean.prepare()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(home),
            "TMPDIR": str(tmp),
            "PYTHONSAFEPATH": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        argv = clean.wrap(["/bin/sh", "-c", command], workspace, ro_paths=(workspace,))
        return subprocess.run(
            argv,
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            start_new_session=True,
        )

    def _passwd(self) -> Path:
        path = self.passwd_dir / "passwd"
        if not path.exists():
            home = self.writable[1] if len(self.writable) > 1 else self.writable[0]
            path.write_text(
                f"root:x:0:0:root:/root:/bin/sh\nagent:x:{self.uid}:{self.uid}:agent:{home}:/bin/sh\n"
            )
        return path

    def _group(self) -> Path:
        path = self.passwd_dir / "group"
        if not path.exists():
            path.write_text(f"root:x:0:\nagent:x:{self.uid}:\n")
        return path


def _namespaces(isolate_network: bool) -> list[str]:
    common = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if isolate_network:
        common.append("--unshare-net")
    common += ["--hostname", "sandbox", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:  # privileged bwrap; the command drops to the rollout's uid (setpriv)
        return ["bwrap", *common, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return ["bwrap", "--unshare-user", "--disable-userns", *common]


def _system_mounts() -> list[str]:
    out = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            out += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            out += ["--ro-bind", str(host), str(host)]
    out += ["--ro-bind", "/etc", "/etc"]
    for name in _HIDDEN_ETC:
        if (Path("/etc") / name).exists():
            out += ["--ro-bind", "/dev/null", f"/etc/{name}"]
    return [*out, "--proc", "/proc", "--dev", "/dev"]


def _as_agent(uid: int | None) -> list[str]:
    if uid is None:
        return ["--"]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
    return ["--", *drop, "--no-new-privs", "--"]


def _system_visible(path: Path) -> bool:
    """Whether ``path`` is already inside the jail's read-only system mounts."""
    roots = [Path("/usr"), Path("/etc"), *(Path("/") / n for n in _SYSTEM_LINKS)]
    return any(path == r or r in path.parents for r in roots)


def _parents(paths: Sequence[Path]) -> list[Path]:
    """Every ancestor of ``paths`` below ``/`` the jail must create (shallowest first), skipping
    the system mounts and ``/tmp`` (a tmpfs the jail makes itself)."""
    skip = {Path("/"), Path("/tmp"), Path("/proc"), Path("/dev")}
    seen: dict[Path, None] = {}
    for path in paths:
        for parent in reversed(path.parents):
            if parent not in skip and parent not in paths and not _system_visible(parent):
                seen.setdefault(parent, None)
    return sorted(seen, key=lambda p: len(p.parts))


def _own_processes() -> int:
    """How many processes this user already runs (RLIMIT_NPROC counts them all when not root)."""
    if os.geteuid() == 0:
        return 0
    uid = os.getuid()
    n = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                n += entry.stat().st_uid == uid
            except OSError:
                continue
    return n
