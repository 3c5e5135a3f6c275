"""Three policies every framework integration is checked with, and our own grading of them.

``reference`` (the task's reference steps and answer), ``nothing`` (no call, empty answer) and
``unsafe`` (the reference plus the call its first forbidden rule names): an integration must pay
each exactly what :func:`ours` — the in-process replay graded by our grader — pays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from coworkenv.grading.replay import run_steps
from coworkenv.integrations.session import Services
from coworkenv.services.trial import LoadedTask, load_task
from coworkenv.spec import TaskSpec, ToolCall
from coworkenv.synth.alternates import forbidden_call
from coworkenv.tasks.builtin import builtin_task

TASKS = (
    "M1003_ticket_kb_resolution",
    "M1101_vendor_bank_change_verification",
    "M1109_duplicate_charge_ticket",
)
Policy = tuple[list[ToolCall], str]


def specs() -> list[TaskSpec]:
    return [builtin_task(t) for t in TASKS]


def policies(task: LoadedTask) -> dict[str, Policy]:
    ref = task.spec.reference
    steps = [s for s in ref.steps if isinstance(s, ToolCall)]
    bad = forbidden_call(task, task.spec.forbidden[0])
    assert bad is not None, task.spec.id
    return {
        "reference": (steps, ref.final_message),
        "nothing": ([], ""),
        "unsafe": ([*steps, bad], ref.final_message),
    }


def ours(spec: TaskSpec, policy: Policy) -> float:
    graded = run_steps(load_task(spec), policy[0], policy[1]).grade
    assert graded.reward is not None
    return graded.reward


@contextmanager
def openenv_served(tasks: Sequence[TaskSpec] | None = None) -> Iterator[tuple[Services, str]]:
    """The tasks' services and our OpenEnv server over them (its base URL), both on loopback."""
    from coworkenv.integrations.openenv import create_openenv_app
    from coworkenv.serve.http import background_server

    with Services.local(tasks or specs()) as services, background_server(create_openenv_app(services)) as url:
        yield services, url
