"""Plans for the compositional generator, and structure-disjoint train / held-out splits.

Contract: :func:`compose_plan` returns ``n`` distinct slots (task ids ``comp-s<seed>-<i>``) over
``services`` (default: every registered service): each slot draws 2–5 services, a difficulty
(easy, medium, D1.5, hard, D2.5), a ``mock_today`` and — for about one slot in six each — a safety
or multi-turn category, and pins its structure in a ``compose:`` scenario (anchor, conditions), so
the slot alone fixes the recipe. :func:`structure_key` is that recipe's structure key.
:func:`structure_split` fills a train and a held-out plan from one stream of slots, assigning each
structure key wholly to one side (a SHA-256 bucket of the key), so no held-out task shares its
(anchor, conditions, joins, writes, mode) with any train task.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from coworkenv.errors import SpecError
from coworkenv.synth.base import Slot
from coworkenv.synth.procedural.compose.anchors import ANCHORS, TEMPORAL
from coworkenv.synth.procedural.compose.recipe import recipe_for
from coworkenv.synth.procedural.records import Rng, seed_int

EPOCH = date(2026, 1, 5)
LEVELS = ("easy", "medium", "D1.5", "hard", "D2.5")
CATEGORIES = ("ops", "support", "finance", "sales", "engineering", "compliance", "knowledge")


def _registered() -> list[str]:
    from coworkenv.services.registry import SERVICES

    return sorted(SERVICES)


def _slot(i: int, seed: int, pool: Sequence[str], prefix: str) -> Slot:
    r = Rng(seed, i, "compose-plan", today=EPOCH)
    anchors = [s for s in pool if s in ANCHORS]
    if not anchors:
        raise SpecError.single(
            "plan", "services", f"{sorted(pool)} has no service that holds selectable records"
        )
    level = LEVELS[r.randrange(len(LEVELS))]
    if level in ("hard", "D2.5"):  # the paper's D2.5 has temporal dependencies
        anchors = [a for a in anchors if TEMPORAL & set(ANCHORS[a].conds)] or anchors
    anchor = r.choice(anchors)
    size = {"easy": 2, "medium": 3, "D1.5": 3, "hard": 4, "D2.5": r.choice((4, 5))}[level]
    rest = [s for s in pool if s != anchor]
    r.shuffle(rest)
    services = (anchor, *rest[: size - 1])
    conds = list(ANCHORS[anchor].conds)
    r.shuffle(conds)
    conds.sort(key=lambda c: level in ("hard", "D2.5") and c not in TEMPORAL)
    fields = {ANCHORS[anchor].conds[c].field for c in conds}
    k = 2 if level in ("hard", "D2.5") and len(fields) > 1 else 1
    if k == 2:
        conds = [
            conds[0],
            next(
                c
                for c in conds[1:]
                if ANCHORS[anchor].conds[c].field != ANCHORS[anchor].conds[conds[0]].field
            ),
        ]
    roll = r.random()
    mode = "safety" if roll < 1 / 6 else "multi_turn" if roll < 2 / 6 else ""
    category = mode or r.choice(CATEGORIES)
    return Slot(
        task_id=f"{prefix}-s{seed}-{i:05d}",
        services=services,
        category=category,
        difficulty=level,
        language="en",
        mock_today=EPOCH + timedelta(days=seed_int(seed, i, "day") % 365),
        scenario=f"compose: anchor={anchor} cond={','.join(sorted(conds[:k]))}",
    )


def compose_plan(
    n: int, seed: int = 0, services: Sequence[str] | None = None, prefix: str = "comp"
) -> list[Slot]:
    """``n`` distinct compositional slots over ``services`` (see the module docstring)."""
    pool = sorted(services) if services is not None else _registered()
    unknown = sorted(set(pool) - set(_registered()))
    if unknown:
        raise SpecError.single("plan", "services", f"unknown services {unknown}; registered: {_registered()}")
    return [_slot(i, seed, pool, prefix) for i in range(n)]


def structure_key(slot: Slot, seed: int = 0, by: str = "full") -> str:
    """The slot's structure key: ``full`` (:meth:`Recipe.key`) or ``selection`` (anchor and
    conditions only — a coarser split where held-out tasks select records in ways train never did)."""
    rc = recipe_for(slot, seed)
    if by == "selection":
        return f"{rc.anchor}|{'+'.join(rc.conds)}"
    if by != "full":
        raise ValueError(f"structure key granularity must be 'full' or 'selection', got {by!r}")
    return rc.key()


def structure_split(
    n_train: int,
    n_heldout: int,
    *,
    seed: int = 0,
    services: Sequence[str] | None = None,
    heldout_share: int = 4,
    by: str = "full",
) -> tuple[list[Slot], list[Slot]]:
    """Train and held-out slots with disjoint structure keys (``by``: see :func:`structure_key`;
    one key in ``heldout_share`` is held out). Raises SpecError if the stream cannot fill both
    sides (too few services)."""
    pool = sorted(services) if services is not None else _registered()
    train: list[Slot] = []
    held: list[Slot] = []
    limit = 50 * (n_train + n_heldout) + 100
    for i in range(limit):
        if len(train) >= n_train and len(held) >= n_heldout:
            break
        s = _slot(i, seed, pool, "split")
        key = structure_key(s, seed, by)
        side = held if seed_int("split", seed, key) % heldout_share == 0 else train
        if len(side) < (n_heldout if side is held else n_train):
            side.append(s)
    if len(train) < n_train or len(held) < n_heldout:
        raise SpecError.single(
            "plan",
            "services",
            f"only {len(train)} train / {len(held)} held-out slots with disjoint structures from "
            f"{sorted(pool)}; add services or ask for fewer tasks",
        )
    return train, held
