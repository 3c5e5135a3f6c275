"""CLI commands of the curation stage, added to the main app by :func:`register`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from coworkenv.errors import SpecError


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""

    @app.command()
    def curate(  # noqa: PLR0917 (typer options)
        rollouts: Annotated[
            list[Path], typer.Argument(help="Rollouts directories (collections), merged in this order.")
        ],
        export: Annotated[Path | None, typer.Option("--export", help="Write the SFT JSONL here.")] = None,
        replace: Annotated[
            list[Path] | None,
            typer.Option(
                "--replace", help="A replacement collection: supersedes earlier records of its tasks."
            ),
        ] = None,
        profile: Annotated[
            str,
            typer.Option(
                help="Export threshold: mixed 0.5, multi_service/safety 0.8, extraction 0.999, harness 0.3."
            ),
        ] = "mixed",
        min_reward: Annotated[
            float | None, typer.Option(help="Override the profile's reward threshold.")
        ] = None,
        trivial_above: Annotated[
            float,
            typer.Option(
                help="Mean completion above this → TRIVIAL: such a task keeps one rollout per task "
                "prefix. --trivial-above 1 keeps every perfect demonstration (e.g. a reference teacher's)."
            ),
        ] = 0.8,
        unsolvable_below: Annotated[
            float, typer.Option(help="Mean completion below this → UNSOLVABLE.")
        ] = 0.2,
        mode: Annotated[str, typer.Option(help="workflow | dialogue | both")] = "workflow",
        keep_system: Annotated[
            bool,
            typer.Option(
                "--keep-system",
                help="Keep each rollout's own system prompt (the harness's) instead of the standard one: "
                "for a student served through the teacher's harness.",
            ),
        ] = False,
    ) -> None:
        """Select teacher rollouts, convert them to chat messages with tools, export JSONL for SFT."""
        from rich.console import Console

        from coworkenv.curation.convert import ConvertConfig
        from coworkenv.curation.export import curate as run_curate
        from coworkenv.curation.export import explain, write_jsonl
        from coworkenv.curation.select import EXPORT_THRESHOLDS, SelectConfig

        dirs = list(rollouts) + list(replace or [])
        for d in dirs:
            if not (d / "rollouts.jsonl").exists():
                raise SpecError.single(d, "rollouts.jsonl", "not found: pass a rollouts directory")
        if min_reward is None and profile not in EXPORT_THRESHOLDS:
            raise SpecError.single("--profile", "profile", f"unknown; one of {sorted(EXPORT_THRESHOLDS)}")
        if mode not in ("workflow", "dialogue", "both"):
            raise SpecError.single("--mode", "mode", "one of workflow, dialogue, both")
        if not 0 <= unsolvable_below <= trivial_above <= 1:
            raise SpecError.single(
                "--trivial-above", "thresholds", "need 0 <= unsolvable_below <= trivial_above <= 1"
            )
        cfg = SelectConfig(trivial_above, unsolvable_below, profile, min_reward)
        flags = [False] * len(rollouts) + [True] * len(replace or [])
        convert_cfg = ConvertConfig(system=None) if keep_system else None
        rep = run_curate(dirs, flags, cfg, convert_cfg, mode=mode)  # type: ignore[arg-type]
        stats = rep.stats()
        if export is not None:
            write_jsonl(rep.rows, export)
            export.with_suffix(".stats.json").write_text(json.dumps(stats, indent=2) + "\n")
        console = Console()
        console.print_json(json.dumps(stats))
        console.print(explain(stats, trivial_above), soft_wrap=True)
        if export is not None:
            console.print(
                f"wrote {len(rep.rows)} examples to {export} (+ {export.with_suffix('.stats.json').name})"
            )
