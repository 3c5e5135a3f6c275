"""The built-in task library shipped in the package: ``tasks/library/<task_id>.json``.

Each file is one complete :class:`~coworkenv.spec.TaskSpec` (records, checks, reference solution).
``builtin_tasks()`` loads and validates them all (cached); ``builtin_task(id)`` one of them.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from coworkenv.spec import TaskSpec
from coworkenv.tasks.load import load_spec


def library_dir() -> Path:
    return Path(str(resources.files("coworkenv.tasks") / "library"))


@cache
def builtin_tasks() -> tuple[TaskSpec, ...]:
    return tuple(load_spec(p) for p in sorted(library_dir().glob("*.json")))


def builtin_task(task_id: str) -> TaskSpec:
    for spec in builtin_tasks():
        if spec.id == task_id:
            return spec
    raise KeyError(f"no built-in task {task_id!r}; see `coworkenv tasks list`")
