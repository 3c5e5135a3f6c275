"""CLI commands of the rollout stage, added to the main app by :func:`register`.

``coworkenv rollout TASKS... --harness loop[,claude-code,...] --trials K --backend SPEC --out DIR
--concurrency N [--ray [ADDRESS]]`` runs tasks × harnesses × trials and writes
``DIR/rollouts.jsonl`` plus ``DIR/calls/``; rerunning the same command resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from coworkenv.rollout.record import RolloutRecord
from coworkenv.spec import TaskSpec


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""
    app.command("rollout")(rollout)


def resolve_specs(tasks: list[str]) -> list[TaskSpec]:
    """Task files, directories of them, built-in ids, or ``builtin`` (the whole library)."""
    from coworkenv.cli import expand_paths, resolve_task
    from coworkenv.tasks.builtin import builtin_tasks

    specs: list[TaskSpec] = []
    for ref in tasks:
        if ref == "builtin":
            specs.extend(builtin_tasks())
        elif Path(ref).is_dir():
            specs.extend(resolve_task(str(p))[0] for p in expand_paths([Path(ref)]))
        else:
            specs.append(resolve_task(ref)[0])
    return specs


def rollout(  # noqa: PLR0917
    tasks: Annotated[list[str], typer.Argument(help="Task files/dirs or built-in ids ('builtin' = all).")],
    harness: Annotated[
        str,
        typer.Option(
            "--harness",
            help="Comma-separated: loop, claude-code, codex, qwen, opencode, gemini, openclaw, "
            "mini-swe-agent, openhands.",
        ),
    ] = "loop",
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per (task, harness).")] = 1,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="reference (each task's reference script) | embedded | scripted | openai:URL | "
            "vllm:URL | passthrough:URL ... (see coworkenv.proxy.backends.make_backend)",
        ),
    ] = "embedded",
    out: Annotated[Path, typer.Option("--out", help="Output directory (resumes if it has records).")] = Path(
        "rollouts"
    ),
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Rollouts at once.")] = 4,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Cap on each rollout's time limit (seconds).")
    ] = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            "--max-turns", min=1, help="Cap on each rollout's model calls (the task's limits.max_turns)."
        ),
    ] = None,
    timeout_clock: Annotated[
        str,
        typer.Option(
            "--timeout-clock",
            help="wall: the limit counts every second | work: not the seconds a rollout waits on the "
            "model (a shared local engine under load); at most 4x the limit of wall time",
        ),
    ] = "wall",
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray", help="Spread rollouts over Ray workers: 'local' or a cluster address (ray://...)."
        ),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Ray workers (with --ray).")] = 2,
    keep: Annotated[bool, typer.Option("--keep-sandboxes", help="Keep sandboxes for debugging.")] = False,
    sandbox: Annotated[
        str,
        typer.Option(
            "--sandbox",
            help="process (a jailed process per rollout) | harbor (the harness CLI inside the task's "
            "Harbor image; claude-code and codex; see coworkenv.harbor.teacher)",
        ),
    ] = "process",
) -> None:
    """Run rollouts: every task × harness × trial in its own sandbox, through the capturing proxy."""
    from rich.console import Console

    from coworkenv.errors import CoworkError
    from coworkenv.rollout.clock import CLOCKS
    from coworkenv.rollout.runner import run_rollouts

    if timeout_clock not in CLOCKS:
        raise CoworkError(f"--timeout-clock {timeout_clock!r}: choose wall or work")
    if timeout_clock != "wall" and (ray is not None or sandbox != "process"):
        raise CoworkError("--timeout-clock work: only with --sandbox process and without --ray")
    specs = resolve_specs(tasks)
    if max_turns is not None:
        specs = [
            s.model_copy(
                update={
                    "limits": s.limits.model_copy(update={"max_turns": min(max_turns, s.limits.max_turns)})
                }
            )
            for s in specs
        ]
    names = [h.strip() for h in harness.split(",") if h.strip()]
    console = Console(stderr=True)
    if sandbox == "harbor":
        import asyncio

        from coworkenv.harbor.teacher import harbor_rollouts

        records: list[RolloutRecord] = []
        for name in names:
            records += asyncio.run(
                harbor_rollouts(specs, name, backend, out, trials=trials, concurrency=concurrency)
            )
        ok = [r for r in records if r.rewards is not None]
        mean = sum(r.rewards.reward for r in ok if r.rewards) / len(ok) if ok else 0.0
        console.print(
            f"{len(records)} rollout(s) under Harbor: {len(ok)} graded (mean reward {mean:.3f}), "
            f"{len(records) - len(ok)} infra failure(s); records in {out / 'rollouts.jsonl'}"
        )
        fail_if_all_infra(records)
        return
    if sandbox != "process":
        raise CoworkError(f"--sandbox {sandbox!r}: choose process or harbor")
    job = (specs, names, trials, backend, out, concurrency)
    if ray is not None:
        from coworkenv.rollout.ray import run_rollouts_ray

        address = None if ray in ("", "local") else ray
        summary = run_rollouts_ray(*job, address=address, workers=workers, timeout_cap_s=timeout)
    else:
        summary = run_rollouts(*job, timeout_cap_s=timeout, timeout_clock=timeout_clock, keep_sandboxes=keep)
    console.print(summary.line())
    fail_if_all_infra(summary.records)


def fail_if_all_infra(records: list[RolloutRecord]) -> None:
    """Every rollout of this run failed for reasons not the policy's (e.g. an unreachable model
    endpoint): say why in one line and exit non-zero instead of reporting an empty success."""
    from coworkenv.errors import CoworkError

    if records and all(r.status == "infra_failure" for r in records):
        first = next((r.failure for r in records if r.failure is not None), None)
        why = f"{first.kind}: {first.detail}" if first else "unknown"
        raise CoworkError(f"all {len(records)} rollout(s) failed before the policy could act ({why[:300]})")
