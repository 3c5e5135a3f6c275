"""Selecting teacher rollouts for SFT (the CoworkEnv appendix, "Data Selection and Preprocessing").

Contract, in order:

1. **Merge** collections (rollouts directories) in the order given; records of a *replacement*
   collection supersede every earlier record of the same task (re-executed after grading fixes).
2. **Deduplicate** by ``(task_id, trial)``: the first copy encountered is kept.
3. **Score** of a record: the ``completion`` field (grade dict, else reward parts) when present,
   else ``reward``; a present but unparseable/non-finite value, or none at all (infra failures),
   makes the record unreadable — it is excluded from the task's mean, never counted as 0.
4. **Group** each task by the mean of its readable scores (``math.fsum``; an average of fractional
   scores, not a pass rate): ``TRIVIAL`` if mean > ``trivial_above`` (default 0.8), ``UNSOLVABLE`` if
   mean < ``unsolvable_below`` (default 0.2), else ``KEEP``; comparisons allow 1e-9 of float error,
   so a task whose trials all score 0.8 is ``KEEP``. A task with no readable score is ``UNREADABLE``.
   ``KEEP`` and ``TRIVIAL`` are admitted; ``UNSOLVABLE``/``UNREADABLE`` are set aside.
5. **Export threshold**: a record is kept when its reward >= the profile's threshold
   (:data:`EXPORT_THRESHOLDS`: 0.5 mixed, 0.8 multi-service and safety, 0.999 extraction, 0.3
   harness-derived; overridable).
6. **TRIVIAL sampling**: a TRIVIAL task keeps only the first qualifying record per normalized task
   prefix — the final path component of the task id up to its first underscore — so variants
   sharing a prefix share one allowance. Other admitted tasks keep every qualifying trial.

Every record dropped is counted under one reason in :attr:`Selection.dropped`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from coworkenv.rollout.record import RolloutRecord

Label = Literal["TRIVIAL", "KEEP", "UNSOLVABLE", "UNREADABLE"]
EXPORT_THRESHOLDS: dict[str, float] = {
    "mixed": 0.5,
    "multi_service": 0.8,
    "safety": 0.8,
    "extraction": 0.999,
    "harness": 0.3,
}
_EPS = 1e-9


@dataclass(frozen=True)
class SelectConfig:
    trivial_above: float = 0.8
    unsolvable_below: float = 0.2
    profile: str = "mixed"
    min_reward: float | None = None  # overrides the profile's threshold

    @property
    def threshold(self) -> float:
        if self.min_reward is not None:
            return self.min_reward
        if self.profile not in EXPORT_THRESHOLDS:
            raise ValueError(f"unknown export profile {self.profile!r}; one of {sorted(EXPORT_THRESHOLDS)}")
        return EXPORT_THRESHOLDS[self.profile]


@dataclass
class Selection:
    selected: list[RolloutRecord] = field(default_factory=list)
    labels: dict[str, Label] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)
    pool: int = 0  # records after merge + dedup


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _field(record: RolloutRecord, name: str) -> tuple[bool, Any]:
    """(present, value) of a score field: the grade dict first, then the reward parts."""
    if record.grade is not None and name in record.grade:
        return True, record.grade[name]
    if record.rewards is not None:
        return True, getattr(record.rewards, name)
    return False, None


def read_score(record: RolloutRecord) -> float | None:
    """Completion when present (even if unparseable → None), else reward; None = unreadable."""
    present, value = _field(record, "completion")
    if not present:
        present, value = _field(record, "reward")
    return _number(value) if present else None


def record_reward(record: RolloutRecord) -> float | None:
    present, value = _field(record, "reward")
    return _number(value) if present else None


def task_prefix(task_id: str) -> str:
    """Final path component up to its first underscore (``suite/M1100_refund_v2`` → ``M1100``)."""
    last = task_id.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return last.split("_", 1)[0]


def label_for(mean: float | None, cfg: SelectConfig) -> Label:
    if mean is None:
        return "UNREADABLE"
    if mean > cfg.trivial_above + _EPS:
        return "TRIVIAL"
    if mean < cfg.unsolvable_below - _EPS:
        return "UNSOLVABLE"
    return "KEEP"


def merge(
    collections: list[list[RolloutRecord]], replacement: list[bool]
) -> tuple[list[RolloutRecord], Counter[str]]:
    """Merged records (replacement collections supersede earlier tasks), deduplicated by (task, trial)."""
    dropped: Counter[str] = Counter()
    merged: list[RolloutRecord] = []
    for records, replaces in zip(collections, replacement, strict=True):
        if replaces:
            tasks = {r.task_id for r in records}
            kept = [r for r in merged if r.task_id not in tasks]
            dropped["superseded_by_replacement"] += len(merged) - len(kept)
            merged = kept
        merged.extend(records)
    seen: set[tuple[str, int]] = set()
    out: list[RolloutRecord] = []
    for r in merged:
        key = (r.task_id, r.trial)
        if key in seen:
            dropped["duplicate_trial"] += 1
            continue
        seen.add(key)
        out.append(r)
    return out, dropped


def select(
    collections: list[list[RolloutRecord]], cfg: SelectConfig, replacement: list[bool] | None = None
) -> Selection:
    pool, dropped = merge(collections, replacement or [False] * len(collections))
    sel = Selection(dropped=dropped, pool=len(pool))
    scores: dict[str, list[float]] = {}
    for r in pool:
        scores.setdefault(r.task_id, [])
        s = read_score(r)
        if s is not None:
            scores[r.task_id].append(s)
    for task, vals in scores.items():
        mean = math.fsum(vals) / len(vals) if vals else None
        if mean is not None:
            sel.means[task] = mean
        sel.labels[task] = label_for(mean, cfg)
    threshold = cfg.threshold
    trivial_used: set[str] = set()
    for r in pool:
        label = sel.labels[r.task_id]
        if label in ("UNSOLVABLE", "UNREADABLE"):
            sel.dropped[f"task_{label.lower()}"] += 1
            continue
        if r.status != "ok":
            sel.dropped["infra_failure"] += 1
            continue
        reward = record_reward(r)
        if reward is None or reward < threshold - _EPS:
            sel.dropped["below_reward_threshold"] += 1
            continue
        if label == "TRIVIAL":
            prefix = task_prefix(r.task_id)
            if prefix in trivial_used:
                sel.dropped["trivial_prefix_taken"] += 1
                continue
            trivial_used.add(prefix)
        sel.selected.append(r)
    return sel
