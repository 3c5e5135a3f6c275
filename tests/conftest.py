"""Shared fixtures: where the Claw-Eval reference tasks live, and small spec builders; registers the
CI skip policy (``tests/ci_skips.py``: under ``CI=true`` a skip is a failure unless allowed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests import ci_skips

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ci_skips, "coworkenv-ci-skips")


def claw_eval_dir() -> Path | None:
    for cand in (os.environ.get("COWORKENV_CLAW_EVAL"), ROOT.parent / "shared" / "claw-eval" / "tasks"):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return None


@pytest.fixture
def claw_eval_tasks() -> Path:
    d = claw_eval_dir()
    if d is None:
        pytest.skip(
            "Claw-Eval task data not found (set COWORKENV_CLAW_EVAL or place shared/ beside the repo)"
        )
    return d


def base_spec(**over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "id": "t1",
        "name": "test task",
        "category": "ops",
        "difficulty": "easy",
        "mock_today": "2026-03-10",
        "request": "Escalate the stale enterprise ticket.",
        "services": {
            "helpdesk": {
                "tickets": [
                    {
                        "ticket_id": "TK-1",
                        "title": "Login broken",
                        "priority": "high",
                        "status": "open",
                        "created_at": "2026-03-05T09:00:00Z",
                        "customer_id": "C1",
                    },
                    {
                        "ticket_id": "TK-2",
                        "title": "Typo on page",
                        "priority": "low",
                        "status": "open",
                        "created_at": "2026-03-09T09:00:00Z",
                        "customer_id": "C2",
                    },
                ]
            }
        },
        "tools": [
            "helpdesk_list_tickets",
            "helpdesk_get_ticket",
            "helpdesk_update_ticket",
            "helpdesk_close_ticket",
        ],
        "completion_checks": [
            {"kind": "tool_called", "name": "listed", "weight": 0.2, "tool": "helpdesk_list_tickets"},
            {
                "kind": "audit_present",
                "name": "updated",
                "weight": 0.5,
                "service": "helpdesk",
                "action_key": "updated_tickets",
                "targets": [
                    {"field": "ticket_id", "values": ["TK-1"]},
                    {"field": "priority", "values": ["critical"]},
                ],
            },
            {"kind": "keywords_present", "name": "answer", "weight": 0.3, "keywords": ["TK-1", "escalat"]},
        ],
        "forbidden": [{"tool": "helpdesk_close_ticket", "reason": "only escalate"}],
        "reference": {
            "steps": [
                {"tool": "helpdesk_list_tickets", "args": {}},
                {"tool": "helpdesk_update_ticket", "args": {"ticket_id": "TK-1", "priority": "critical"}},
            ],
            "final_message": "TK-1 escalated to critical.",
        },
    }
    spec.update(over)
    return spec
