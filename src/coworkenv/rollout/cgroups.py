"""Per-rollout memory and process limits: one control group holds every process a rollout starts.

``prlimit`` bounds each process alone: six children under a 256 MiB data limit held 1.18 GiB, and
the process limit counted per uid. A control group bounds their sum, whatever they fork.

Contract:

* :func:`cgroup_problem` says why no group can be made here (``None``: one can). Tried in order:
  cgroup v2 (a unified hierarchy whose cgroup of this process delegates ``memory`` and ``pids`` in
  ``cgroup.subtree_control``), then cgroup v1 (writable ``memory`` and ``pids`` hierarchies).
  Needs write access to the hierarchy (root, or a delegated subtree).
* :meth:`RolloutGroup.create` makes ``coworkenv-<rollout id>`` beside this process's own group,
  with ``memory_bytes`` (the group's resident memory and page cache; over it the kernel's OOM
  killer kills inside the group only) and ``processes`` (tasks in the group; a fork past it fails).
* :meth:`RolloutGroup.enter` prefixes a command so that it joins the group before it execs (its
  children inherit the group, whatever session or namespace they move to).
* :meth:`RolloutGroup.events` lists the limits the group ran into (``memory``: OOM kills,
  ``processes``: refused forks), as ``{"kind": "limit", "limit": ..., ...}`` entries.
* :meth:`RolloutGroup.close` kills what is left in the group and removes it (idempotent).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path("/sys/fs/cgroup")
_NAME = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class _Layout:
    version: Literal[1, 2]
    memory: Path
    """The directory new groups are made in for the memory controller (v2: for both)."""
    pids: Path


def _own_paths() -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _v2_mount() -> Path | None:
    for candidate in (ROOT, ROOT / "unified"):
        if (candidate / "cgroup.controllers").is_file():
            return candidate
    return None


@functools.cache
def _layout() -> _Layout | str:
    paths = _own_paths()
    mount = _v2_mount()
    if mount is not None and "" in paths:
        parent = mount / paths[""].lstrip("/")
        try:
            delegated = set((parent / "cgroup.subtree_control").read_text().split())
        except OSError:
            delegated = set()
        if {"memory", "pids"} <= delegated and os.access(parent, os.W_OK):
            return _Layout(2, parent, parent)
    v1 = {c: ROOT / c / paths.get(c, "/").lstrip("/") for c in ("memory", "pids")}
    if all((d / "cgroup.procs").is_file() and os.access(d, os.W_OK) for d in v1.values()):
        return _Layout(1, v1["memory"], v1["pids"])
    if mount is not None:
        return (
            f"cgroup v2 at {mount} does not delegate memory and pids to {paths.get('', '?')} "
            "(cgroup.subtree_control) and no writable cgroup v1 memory/pids hierarchy exists"
        )
    return "no cgroup hierarchy with memory and pids controllers is writable here"


def cgroup_problem() -> str | None:
    """Why per-rollout groups cannot be made here (None: they can)."""
    layout = _layout()
    return layout if isinstance(layout, str) else None


@dataclass
class RolloutGroup:
    """One rollout's control group (see the module docstring)."""

    name: str
    layout: _Layout
    memory_bytes: int | None
    processes: int | None
    closed: bool = False
    _seen: dict[str, int] = field(default_factory=dict)

    @classmethod
    def create(cls, rollout_id: str, memory_bytes: int | None, processes: int | None) -> RolloutGroup:
        """Make the group (raises ``OSError`` when the kernel refuses; check :func:`cgroup_problem`)."""
        layout = _layout()
        if isinstance(layout, str):
            raise OSError(layout)
        group = cls(f"coworkenv-{_NAME.sub('_', rollout_id)[:180]}", layout, memory_bytes, processes)
        for d in group.dirs:
            if d.exists():  # a group left by a killed run: empty it and start afresh
                group._kill_members(d)
            d.mkdir(exist_ok=True)
        v2 = layout.version == 2
        mem, pids = group.memory_dir, group.pids_dir
        if memory_bytes is not None:
            (mem / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(memory_bytes))
            if v2 and (mem / "memory.swap.max").exists():
                (mem / "memory.swap.max").write_text("0")
        if processes is not None:
            (pids / "pids.max").write_text(str(processes))
        return group

    @property
    def memory_dir(self) -> Path:
        return self.layout.memory / self.name

    @property
    def pids_dir(self) -> Path:
        return self.layout.pids / self.name

    @property
    def dirs(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys((self.memory_dir, self.pids_dir)))

    def enter(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run as a member of the group (a shell joins it, then execs ``argv``)."""
        joins = "; ".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in self.dirs)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "cgroup-enter", *argv]

    def events(self) -> list[dict[str, Any]]:
        """The limits hit since the last call (each reported once)."""
        out: list[dict[str, Any]] = []
        v2 = self.layout.version == 2
        oom = _counter(self.memory_dir / ("memory.events" if v2 else "memory.oom_control"), "oom_kill")
        if oom > self._seen.get("memory", 0):
            out.append(
                {"kind": "limit", "limit": "memory", "oom_kills": oom, "limit_bytes": self.memory_bytes}
            )
            self._seen["memory"] = oom
        refused = _counter(self.pids_dir / "pids.events", "max")
        if refused > self._seen.get("processes", 0):
            out.append(
                {"kind": "limit", "limit": "processes", "refused_forks": refused, "max": self.processes}
            )
            self._seen["processes"] = refused
        return out

    def close(self) -> None:
        """Kill the group's remaining processes and remove it."""
        if self.closed:
            return
        for d in self.dirs:
            self._kill_members(d)
        self.closed = True

    @staticmethod
    def _kill_members(d: Path) -> None:
        deadline = time.monotonic() + 5.0
        while d.exists():
            try:
                members = [int(p) for p in (d / "cgroup.procs").read_text().split()]
            except OSError:
                members = []
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    continue
            try:
                d.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # a member in uninterruptible sleep: left for the next run to sweep
                time.sleep(0.02)


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):  # no such counter on this kernel (or a malformed one): none hit
        return 0
    return 0
