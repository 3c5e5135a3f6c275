"""Limits per rollout, not per process: a rollout's processes together stay under its memory and
process limits (its control group), and a rollout that runs into a limit is graded, not unscored.

Before: six children each held their share under a per-process data limit (1.18 GiB under
256 MiB); one rollout could starve its neighbours' groups. Where the kernel gives no control group
the fallback is loud and recorded (``meta.isolation.rollout_limits``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from coworkenv.rollout.cgroups import RolloutGroup, cgroup_problem
from coworkenv.rollout.execute import _label
from coworkenv.rollout.harnesses.base import HarnessResult
from coworkenv.rollout.isolation import Isolation, Limits
from coworkenv.rollout.redteam import quota_probe
from coworkenv.rollout.sandbox import Sandbox, run_process
from coworkenv.tasks.builtin import builtin_task

MiB = 1 << 20
CHILDREN = """
import subprocess, sys
code = "x = b'\\\\x01' * ({mib} << 20); import time; time.sleep(1.5)"
kids = [subprocess.Popen([sys.executable, "-c", code]) for _ in range({n})]
print(" ".join(str(k.wait()) for k in kids))
"""
FORKS = """
import subprocess, sys
ok = refused = 0
kids = []
for _ in range({n}):
    try:
        kids.append(subprocess.Popen(["sleep", "1"]))
        ok += 1
    except OSError:
        refused += 1
for k in kids:
    k.wait()
print(ok, refused)
"""


def _require_groups() -> None:
    problem = cgroup_problem()
    if problem is not None:
        pytest.fail(f"this machine gives no control group ({problem}): rollout limits are per process")


def _run(
    tmp_path: Path,
    limits: Limits,
    script: str,
    rid: str,
    *,
    disk: int | None = None,
    look: Callable[[Sandbox], None] | None = None,
) -> tuple[str, list[dict[str, object]]]:
    """Run ``script`` in a jailed sandbox; ``look`` sees the sandbox after the run, before cleanup."""
    box = Sandbox.create(tmp_path, rid, builtin_task("M1003_ticket_kb_resolution"), disk_bytes=disk)
    jail = box.jail(Isolation("auto", limits))
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    try:
        res = asyncio.run(
            run_process(
                [python, "-c", script],
                cwd=box.workspace,
                env=box.env(),
                timeout_s=60,
                log_dir=box.logs,
                jail=jail,
            )
        )
        jail.settle()
        if look is not None:
            look(box)
        assert jail.group is not None
        dirs = jail.group.dirs
    finally:
        jail.close()
        box.cleanup()
    assert not any(d.exists() for d in dirs)  # the group is gone with the rollout
    return res.stdout.strip(), jail.events


def test_the_rollouts_processes_share_one_memory_limit(tmp_path: Path) -> None:
    _require_groups()
    limits = Limits(processes=64, memory_bytes=1024 * MiB, rollout_memory_bytes=96 * MiB, disk_bytes=None)
    out, events = _run(tmp_path, limits, CHILDREN.format(mib=48, n=6), "mem")
    codes = [int(c) for c in out.split()]
    assert len(codes) == 6
    # 6 x 48 MiB under 96 MiB for the rollout: at most one child fits beside the others' start-up
    assert sum(c == -9 for c in codes) >= 4, codes
    assert any(e["limit"] == "memory" for e in events), events
    # each child alone is far under its per-process limit (1 GiB): only the group stops them
    out, events = _run(tmp_path, limits, CHILDREN.format(mib=48, n=1), "mem-one")
    assert out == "0"
    assert not [e for e in events if e["limit"] == "memory"]


def test_the_rollouts_processes_share_one_process_limit(tmp_path: Path) -> None:
    _require_groups()
    limits = Limits(processes=12, rollout_memory_bytes=None, disk_bytes=None)
    out, events = _run(tmp_path, limits, FORKS.format(n=30), "pids")
    started, refused = (int(x) for x in out.split())
    assert started + refused == 30
    assert started <= 12
    assert refused >= 18
    assert any(e["limit"] == "processes" for e in events), events


def test_a_group_left_by_a_killed_run_is_swept_on_reuse() -> None:
    _require_groups()
    first = RolloutGroup.create("reused", 64 * MiB, 8)
    second = RolloutGroup.create("reused", 64 * MiB, 8)  # the first was never closed
    second.close()
    assert not any(d.exists() for d in first.dirs)


def test_a_rollout_that_hits_a_limit_is_graded_not_unscored() -> None:
    """The policy ran its harness into a limit (the harness died of it): its outcome, scored."""
    crashed = HarnessResult(exit_code=137)
    assert _label(crashed, [], 0) is not None  # no model call at all: nothing to score
    from coworkenv.proxy.capture import CapturedCall

    call = CapturedCall.model_construct(seq=0, error=None, finish_reason="stop")
    assert _label(crashed, [call], 1) is not None  # a crash of ours: labelled infra
    hit = [{"kind": "limit", "limit": "memory", "oom_kills": 1}]
    assert _label(crashed, [call], 1, hit) is None
    assert crashed.meta["ended_on"] == "limit:memory"


def test_without_a_group_the_fallback_is_loud_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    from coworkenv.rollout import isolation

    monkeypatch.setattr(isolation, "cgroup_problem", lambda: "no writable hierarchy (test)")
    jail = Isolation("auto").jail("r", (Path("/w"), Path("/h")), Path("/p"))
    jail.open_group()
    assert jail.group is None
    assert "per process only: no writable hierarchy (test)" in jail.describe()["rollout_limits"]


def test_directories_and_preallocation_count_against_the_disk_quota(tmp_path: Path) -> None:
    """The quota was polled over regular files only: 30,000 directories put 118 MiB past a 48 MiB
    quota, and a burst of fallocate landed 2.3x it before the poller acted. Now the sandbox is a
    filesystem of the quota's size: the write that would pass it fails (ENOSPC), whatever it is."""
    from coworkenv.rollout.diskfs import disk_problem

    problem = disk_problem()
    if problem is not None:
        pytest.fail(f"this machine gives no per-rollout filesystem ({problem}): the quota is only polled")
    quota = 16 * MiB
    limits = Limits(disk_bytes=quota)
    seen: dict[str, int] = {}

    def look(box: Sandbox) -> None:  # the filesystem itself, whether or not the probe got to print
        assert box.disk is not None
        seen["made"] = sum(1 for p in box.workspace.glob("d*") if p.is_dir())
        seen["allocated"] = sum(1 for p in box.workspace.glob("f*") if p.stat().st_blocks * 512 >= MiB)
        seen["used"] = box.disk.used_bytes()
        seen["full"] = box.disk.full()

    out, events = _run(tmp_path, limits, quota_probe(3000, 40), "disk", disk=quota, look=look)
    assert seen["made"] < 3000  # directories ran out of room (blocks or inodes) ...
    assert seen["allocated"] < 16  # ... and so did preallocation
    assert seen["used"] <= quota
    if out:  # the probe finished before the full filesystem ended the rollout: its own count agrees
        made, refused, allocated, used = (int(x) for x in out.split())
        assert (made, allocated) == (seen["made"], seen["allocated"])
        assert used <= quota
        assert made + allocated + refused == 3040
    else:  # a full filesystem ends the rollout, recorded as its disk limit (the race CI hit)
        assert seen["full"], seen  # ... because the probe filled it, not for some other reason
        assert any(e.get("limit") == "disk" and e.get("full") for e in events), events
    # a sandbox without a filesystem of its own still counts directories' blocks in its poll
    box = Sandbox.create(tmp_path, "poll", builtin_task("M1003_ticket_kb_resolution"))
    jail = box.jail(Isolation("auto", limits))
    for i in range(200):
        (box.workspace / f"d{i}").mkdir()
    assert jail.disk_usage() >= 200 * 4096
    box.cleanup()


USERNS = """
import subprocess, threading
t = threading.Thread(target=lambda: None)
t.start()
t.join()
r = subprocess.run(["unshare", "-Ur", "id", "-u"], capture_output=True, text=True)
print(r.returncode, subprocess.run(["sh", "-c", "echo ok"], capture_output=True, text=True).stdout.strip())
"""


def test_a_jailed_process_cannot_make_a_user_namespace(tmp_path: Path) -> None:
    """As root the jail's uid has no capabilities, but ``unshare -Ur`` once made it "root" of a
    new user namespace. A seccomp filter now refuses ``CLONE_NEWUSER`` (``clone3`` falls back to
    ``clone``, as under Docker); threads, forks and shells work."""
    import os

    from coworkenv.rollout.isolation import bwrap_problem

    if os.geteuid() != 0:
        pytest.fail("this test checks the root jail (without root, bwrap's --disable-userns does this)")
    if bwrap_problem() is not None:
        pytest.fail(f"the jail cannot start here: {bwrap_problem()}")
    out, _ = _run(tmp_path, Limits(), USERNS, "userns")
    code, shell = out.split()
    assert code != "0"
    assert shell == "ok"
