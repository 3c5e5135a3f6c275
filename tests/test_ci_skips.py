"""The CI skip policy: under CI=true a skip fails unless its reason is allowed; the count is printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ci_skips import allowed_in_ci, in_ci

ROOT = Path(__file__).resolve().parents[1]

SUITE = """
import pytest
pytest.importorskip("no_such_module_for_ci_skips")
"""
TESTS = """
import pytest

@pytest.fixture
def chromium():
    pytest.skip("chromium not installed")

def test_uses_chromium(chromium):
    pass

@pytest.mark.skipif(True, reason="Claw-Eval tasks not found")
def test_marker():
    pass

def test_gpu():
    pytest.skip("needs a GPU: the trainer's CUDA path")

@pytest.mark.xfail(reason="known")
def test_xfail():
    raise AssertionError

def test_ok():
    pass
"""


def _pytest(tmp: Path, ci: str | None, *files: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.ci_skips",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:asyncio",
        *files,
    ]
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "test_some.py").write_text(TESTS)
    (tmp_path / "test_module_skip.py").write_text(SUITE)
    return tmp_path


def test_outside_ci_skips_stay_skips_and_are_counted(suite: Path) -> None:
    res = _pytest(suite, None, "test_some.py")
    assert res.returncode == 0, res.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in res.stdout
    assert "skipped tests: 3" in res.stdout


def test_under_ci_a_skip_fails_unless_its_reason_is_allowed(suite: Path) -> None:
    res = _pytest(suite, "true", "test_some.py")
    assert res.returncode == 1, res.stdout
    assert "1 passed, 1 skipped, 1 xfailed, 2 errors" in res.stdout  # a skip in setup: an error
    assert "skipped under CI=true: chromium not installed" in res.stdout
    assert "skipped under CI=true: Claw-Eval tasks not found" in res.stdout
    assert "skipped tests: 1 (allowed in CI); skips failed under CI=true: 2" in res.stdout


def test_under_ci_a_module_level_skip_is_a_collection_error(suite: Path) -> None:
    assert _pytest(suite, None, "test_module_skip.py").returncode == 5  # skipped module: no tests ran
    res = _pytest(suite, "true", "test_module_skip.py")
    assert res.returncode not in (0, 5), res.stdout
    assert "skipped under CI=true: could not import 'no_such_module_for_ci_skips'" in res.stdout


def test_policy_helpers() -> None:
    assert in_ci({"CI": "true"})
    assert in_ci({"CI": "1"})
    assert not in_ci({"CI": "false"})
    assert not in_ci({})
    assert allowed_in_ci("Skipped: needs a GPU (CUDA)")
    assert allowed_in_ci("needs a CUDA GPU")
    assert not allowed_in_ci("chromium not installed")
    assert not allowed_in_ci("no real harness installed; needs a GPU")  # the reason must lead with it
