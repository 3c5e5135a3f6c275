"""A fresh install of every real harness starts inside the jail on its first run.

``scripts/install_harnesses.sh`` installs each pinned harness into a fresh, empty
``COWORKENV_HARNESS_DIR`` (npm and pip serve from their local caches after the setup step, so this
takes about two minutes on 2 cores); then each harness's :meth:`probe` (it prints its version) runs
exactly as a rollout runs the CLI: inside a jail (bubblewrap, the jail's uid, the installation
read-only), with a fresh HOME. Nothing may be left for that first run to finish: OpenClaw, installed
without npm's scripts, once failed here with "package lifecycle is incomplete" because its launcher
tried to finish its package lifecycle in the read-only installation. A machine where a harness
once ran outside the jail hides such a defect; a fresh directory does not.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from coworkenv.rollout.harnesses import HARNESS_NAMES, get_harness
from coworkenv.rollout.harnesses.npm import NpmCliHarness
from coworkenv.rollout.isolation import Isolation
from coworkenv.rollout.sandbox import Sandbox, run_process
from coworkenv.tasks.builtin import builtin_task

ROOT = Path(__file__).resolve().parents[1]
REAL = tuple(n for n in HARNESS_NAMES if n != "loop")


@pytest.fixture(scope="module")
def fresh_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm not found (scripts/install_system_deps.sh installs the harnesses' runtime)")
    root = tmp_path_factory.mktemp("harnesses")
    env = {**os.environ, "COWORKENV_HARNESS_DIR": str(root)}
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install_harnesses.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


@pytest.mark.parametrize("name", REAL)
def test_fresh_install_starts_in_the_jail(name: str, fresh_dir: Path, tmp_path: Path) -> None:
    mp = pytest.MonkeyPatch()
    mp.setenv("COWORKENV_HARNESS_DIR", str(fresh_dir))
    try:
        harness = get_harness(name)
        assert isinstance(harness, NpmCliHarness)
        install = harness.install_dir()
        assert install.is_relative_to(fresh_dir)
        harness.check_installed()  # binary and the .installed stamp, written last
        box = Sandbox.create(tmp_path, f"probe-{name}", builtin_task("M1003_ticket_kb_resolution"))
        jail = box.jail(Isolation.from_env())
        assert jail.mode == "bwrap", jail.reason  # the first run must be a jailed one
        argv, extra = harness.probe()
        res = asyncio.run(
            run_process(
                argv,
                cwd=box.workspace,
                env=box.env(extra),
                timeout_s=180,
                log_dir=box.logs,
                name=name,
                jail=jail,
                ro_paths=harness.runtime_paths(),
            )
        )
    finally:
        mp.undo()
    detail = f"{name}: rc={res.returncode}\nstdout: {res.stdout[-1500:]}\nstderr: {res.stderr_tail[-1500:]}"
    assert not res.timed_out, detail
    assert res.returncode == 0, detail
    if name == "mini-swe-agent":  # no --version: its help names the command
        assert "mini" in res.stdout, detail
    else:
        assert harness.pinned in res.stdout, detail
    # the jail kept the installation read-only: the first run changed nothing in it
    assert not list(install.rglob(".openclaw-lifecycle-pending")), detail
