"""``coworkenv job``: the main job end to end (see :mod:`coworkenv.job.run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def job(
        config: Annotated[
            Path | None, typer.Option("--config", "-c", help="TOML config; default: embedded defaults.")
        ] = None,
        out: Annotated[Path | None, typer.Option(help="Output directory (overrides the config's).")] = None,
        fresh: Annotated[bool, typer.Option(help="Start over instead of resuming.")] = False,
    ) -> None:
        """Run the main job: synth → teacher/student rollouts → curate → trees → RL update → eval → report."""
        from coworkenv.job.config import load_config
        from coworkenv.job.run import run_job

        cfg = load_config(config)
        if out is not None:
            cfg = cfg.model_copy(update={"out": out})
        run_job(cfg, fresh=fresh)
