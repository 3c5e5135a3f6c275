"""Scratch directories of dead runs are reclaimed, mounts included (rollout/scratch.py), and an
in-process harness's sandbox is plain directories (rollout/sandbox.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from coworkenv.rollout.diskfs import RolloutDisk, disk_problem
from coworkenv.rollout.sandbox import Sandbox
from coworkenv.rollout.scratch import OWNER_FILE, _boot_id, scratch_dir, sweep_abandoned
from coworkenv.tasks.builtin import builtin_task


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _run_dir(parent: Path, name: str, owner: str | None) -> Path:
    root = parent / name
    (root / "sandboxes" / "r0" / "workspace").mkdir(parents=True)
    if owner is not None:
        (root / OWNER_FILE).write_text(owner + "\n")
    return root


def test_only_dead_owners_scratch_is_removed(tmp_path: Path) -> None:
    dead = _run_dir(tmp_path, "coworkenv-run-dead", f"{_dead_pid()} {_boot_id()}")
    rebooted = _run_dir(tmp_path, "coworkenv-ray-old", f"{os.getpid()} another-boot")
    alive = _run_dir(tmp_path, "coworkenv-run-alive", f"{os.getpid()} {_boot_id()}")
    unowned = _run_dir(tmp_path, "coworkenv-run-unowned", None)
    other = _run_dir(tmp_path, "someone-else", f"{_dead_pid()} {_boot_id()}")
    assert sweep_abandoned(tmp_path) == 2
    assert not dead.exists()
    assert not rebooted.exists()
    assert alive.exists()
    assert unowned.exists()
    assert other.exists()


def test_a_new_scratch_dir_records_its_owner_and_sweeps_first(tmp_path: Path) -> None:
    dead = _run_dir(tmp_path, "coworkenv-run-dead", f"{_dead_pid()} {_boot_id()}")
    root = scratch_dir("coworkenv-run-", tmp_path)
    assert not dead.exists()
    assert (root / OWNER_FILE).read_text().split() == [str(os.getpid()), _boot_id()]
    assert sweep_abandoned(tmp_path) == 0  # its own is alive


def test_a_dead_runs_mounted_sandbox_is_unmounted(tmp_path: Path) -> None:
    root = _run_dir(tmp_path, "coworkenv-run-killed", f"{_dead_pid()} {_boot_id()}")
    box = root / "sandboxes" / "r1"
    problem = disk_problem()
    if problem is None:  # root with mkfs and a loop device (CI): a real mount, left as kill -9 leaves it
        RolloutDisk.mount(box, 8 << 20)
        assert os.path.ismount(box)
    assert sweep_abandoned(tmp_path) == 1
    assert not os.path.ismount(box)
    assert not root.exists()


def test_an_in_process_harness_sandbox_has_no_filesystem_of_its_own(tmp_path: Path) -> None:
    spec = builtin_task("M1003_ticket_kb_resolution")
    box = Sandbox.create(tmp_path, "r-inproc", spec, disk_bytes=48 << 20, hosts_processes=False)
    try:
        assert box.disk is None
        assert not os.path.ismount(box.root)
        assert box.workspace.is_dir()
    finally:
        assert box.cleanup() == 0
    assert not box.root.exists()


def test_released_scratch_is_never_swept(tmp_path: Path) -> None:
    from coworkenv.rollout.scratch import release_scratch

    root = _run_dir(tmp_path, "coworkenv-run-kept", f"{_dead_pid()} {_boot_id()}")
    release_scratch(root)
    assert sweep_abandoned(tmp_path) == 0
    assert root.exists()
