"""Offline RL over stored samples (``coworkenv train rl`` with ``samples:`` set).

Contract: :func:`load_samples` reads every ``*.jsonl`` under a file or directory as
:class:`TrainingSample` lines; a line that does not validate (e.g. a missing reward) aborts that
sample only and is reported as ``file:line``. Infrastructure failures come from any
``rollouts.jsonl`` found beside the samples (records with ``status == "infra_failure"``), counted
per ``"task|harness"``. :func:`offline_batches` yields whole groups, ``batch_size`` rollouts per
step, in a seeded order; the trainer then rejects incomplete or failed groups as usual.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from coworkenv.jsonl import jsonl_lines
from coworkenv.rollout.record import read_records
from coworkenv.trajectories.sample import TrainingSample


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*.jsonl")
            if p.name != "rollouts.jsonl" and not p.name.endswith(".calls.jsonl")
        )
    return [path]


def load_samples(path: Path) -> tuple[list[TrainingSample], list[str]]:
    samples: list[TrainingSample] = []
    problems: list[str] = []
    for f in _files(path):
        for n, line in enumerate(jsonl_lines(f), start=1):
            if not line.strip():
                continue
            try:
                samples.append(TrainingSample.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError) as exc:
                first = str(exc).splitlines()[:3]
                problems.append(f"{f}:{n}: sample aborted ({' '.join(first)})")
    return samples, problems


def infra_failures(path: Path) -> dict[str, int]:
    root = path if path.is_dir() else path.parent
    out: dict[str, int] = defaultdict(int)
    for rec_file in root.rglob("rollouts.jsonl"):
        records, _ = read_records(rec_file)
        for r in records:
            if r.status == "infra_failure":
                out[f"{r.task_id}|{r.harness}"] += 1
    return dict(out)


def offline_batches(
    samples: list[TrainingSample], batch_size: int, group_size: int, seed: int
) -> Iterator[list[TrainingSample]]:
    by_group: dict[str, list[TrainingSample]] = defaultdict(list)
    for s in samples:
        by_group[s.group_key].append(s)
    keys = sorted(by_group)
    random.Random(seed).shuffle(keys)
    per_step = max(batch_size // group_size, 1)
    for i in range(0, len(keys), per_step):
        yield [s for k in keys[i : i + per_step] for s in by_group[k]]
