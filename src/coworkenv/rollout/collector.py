"""Python's cyclic garbage collector paced by the clock while many rollouts are live.

Contract of :func:`paced_collections` (a context manager; re-entrant, one pacer per process):

* while it is held, CPython's own trigger is held back (generation 0 threshold
  :data:`SAFETY_THRESHOLD` net allocations, a safety net only) and a daemon thread collects the
  young generation every ``young_s`` (0.1 s), the middle one every ``middle_s`` (60 s) and every
  generation every ``full_s`` (600 s); cyclic garbage is therefore freed within ``full_s`` at most;
* on the last exit the thread is stopped and joined and the thresholds held before are restored;
* nothing else changes: reference counting frees what it always freed.

Why: CPython 3.11 triggers a young collection when *net* allocations pass the threshold, and a free
of an older object counts against it, so when a server replaces its live state call after call (each
call's parse freed, the next one made) the young generation grows to the whole working set before
the count moves. At 1,000 live rollouts the proxy's young collections under the runner's earlier
relaxed thresholds (50,000, 20, 100) walked 40,000-100,000 objects and paused every call in flight
for up to ~120-220 ms (``benchmarks/bench_proxy_load.py``, ``server_gc``); with the default
thresholds (700, 10, 10) the middle and full collections walked the working set so often that at
500 live rollouts the collector took 17 s of 58 s of CPU (``benchmarks/bench_scale.py``). By the
clock, a young collection walks only what the last ``young_s`` made that is still alive, and the
walks of the whole working set (middle, full) come once a minute and once in ten.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

SAFETY_THRESHOLD = 1_000_000
"""Generation 0's threshold while paced: CPython's own trigger only for a burst the clock misses."""

_lock = threading.Lock()
_depth = 0
_pacer: _Pacer | None = None


class _Pacer:
    def __init__(self, young_s: float, middle_s: float, full_s: float) -> None:
        if not 0 < young_s <= middle_s <= full_s:
            raise ValueError(
                "paced_collections: need 0 < young_s <= middle_s <= full_s, "
                f"got {young_s}, {middle_s}, {full_s}"
            )
        self.every = (young_s, max(1, round(middle_s / young_s)), max(1, round(full_s / young_s)))
        self.before = gc.get_threshold()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coworkenv-gc-pacer", daemon=True)

    def start(self) -> None:
        gc.set_threshold(SAFETY_THRESHOLD, *self.before[1:])
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        gc.set_threshold(*self.before)

    def _run(self) -> None:
        young_s, middle, full = self.every
        tick = 0
        while not self._stop.wait(young_s):
            tick += 1
            gc.collect(2 if tick % full == 0 else 1 if tick % middle == 0 else 0)


@contextlib.contextmanager
def paced_collections(young_s: float = 0.1, middle_s: float = 60.0, full_s: float = 600.0) -> Iterator[None]:
    """Collect by the clock while held (see the module's contract); nested holds share one pacer,
    whose periods are the outermost hold's."""
    global _depth, _pacer  # noqa: PLW0603 - one pacer per process, by design
    with _lock:
        if _depth == 0:
            _pacer = _Pacer(young_s, middle_s, full_s)
            _pacer.start()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _pacer is not None:
                _pacer.stop()
                _pacer = None
