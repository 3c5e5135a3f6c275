"""The project's own layout: ``<out>/<id>/task.json`` (the complete spec) + ``workspace/`` files.

``task.json`` is authoritative; ``workspace/`` is a readable copy of the spec's initial workspace
(for people and harnesses that mount files). :func:`import_task` loads ``task.json`` and notes any
workspace file that was edited, added or removed after export.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from coworkenv.spec import TaskSpec

WORKSPACE_DIR = "workspace"


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write relative path → text under ``root``, refusing paths that escape it."""
    base = root.resolve()
    for rel, text in sorted(files.items()):
        path = (base / rel).resolve()
        if not path.is_relative_to(base) or path == base:
            raise ValueError(f"path escapes {root}: {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def read_files(root: Path) -> dict[str, str]:
    """Every file under ``root`` as relative POSIX path → text."""
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def export_task(spec: TaskSpec, out: Path) -> Path:
    d = Path(out) / spec.id
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / "task.json").write_text(spec.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if spec.workspace:
        write_files(d / WORKSPACE_DIR, dict(spec.workspace))
    return d


def import_task(task_dir: Path) -> tuple[TaskSpec, list[str]]:
    from coworkenv.tasks.load import load_spec

    spec = load_spec(Path(task_dir) / "task.json")
    notes: list[str] = []
    on_disk = read_files(Path(task_dir) / WORKSPACE_DIR)
    if on_disk and on_disk != dict(spec.workspace):
        changed = sorted(
            k for k in set(on_disk) | set(spec.workspace) if on_disk.get(k) != spec.workspace.get(k)
        )
        notes.append(f"{WORKSPACE_DIR}/ differs from task.json's workspace ({changed}); task.json wins")
    return spec, notes
