"""Dynamic sampling (as in DAPO): draw groups until enough of them have a reward spread.

A GRPO-family update learns only from groups whose rollouts scored differently; a group where every
rollout got the same reward has advantage 0 everywhere and costs its rollouts for nothing. Rather
than spend an update on whatever ``per_update`` tasks come next, :class:`DynamicSampler` walks the
task pool in draws of ``per_draw`` tasks and keeps the groups with a spread, until ``want`` groups
are kept or ``max_draws`` draws are spent; the update then trains on the kept groups only.

Contract:

* :func:`group_spreads` — per ``task|harness`` group of rollout records: the reward spread
  (max − min) over its graded rollouts, ``None`` for a group the trainer would reject anyway (an
  infrastructure failure in it, or fewer than 2 graded rollouts).
* :class:`DynamicSampler` — a deterministic cursor over the pool: ``tasks(cursor)`` names the next
  draw, so a caller that stores the cursor with each finished update resumes exactly (the draws of
  an interrupted update are re-run from the same cursor; the rollout runner skips the rollouts that
  finished). :meth:`DynamicSampler.keep` decides on a draw's records.
* Every draw is reported (tasks, spreads, kept keys), so "how many groups were drawn per update"
  is a number in the run's metrics, not a hidden cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from coworkenv.rollout.record import RolloutRecord

T = TypeVar("T")

SPREAD_TOL = 1e-6


def group_key(task_id: str, harness: str) -> str:
    return f"{task_id}|{harness}"


def group_spreads(records: Iterable[RolloutRecord]) -> dict[str, float | None]:
    """``task|harness`` → reward spread of its graded rollouts (``None``: the group is unusable)."""
    rewards: dict[str, list[float]] = defaultdict(list)
    broken: set[str] = set()
    for r in records:
        key = group_key(r.task_id, r.harness)
        rewards.setdefault(key, [])
        if r.status != "ok" or r.rewards is None:
            broken.add(key)
            continue
        rewards[key].append(float(r.rewards.reward))
    return {k: None if k in broken or len(v) < 2 else max(v) - min(v) for k, v in rewards.items()}


@dataclass
class Draw:
    """One draw: its tasks, each group's spread, and the groups kept."""

    index: int
    tasks: list[str]
    spreads: dict[str, float | None]
    kept: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tasks": self.tasks, "spreads": self.spreads, "kept": self.kept}


@dataclass
class DynamicSampler(Generic[T]):
    """Draws of ``per_draw`` tasks from ``pool`` (in order, wrapping), until ``want`` groups with a
    reward spread are kept or ``max_draws`` draws are spent."""

    pool: Sequence[T]
    per_draw: int
    want: int
    max_draws: int
    draws: list[Draw] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.pool:
            raise ValueError("dynamic sampling needs a non-empty task pool")
        if self.per_draw < 1 or self.want < 1 or self.max_draws < 1:
            raise ValueError(
                f"per_draw={self.per_draw}, want={self.want}, max_draws={self.max_draws}: each must be >= 1"
            )

    def tasks(self, cursor: int) -> list[T]:
        return [self.pool[(cursor + j) % len(self.pool)] for j in range(self.per_draw)]

    @property
    def kept(self) -> list[str]:
        return [k for d in self.draws for k in d.kept][: self.want]

    @property
    def done(self) -> bool:
        return len(self.kept) >= self.want or len(self.draws) >= self.max_draws

    def keep(self, task_ids: Sequence[str], records: Iterable[RolloutRecord]) -> Draw:
        """Record a draw's outcome: its groups with a spread above :data:`SPREAD_TOL` are kept
        (in task order, until ``want`` are held over all draws)."""
        spreads = group_spreads(records)
        room = self.want - len(self.kept)
        kept = [k for k in sorted(spreads, key=_order(task_ids)) if (spreads[k] or 0.0) > SPREAD_TOL][
            : max(room, 0)
        ]
        draw = Draw(len(self.draws), list(task_ids), spreads, kept)
        self.draws.append(draw)
        return draw

    def report(self) -> dict[str, Any]:
        drawn = sum(len(d.spreads) for d in self.draws)
        return {
            "draws": len(self.draws),
            "groups_drawn": drawn,
            "groups_with_spread": sum(
                1 for d in self.draws for s in d.spreads.values() if (s or 0.0) > SPREAD_TOL
            ),
            "groups_unusable": sum(1 for d in self.draws for s in d.spreads.values() if s is None),
            "groups_kept": len(self.kept),
            "kept": self.kept,
            "detail": [d.as_dict() for d in self.draws],
        }


def _order(task_ids: Sequence[str]) -> Any:
    rank = {t: i for i, t in enumerate(task_ids)}
    return lambda key: (rank.get(key.split("|", 1)[0], len(rank)), key)
