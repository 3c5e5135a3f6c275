"""Trees over a rollouts directory: samples.jsonl plus per-rollout and per-harness counters.

Contract: a rollouts directory holds ``rollouts.jsonl`` (:mod:`coworkenv.rollout.record`) and one
``<rollout_id>.calls.jsonl`` per rollout (:mod:`coworkenv.proxy.capture`). :func:`process_dir` builds
and filters every rollout's tree, writes the samples (one JSON line each) when ``out`` is given and
returns a :class:`DirReport`: per rollout its counters and the reason it has no samples, per harness
the sums. Token counts over the calls on retained branches: ``tokens_per_call`` = sum of
prompt+output tokens (each call trained as its own sequence), ``tokens_per_branch`` = sum of sample
lengths, ``tokens_tree`` = distinct tokens of the tree (shared prefixes once); ``generated`` = tokens
with loss. Unreadable lines, calls files without a record and records without calls are counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from coworkenv.proxy.capture import read_calls
from coworkenv.rollout.record import RolloutRecord, calls_files, calls_path, read_records
from coworkenv.trajectories.filters import FilterConfig, FilterResult, filter_tree
from coworkenv.trajectories.samples import rollout_samples
from coworkenv.trajectories.tree import PrefixTree, build_tree
from coworkenv.trajectories.view import tree_view

CALLS_SUFFIX = ".calls.jsonl"


@dataclass
class RolloutReport:
    rollout_id: str
    harness: str
    counters: Counter[str]
    no_samples: str | None
    notes: list[str]


@dataclass
class DirReport:
    rollouts: list[RolloutReport] = field(default_factory=list)
    harness: dict[str, Counter[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    samples_written: int = 0


def token_counts(tree: PrefixTree, filt: FilterResult) -> Counter[str]:
    union: set[int] = set()
    for leaf in filt.branches:
        i = leaf
        while i > 0 and i not in union:
            union.add(i)
            i = tree.nodes[i].parent
    c: Counter[str] = Counter()
    for i in union:
        n = tree.nodes[i]
        c["tokens_per_call"] += n.hist_len
        c["tokens_tree"] += n.env_len + n.out_len
        c["generated"] += n.out_len
    c["tokens_per_branch"] = sum(tree.nodes[b].hist_len for b in filt.branches)
    return c


def analyze(
    record: RolloutRecord,
    calls_path: Path,
    config: FilterConfig,
    sink: IO[str] | None,
    trees_sink: IO[str] | None = None,
) -> tuple[RolloutReport, int]:
    calls, problems = read_calls(calls_path)
    tree = build_tree(calls, record.rollout_id)
    filt = filter_tree(tree, config)
    samples, why = rollout_samples(record, tree, filt)
    counters = Counter(filt.counters)
    counters["rollouts"] = 1
    counters["torn_or_unreadable_lines"] = len(problems)
    for reason, k in tree.skipped.items():
        counters[f"skipped_{reason}"] += k
    if any(n.startswith("reordered") for n in tree.notes):
        counters["reordered"] = 1
    if why is not None:
        counters[f"no_samples_{why}"] = 1
        counters["branches"] = 0
    else:
        counters.update(token_counts(tree, filt))
        counters["samples"] = len(samples)
    if sink is not None:
        for s in samples:
            sink.write(s.model_dump_json() + "\n")
    if trees_sink is not None and tree.nodes:
        trees_sink.write(tree_view(tree, filt).model_dump_json() + "\n")
    rep = RolloutReport(record.rollout_id, record.harness, counters, why, problems + tree.notes)
    return rep, len(samples)


def process_dir(
    root: Path, out: Path | None = None, config: FilterConfig | None = None, trees_out: Path | None = None
) -> DirReport:
    """Trees, filters and samples for every rollout under ``root``; samples to ``out``, and the
    report's tree views (one JSON line per rollout, :mod:`coworkenv.trajectories.view`) to
    ``trees_out``."""
    cfg = config or FilterConfig()
    records, problems = read_records(root / "rollouts.jsonl")
    report = DirReport(problems=list(problems))
    seen: set[str] = set()
    sink = out.open("w", encoding="utf-8") if out is not None else None
    trees_sink = trees_out.open("w", encoding="utf-8") if trees_out is not None else None
    try:
        for rec in records:
            if rec.rollout_id in seen:
                report.problems.append(f"{rec.rollout_id}: duplicate rollout record skipped")
                continue
            seen.add(rec.rollout_id)
            path = calls_path(root, rec.rollout_id)
            if rec.status == "ok" and (not path.exists() or path.stat().st_size == 0):
                report.problems.append(f"{rec.rollout_id}: no captured call in {path.name}")
            rep, n = analyze(rec, path, cfg, sink, trees_sink)
            report.samples_written += n
            report.rollouts.append(rep)
            report.harness.setdefault(rec.harness or "?", Counter()).update(rep.counters)
    finally:
        if sink is not None:
            sink.close()
        if trees_sink is not None:
            trees_sink.close()
    for p in calls_files(root):
        rid = p.name[: -len(CALLS_SUFFIX)]
        if rid not in seen:
            report.problems.append(f"{p.name}: calls without a rollout record (ignored)")
    return report


COLUMNS = (
    ("rollouts", "rollouts"),
    ("calls", "calls"),
    ("leaves", "leaves"),
    ("aux", "aux_calls"),
    ("dead", "dead_leaves"),
    ("forks", "rewrite_forks"),
    ("branches", "branches"),
    ("samples", "samples"),
    ("tok/call", "tokens_per_call"),
    ("tok/branch", "tokens_per_branch"),
    ("tok tree", "tokens_tree"),
    ("generated", "generated"),
)


def harness_rows(report: DirReport) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for harness, c in sorted(report.harness.items()):
        row: dict[str, object] = {"harness": harness}
        row.update({label: c.get(key, 0) for label, key in COLUMNS})
        tree = c.get("tokens_tree", 0)
        row["saving"] = round(c.get("tokens_per_call", 0) / tree, 2) if tree else None
        row["discarded"] = c.get("discarded_over_branching", 0)
        row["infra"] = c.get("no_samples_infra_failure", 0)
        row["skipped calls"] = sum(v for k, v in c.items() if k.startswith("skipped_"))
        rows.append(row)
    return rows
