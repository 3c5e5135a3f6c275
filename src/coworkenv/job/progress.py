"""Progress of one long job stage, visible whether or not the output is a terminal.

Contract: :class:`StageProgress` is a context manager with ``start(total)``, ``set(done)`` and
``advance()``. On a terminal it draws a transient rich bar (cleared when the stage ends). When the
output is not a terminal (CI logs, ``| tee``, a file) it prints one plain line per step instead —
``sft: step 3/8 (12.4s)`` — so a long stage such as SFT never looks hung. Nothing is printed for a
step that does not advance.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from rich.console import Console


class StageProgress:
    def __init__(self, console: Console, label: str, *, unit: str = "step") -> None:
        self.console = console
        self.label = label
        self.unit = unit
        self.total = 0
        self.done = 0
        self._t0 = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> StageProgress:
        self._t0 = time.monotonic()
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn(f"[bold]{self.label}[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)

    def start(self, total: int) -> None:
        self.total = total
        if self._bar is not None:
            self._task = self._bar.add_task(self.label, total=total)

    def set(self, done: int) -> None:
        if done <= self.done:
            return
        self.done = done
        if self._bar is not None:
            self._bar.update(self._task, completed=done)
        else:
            elapsed = time.monotonic() - self._t0
            self.console.print(
                f"{self.label}: {self.unit} {done}/{self.total} ({elapsed:.1f}s)", highlight=False
            )

    def advance(self) -> None:
        self.set(self.done + 1)
