"""Replaying a task's reference solution through a trial, and grading the result.

``run_reference(task)`` opens a fresh trial, executes the reference steps in order through the
in-process face (``Trial.call``), applies ``workspace.*`` steps to a fresh workspace built from the
spec's initial files, and grades the episode with the reference's final message as the answer.
``run_steps`` is the same with any step list — used to replay plausible wrong solutions
(a missing step, the distractor path) in tests and in synthesis mutation tests.

Reference steps may use two workspace pseudo-tools, executed by the replayer (agents use their
harness's own file and shell tools instead): ``workspace.write_file {path, content}`` and
``workspace.run {command}``.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coworkenv.grading.grader import Episode, GradeResult, Judge, grade
from coworkenv.services.faults import FaultPlan
from coworkenv.services.trial import LoadedTask, Trial
from coworkenv.spec import TaskSpec, ToolCall, UserTurn

WORKSPACE_TOOLS = frozenset({"workspace.write_file", "workspace.run"})

Caller = Callable[[str, dict[str, Any]], Any]
"""A face: call a tool by name with arguments (in-process, HTTP or MCP)."""


@dataclass
class ReplayResult:
    episode: Episode
    grade: GradeResult
    trial: Trial


_WORKSPACE_CHECKS = frozenset({"file_exists", "file_matches", "json_field", "command"})


def needs_workspace(spec: TaskSpec, steps: Sequence[ToolCall | UserTurn] = ()) -> bool:
    """Whether an episode of ``spec`` reads or writes workspace files at all."""
    return (
        bool(spec.workspace)
        or any(c.kind in _WORKSPACE_CHECKS for c in spec.completion_checks)
        or any(isinstance(s, ToolCall) and s.tool in WORKSPACE_TOOLS for s in steps)
    )


@contextmanager
def _scratch(needed: bool) -> Iterator[Path]:
    """A temporary workspace, created only when needed (mkdtemp dominates fast replays)."""
    if not needed:
        yield Path("/nonexistent/coworkenv-workspace")
        return
    with tempfile.TemporaryDirectory(prefix="coworkenv-ws-") as tmp:
        yield Path(tmp)


def materialize_workspace(spec: TaskSpec, root: Path) -> Path:
    """Write the spec's initial workspace files under ``root`` (created if needed)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in spec.workspace.items():
        path = (root / rel).resolve()
        if not path.is_relative_to(root.resolve()):
            raise ValueError(f"workspace path escapes the workspace: {rel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def apply_workspace_step(step: ToolCall, workspace: Path) -> None:
    if step.tool == "workspace.write_file":
        path = (workspace / str(step.args["path"])).resolve()
        if not path.is_relative_to(workspace.resolve()):
            raise ValueError(f"path escapes the workspace: {step.args['path']}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(step.args.get("content", "")), encoding="utf-8")
    else:
        subprocess.run(
            str(step.args["command"]), shell=True, cwd=workspace, check=False, capture_output=True, timeout=60
        )


def run_steps(
    task: LoadedTask,
    steps: Sequence[ToolCall | UserTurn],
    final_message: str,
    *,
    trial_id: str = "replay",
    trial: Trial | None = None,
    faults: FaultPlan | None = None,
    judge: Judge | None = None,
    workspace: Path | None = None,
    caller: Callable[[Trial], Caller] | None = None,
) -> ReplayResult:
    """Execute ``steps`` against a trial (default: a fresh one) and grade.

    ``caller`` swaps the face (default in-process); its calls must reach ``trial``.
    """
    trial = trial or Trial(task, trial_id, faults)
    call: Caller = caller(trial) if caller else trial.call
    needed = needs_workspace(task.spec, steps)
    with _scratch(workspace is None and needed) as tmp:
        ws = workspace or tmp
        if workspace is not None or needed:
            materialize_workspace(task.spec, ws)
        for step in steps:
            if isinstance(step, UserTurn):
                continue
            if step.tool in WORKSPACE_TOOLS:
                apply_workspace_step(step, ws)
                continue
            result = call(step.tool, dict(step.args))
            if trial.faults.active:
                # a replayer that recovers: retry faulted calls a few times, as a careful agent would
                for _ in range(5):
                    last = trial.audit[-1] if trial.audit else None
                    if last is None or last.fault not in ("rate_limit", "server_error"):
                        break
                    result = call(step.tool, dict(step.args))
            del result
        episode = Episode(
            events=list(trial.audit),
            final_answer=final_message,
            state=trial.snapshot(),
            workspace=ws,
            transcript=final_message,
            initial_state=trial.initial_snapshot() if task.spec.forbidden_effects else None,
        )
        result_grade = grade(task.spec, episode, judge)
    return ReplayResult(episode, result_grade, trial)


def run_reference(task: LoadedTask, **kwargs: Any) -> ReplayResult:
    ref = task.spec.reference
    return run_steps(task, ref.steps, ref.final_message, **kwargs)
