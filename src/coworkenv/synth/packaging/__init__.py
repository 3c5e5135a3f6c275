"""Packaging accepted tasks as self-contained directories, in three layouts.

Contract: :func:`export_task` writes one :class:`~coworkenv.spec.TaskSpec` as ``<out>/<task_id>/``
in a layout (:data:`FORMATS`); :func:`import_package` reads such a directory back, and for every
layout ``import_package(export_task(spec, out, fmt), fmt) == spec`` (tested over the built-in
library). :func:`load_specs` reads the input of ``coworkenv package``: a directory of task JSON files
(as ``coworkenv synth`` writes them), a directory of task directories, or a single task.

* ``coworkenv`` — ``task.json`` (the spec) plus the initial ``workspace/`` files, if any.
* ``claw-eval`` — ``task.yaml`` + ``fixtures/<service>/<table>.json`` + ``grader.py`` (a Claw-Eval
  grader that grades through coworkenv); what the format cannot express sits in task.yaml's
  ``coworkenv`` key (see :mod:`coworkenv.synth.packaging.claw_eval`).
* ``harbor`` — ``instruction.md``, ``task.toml``, ``environment/``, ``solution/``, ``tests/`` (see
  :mod:`coworkenv.synth.packaging.harbor`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from coworkenv.errors import SpecError
from coworkenv.spec import TaskSpec

Format = Literal["coworkenv", "claw-eval", "harbor"]
FORMATS: tuple[Format, ...] = ("coworkenv", "claw-eval", "harbor")


def _exporter(fmt: str) -> Callable[[TaskSpec, Path], Path]:
    if fmt == "coworkenv":
        from coworkenv.synth.packaging.coworkenv import export_task as own

        return own
    if fmt == "claw-eval":
        from coworkenv.synth.packaging.claw_eval import export_task as claw

        return claw
    if fmt == "harbor":
        from coworkenv.synth.packaging.harbor import export_task as harbor

        return harbor
    raise SpecError.single("--format", "format", f"unknown format {fmt!r}; expected one of {list(FORMATS)}")


def export_task(spec: TaskSpec, out: Path, fmt: str) -> Path:
    """Write ``spec`` as ``<out>/<spec.id>/`` in layout ``fmt``; returns that directory."""
    return _exporter(fmt)(spec, Path(out))


def import_package(task_dir: Path, fmt: str) -> tuple[TaskSpec, list[str]]:
    """Read a packaged task directory back; notes name anything that did not map exactly."""
    task_dir = Path(task_dir)
    if fmt == "coworkenv":
        from coworkenv.synth.packaging.coworkenv import import_task as own

        return own(task_dir)
    if fmt == "claw-eval":
        from coworkenv.importers.claw_eval import import_task as claw

        return claw(task_dir)
    if fmt == "harbor":
        from coworkenv.importers.harbor import import_task as harbor

        return harbor(task_dir)
    raise SpecError.single("--format", "format", f"unknown format {fmt!r}; expected one of {list(FORMATS)}")


def load_specs(src: Path) -> list[tuple[TaskSpec, Path]]:
    """Task specs under ``src``: a task file, a task directory, or a directory of either."""
    from coworkenv.tasks.load import TASK_FILE_NAMES, load_spec

    src = Path(src)
    if not src.exists():
        raise SpecError.single(src, "", "not found (expected a task JSON file or a directory of them)")
    if src.is_file() or any((src / n).is_file() for n in TASK_FILE_NAMES):
        return [(load_spec(src), src)]
    found: list[Path] = []
    for child in sorted(src.iterdir()):
        if (child.is_file() and child.suffix in (".json", ".yaml", ".yml")) or (
            child.is_dir() and any((child / n).is_file() for n in TASK_FILE_NAMES)
        ):
            found.append(child)
    if not found:
        raise SpecError.single(src, "", "no task files (*.json, or <dir>/task.json) in this directory")
    return [(load_spec(p), p) for p in found]


__all__ = ["FORMATS", "Format", "export_task", "import_package", "load_specs"]
