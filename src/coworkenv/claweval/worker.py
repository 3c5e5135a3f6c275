"""Long-lived Claw-Eval grader children, for grading rollouts as they finish.

Contract: :class:`GraderPool` grades one (task, record) at a time per child, in children started
once (``python -m coworkenv.claweval._child --serve``) and reused, so a rollout pays for its
grader, not for a Python start and Claw-Eval's imports. Children start on demand, at most
``size`` of them (one per concurrently grading rollout); what graders print goes to a log file,
never into results. :meth:`GraderPool.grade` never raises: a child that dies, answers garbage or
runs past ``timeout_s`` is killed and replaced, and that rollout's result is ``status="error"``
with the reason; a task the child cannot grade is answered by
:func:`~coworkenv.claweval.grade.prepare` (``error`` / ``not_claw_eval``) without a child.
Thread-safe; :meth:`close` ends every child.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from coworkenv.claweval.grade import (
    ClawGrade,
    child_env,
    from_result,
    judge_mode,
    judge_settings,
    package_path,
    prepare,
)
from coworkenv.rollout.record import RolloutRecord
from coworkenv.services.trial import LoadedTask

START_TIMEOUT_S = 120.0


class ChildError(Exception):
    """A grader child died, timed out or answered something unreadable."""


class _Child:
    """One ``_child --serve`` process: a job line in, a result line out."""

    def __init__(self, src: str) -> None:
        self.log: IO[bytes] = tempfile.NamedTemporaryFile(prefix="coworkenv-claw-grader-", suffix=".log")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coworkenv.claweval._child", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=child_env(src),
        )
        self._buf = b""
        ready = self._read_line(START_TIMEOUT_S)
        if ready.get("status") != "ready":
            self.kill()
            raise ChildError(f"grader child did not start: {ready}")

    def ask(self, job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise ChildError(f"grader child gone ({exc}): {self.tail()}") from exc
        return self._read_line(timeout_s)

    def _read_line(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildError(f"grader timed out after {timeout_s:.0f}s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise ChildError(f"grader process exited ({self.proc.poll()}): {self.tail()}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            out = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ChildError(f"unreadable answer from the grader child: {line[:200]!r}") from exc
        if not isinstance(out, dict):
            raise ChildError(f"unexpected answer from the grader child: {line[:200]!r}")
        return out

    def tail(self) -> str:
        """The last line the child wrote to its log (stderr)."""
        try:
            lines = Path(self.log.name).read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def kill(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class GraderPool:
    """Up to ``size`` warm grader children shared by the rollouts of one run."""

    def __init__(
        self,
        *,
        size: int = 1,
        checkout: Path | None = None,
        judge: dict[str, Any] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.checkout = checkout
        self.judge = judge if judge is not None else judge_settings()
        self.timeout_s = timeout_s
        self.where = package_path(checkout)
        self._size = max(1, size)
        self._idle: queue.Queue[_Child] = queue.Queue()
        self._started = 0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def available(self) -> bool:
        """Whether Claw-Eval's package was found (else every task answers ``not_claw_eval``)."""
        return self.where is not None

    def grade(self, task: LoadedTask, record: RolloutRecord) -> ClawGrade:
        """``record`` (a run of ``task``) graded by the task's own ``grader.py``; never raises."""
        job = prepare(task, record, where=self.where, checkout=self.checkout, judge=self.judge)
        if isinstance(job, ClawGrade):
            return job
        try:
            child = self._take()
        except (ChildError, OSError) as exc:
            raw: dict[str, Any] = {"status": "error", "reason": f"grader process failed: {exc}"}
        else:
            try:
                raw = child.ask(job, self.timeout_s)
            except ChildError as exc:
                raw = {"status": "error", "reason": str(exc)}
                self._drop(child)
            else:
                self._give_back(child)
        return from_result(task, record, raw, judge_mode(self.judge))

    def _take(self) -> _Child:
        while True:
            with contextlib.suppress(queue.Empty):  # none idle: start one or wait below
                return self._idle.get_nowait()
            with self._lock:
                if self._closed:
                    raise ChildError("grader pool closed")
                start = self._started < self._size
                if start:
                    self._started += 1
            if start:
                try:
                    return _Child(self.where or "")
                except BaseException:
                    with self._lock:
                        self._started -= 1
                    raise
            try:
                return self._idle.get(timeout=1.0)
            except queue.Empty:
                continue

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            closed = self._closed
        if closed:
            self._drop(child)
        else:
            self._idle.put(child)

    def _drop(self, child: _Child) -> None:
        child.kill()
        with self._lock:
            self._started -= 1

    def close(self) -> None:
        """End every idle child; a child still grading ends when it is handed back."""
        with self._lock:
            self._closed = True
        while True:
            try:
                self._drop(self._idle.get_nowait())
            except queue.Empty:
                return
