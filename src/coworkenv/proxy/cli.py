"""CLI commands of the proxy stage, added to the main app by :func:`register`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to app."""
