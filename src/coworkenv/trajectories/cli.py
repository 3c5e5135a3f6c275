"""CLI commands of the trajectories stage, added to the main app by :func:`register`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from coworkenv.errors import SpecError


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""

    @app.command()
    def trees(  # noqa: PLR0917 (typer options)
        rollouts: Annotated[
            Path, typer.Argument(help="A rollouts directory (rollouts.jsonl + *.calls.jsonl).")
        ],
        out: Annotated[
            Path | None, typer.Option("--out", help="Write training samples here (JSONL).")
        ] = None,
        trees_out: Annotated[
            Path | None,
            typer.Option("--trees", help="Write the trees for `coworkenv report --trees` here (JSONL)."),
        ] = None,
        max_leaves: Annotated[
            int, typer.Option(help="Discard a rollout whose main tree has more leaves than this.")
        ] = 32,
        as_json: Annotated[bool, typer.Option("--json", help="Print the per-harness table as JSON.")] = False,
        verbose: Annotated[bool, typer.Option("-v", help="Also list every problem found.")] = False,
    ) -> None:
        """Build prefix trees per rollout; print calls, leaves, auxiliary/dead leaves and token savings."""
        from rich.console import Console
        from rich.table import Table

        from coworkenv.trajectories.filters import FilterConfig
        from coworkenv.trajectories.report import harness_rows, process_dir

        if not (rollouts / "rollouts.jsonl").exists():
            raise SpecError.single(rollouts, "rollouts.jsonl", "not found: pass a rollouts directory")
        if max_leaves < 1:
            raise SpecError.single("--max-leaves", "max_leaves", "must be at least 1")
        report = process_dir(rollouts, out, FilterConfig(max_leaves=max_leaves), trees_out)
        rows = harness_rows(report)
        console = Console()
        if as_json:
            print(
                json.dumps({"harness": rows, "samples": report.samples_written, "problems": report.problems})
            )
            return
        if rows:
            table = Table("", *(str(r["harness"]) for r in rows), title=f"prefix trees: {rollouts}")
            for key in list(rows[0])[1:]:
                table.add_row(key, *("-" if r[key] is None else str(r[key]) for r in rows))
            console.print(table)
        else:
            console.print("no rollout records")
        if out is not None:
            console.print(f"wrote {report.samples_written} samples to {out}")
        for p in report.problems if verbose else report.problems[:5]:
            console.print(f"[yellow]problem:[/] {p}")
        if not verbose and len(report.problems) > 5:
            console.print(f"... {len(report.problems) - 5} more problems (-v lists them)")
        if verbose:
            for r in report.rollouts:
                for n in r.notes:
                    console.print(f"[dim]{r.rollout_id}:[/] {n}")
