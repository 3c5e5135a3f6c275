"""The garbage collector paced by the clock while many rollouts are live (coworkenv.rollout.collector)."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Any

import pytest

from coworkenv.rollout.collector import SAFETY_THRESHOLD, paced_collections


class _Node:
    def __init__(self) -> None:
        self.other: Any = None


def _pacers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "coworkenv-gc-pacer"]


def _cycle() -> tuple[_Node, weakref.ref[_Node]]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a, weakref.ref(b)


def _wait_until(cond: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return bool(cond())


def test_every_generation_is_collected_on_its_clock_and_the_thresholds_come_back() -> None:
    before = gc.get_threshold()
    seen: set[int] = set()

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            seen.add(info["generation"])

    gc.callbacks.append(note)
    try:
        with paced_collections(young_s=0.01, middle_s=0.05, full_s=0.1):
            assert gc.get_threshold()[0] == SAFETY_THRESHOLD
            assert len(_pacers()) == 1
            assert _wait_until(lambda: seen >= {0, 1, 2})
    finally:
        gc.callbacks.remove(note)
    assert gc.get_threshold() == before
    assert _pacers() == []


def test_cyclic_garbage_that_outlived_a_young_collection_is_still_freed() -> None:
    """A cycle promoted past generation 0 is garbage only the middle or full pass can see: the
    pacer must run them, not only young passes."""
    with paced_collections(young_s=0.01, middle_s=0.05, full_s=0.5):
        head, ref = _cycle()
        gc.collect(0)  # the cycle, still referenced, moves to generation 1
        del head
        assert ref() is not None  # reference counting alone cannot free a cycle
        assert _wait_until(lambda: ref() is None, timeout_s=3.0)


def test_nested_holds_share_one_pacer_until_the_outermost_ends() -> None:
    before = gc.get_threshold()
    with paced_collections(young_s=0.01, middle_s=0.05, full_s=0.1):
        with paced_collections():
            assert len(_pacers()) == 1
        assert len(_pacers()) == 1
        assert gc.get_threshold()[0] == SAFETY_THRESHOLD
    assert gc.get_threshold() == before
    assert _pacers() == []


def test_periods_out_of_order_are_refused_before_anything_changes() -> None:
    before = gc.get_threshold()
    with (
        pytest.raises(ValueError, match="young_s <= middle_s <= full_s"),
        paced_collections(young_s=1.0, middle_s=0.5),
    ):
        pass
    assert gc.get_threshold() == before
    assert _pacers() == []
