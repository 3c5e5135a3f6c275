"""Under ``CI=true`` a skipped test is a failed test, unless its reason is on an explicit allowlist.

Contract: a pytest plugin (registered by ``tests/conftest.py``). When the environment variable
``CI`` is ``true``/``1``/``yes``, every skip report — a ``pytest.skip`` in a test or fixture, a
``skipif`` marker, a module-level ``importorskip`` — is turned into a failure whose message gives
the original reason, unless that reason matches a pattern in :data:`ALLOWED_IN_CI`: reasons CI
cannot fix by installing something, because they name a resource CI does not have by design.
Missing system packages, harness CLIs, Chromium or Claw-Eval data are *not* on the list: CI is
where they must be present, so a skip there would hide tests that never ran. ``xfail`` is left
alone. Outside CI nothing changes. The terminal summary always prints the count of skipped tests
(and, under CI, of skips turned into failures) so a run that passes by skipping shows it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator

import pytest

# Skip reasons that may stand in CI. Each names a resource the CI machine does not have by design;
# a test that wants to skip in CI must say so with one of these reasons.
ALLOWED_IN_CI: tuple[re.Pattern[str], ...] = (
    re.compile(r"^needs a (CUDA )?GPU\b"),
    re.compile(r"^needs a real model API key\b"),
)

_counts = {"skipped": 0, "failed_in_ci": 0}


def in_ci(env: dict[str, str] | None = None) -> bool:
    value = (env if env is not None else os.environ).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")


def allowed_in_ci(reason: str) -> bool:
    reason = reason.removeprefix("Skipped: ").strip()
    return any(p.search(reason) for p in ALLOWED_IN_CI)


def _reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _ci_failure(reason: str) -> str:
    return (
        f"skipped under CI=true: {reason.removeprefix('Skipped: ')}\n"
        "CI must run this test (install what it needs: scripts/install_system_deps.sh), or the skip "
        "reason must be on ALLOWED_IN_CI in tests/ci_skips.py"
    )


def _judge(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _reason(report.longrepr)
    if in_ci() and not allowed_in_ci(reason):
        report.outcome = "failed"
        report.longrepr = _ci_failure(reason)
        _counts["failed_in_ci"] += 1
    else:
        _counts["skipped"] += 1


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _judge(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _judge(report)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    line = f"skipped tests: {_counts['skipped']}"
    if in_ci():
        line += f" (allowed in CI); skips failed under CI=true: {_counts['failed_in_ci']}"
    terminalreporter.write_line(line)
