"""``coworkenv package DIR --format coworkenv|claw-eval|harbor [--out OUT] [--check]``.

Writes one directory per task under ``OUT`` (default ``packages/<format>``). With ``--check`` (the
default) every package is imported back and compared with its spec; a mismatch is an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add ``package`` to ``app``."""

    @app.command("package")
    def package(
        src: Annotated[
            Path, typer.Argument(help="A task JSON file/dir, or a directory of them (synth output).")
        ],
        fmt: Annotated[str, typer.Option("--format", help="coworkenv | claw-eval | harbor")] = "coworkenv",
        out: Annotated[
            Path | None, typer.Option("--out", help="Output directory (default packages/<format>).")
        ] = None,
        check: Annotated[bool, typer.Option(help="Import each package back and compare.")] = True,
    ) -> None:
        """Package tasks as self-contained directories (own, Claw-Eval or Harbor layout)."""
        from rich.console import Console
        from rich.progress import track
        from rich.table import Table

        from coworkenv.errors import SpecError
        from coworkenv.synth.packaging import FORMATS, export_task, import_package, load_specs

        if fmt not in FORMATS:
            raise SpecError.single(
                "--format", "format", f"unknown format {fmt!r}; expected one of {list(FORMATS)}"
            )
        dest = out or Path("packages") / fmt
        specs = load_specs(src)
        table = Table("task", "directory", "round trip", title=f"{len(specs)} task(s) packaged as {fmt}")
        bad = 0
        for spec, _path in track(specs, description=f"packaging ({fmt})", transient=True):
            d = export_task(spec, dest, fmt)
            status = "-"
            if check:
                back, _ = import_package(d, fmt)
                ok = back == spec
                bad += not ok
                status = "[green]equal[/]" if ok else "[red]differs[/]"
            table.add_row(spec.id, str(d), status)
        Console().print(table)
        if bad:
            raise SpecError.single(dest, "", f"{bad} package(s) do not import back to an equal spec")
