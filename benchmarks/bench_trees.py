"""Benchmark: prefix-tree construction throughput and scaling on synthetic captured calls.

Synthetic rollouts mimic an agent harness: each call's prompt is the previous call's prompt and
output plus an environment chunk (tool output), so total tokens grow quadratically with turns, as in
real traces; every 8th turn is retried once (a dead leaf), every rollout has one title side call
and, in the ``rewrite`` mix, every 5th turn's history is re-serialized (a message-matched fork).
Calls are built without validation (``model_construct``) outside the timed region, each with its
own int objects (as parsing each JSON line gives).

Measured per size: ``build_tree`` (the tree proper: hashing, parent search, message matching),
``filter_tree`` and ``rollout_samples`` separately, as tokens/s over the calls' prompt+output tokens;
sizes double from 1.25M to 20M tokens (more rollouts) and, separately, the per-rollout length
doubles (longer histories) at a fixed ~10M tokens — linear time means flat tokens/s across both.
Goal: >= 10M tokens/s for tree construction on a >= 10M-token call set.

Run:  .venv/bin/python benchmarks/bench_trees.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from datetime import UTC, date, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from _machine import cpu_model  # benchmarks/_machine.py

from coworkenv.proxy.capture import CapturedCall
from coworkenv.proxy.messages import ChatRequest, Message, ToolSpec
from coworkenv.rollout.record import RewardParts, RolloutRecord
from coworkenv.trajectories.filters import FilterConfig, filter_tree
from coworkenv.trajectories.samples import rollout_samples
from coworkenv.trajectories.tree import build_tree

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TOOLS = (ToolSpec(name="lookup"),)
GOAL_TOK_S = 10_000_000


def fresh(ids: list[int]) -> tuple[int, ...]:
    """A tuple of new int objects, as JSON parsing of each capture line produces."""
    return tuple(np.asarray(ids, dtype=np.int64).tolist())


def synth_rollout(
    rid: str, seed: int, *, turns: int, env: int, out: int, rewrite: bool
) -> list[CapturedCall]:
    rng = np.random.default_rng(seed)
    sys_msg = Message(role="system", content="main")
    msgs: list[Message] = [sys_msg, Message(role="user", content=f"task {seed}")]
    prompt = rng.integers(10, 50_000, size=env).tolist()
    calls: list[CapturedCall] = []

    def emit(p: list[int], o: list[int], ms: list[Message], tools: tuple[ToolSpec, ...], text: str) -> None:
        calls.append(
            CapturedCall.model_construct(
                rollout_id=rid,
                seq=len(calls),
                call_id=f"c{len(calls)}",
                dialect="openai_chat",
                request=ChatRequest.model_construct(messages=tuple(ms), tools=tools),
                prompt_ids=fresh(p),
                output_ids=fresh(o),
                logprobs=tuple([-0.5] * len(o)),
                token_exact=True,
                error=None,
                malformed=False,
                response={"content": text, "tool_calls": []},
                policy_version="0",
                state_hash=None,
            )
        )

    emit(prompt[:20], [1, 2, 3], msgs[:2], (), "title")  # side call without tools
    for t in range(turns):
        o = rng.integers(10, 50_000, size=out).tolist()
        if t % 8 == 7:  # a retried turn: a dead leaf
            emit(prompt, rng.integers(10, 50_000, size=out).tolist(), msgs, TOOLS, f"bad {t}")
        emit(prompt, o, msgs, TOOLS, f"turn {t}")
        msgs = [*msgs, Message(role="assistant", content=f"turn {t}"), Message(role="tool", content=f"r{t}")]
        hist = prompt + o
        if rewrite and t % 5 == 4:  # the harness re-serialized this turn: tokens differ
            hist = prompt + [x + 1 for x in o]
        prompt = hist + rng.integers(10, 50_000, size=env).tolist()
    return calls


def call_set(n_rollouts: int, turns: int, env: int, out: int, rewrite: bool) -> list[list[CapturedCall]]:
    return [
        synth_rollout(f"r{i}", i, turns=turns, env=env, out=out, rewrite=rewrite) for i in range(n_rollouts)
    ]


def tokens(rollouts: list[list[CapturedCall]]) -> int:
    return sum(len(c.prompt_ids) + len(c.output_ids) for cs in rollouts for c in cs)


def _timed(rollouts: list[list[CapturedCall]], with_samples: bool) -> tuple[list[float], Any, Any, int, int]:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        trees = [build_tree(cs, cs[0].rollout_id) for cs in rollouts]
        t1 = time.perf_counter()
        filts = [filter_tree(t, FilterConfig(max_leaves=10_000)) for t in trees]
        t2 = time.perf_counter()
        n_samples = 0
        sample_tokens = 0
        if with_samples:
            for cs, tree, f in zip(rollouts, trees, filts, strict=True):
                rec = RolloutRecord(
                    rollout_id=cs[0].rollout_id,
                    task_id="t",
                    harness="synth",
                    trial=0,
                    status="ok",
                    rewards=RewardParts(reward=1.0, completion=1.0, safety=1.0, robustness=1.0),
                )
                samples, _ = rollout_samples(rec, tree, f)
                n_samples += len(samples)
                sample_tokens += sum(len(s.token_ids) for s in samples)
        t3 = time.perf_counter()
    finally:
        gc.enable()
    return [t1 - t0, t2 - t1, t3 - t2], trees, filts, n_samples, sample_tokens


def measure(rollouts: list[list[CapturedCall]], with_samples: bool, repeat: int) -> dict[str, Any]:
    """Best of ``repeat`` runs per stage (throughput on a shared machine)."""
    ntok = tokens(rollouts)
    runs = [_timed(rollouts, with_samples) for _ in range(repeat)]
    best = [min(r[0][i] for r in runs) for i in range(3)]
    _, trees, filts, n_samples, sample_tokens = runs[-1]
    t0, t1, t2, t3 = 0.0, best[0], best[0] + best[1], best[0] + best[1] + best[2]
    dead = sum(f.counters["dead_leaves"] for f in filts)
    forks = sum(f.counters["rewrite_forks"] for f in filts)
    tree_tokens = sum(n.env_len + n.out_len for t in trees for n in t.calls)
    return {
        "rollouts": len(rollouts),
        "calls": sum(len(cs) for cs in rollouts),
        "tokens": ntok,
        "tree_tokens_unique": tree_tokens,
        "dead_leaves": dead,
        "rewrite_forks": forks,
        "build_s": round(t1 - t0, 4),
        "build_tok_s": round(ntok / (t1 - t0)),
        "filter_s": round(t2 - t1, 4),
        "samples_s": round(t3 - t2, 4) if with_samples else None,
        "samples": n_samples,
        "sample_tokens": sample_tokens,
    }


def machine() -> str:
    cpus = os.cpu_count()
    model = cpu_model()
    return f"{cpus} CPU(s), {model}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="Smaller sizes (smoke run).")
    ap.add_argument("--no-write", action="store_true", help="Do not write results files.")
    ap.add_argument("--repeat", type=int, default=3, help="Runs per size; the best time is kept.")
    args = ap.parse_args()
    turns, env, out = 40, 200, 100
    base = 5 if not args.quick else 1
    scale_rollouts = [base, base * 2, base * 4, base * 8] + ([base * 16] if not args.quick else [])
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for mix in ("exact", "rewrite"):
        for n in scale_rollouts:
            r = measure(
                call_set(n, turns, env, out, mix == "rewrite"), with_samples=n <= base * 8, repeat=args.repeat
            )
            r.update({"series": f"more rollouts ({mix})", "turns": turns})
            rows.append(r)
            print(json.dumps(r), file=sys.stderr)
    target = tokens(call_set(1, turns, env, out, False)) * base * 8
    for t in (20, 40, 80, 160):
        one = tokens(call_set(1, t, env, out, False))
        n = max(1, round(target / one))
        r = measure(call_set(n, t, env, out, False), with_samples=False, repeat=args.repeat)
        r.update({"series": "longer rollouts (exact)", "turns": t})
        rows.append(r)
        print(json.dumps(r), file=sys.stderr)
    big = [r for r in rows if r["tokens"] >= 10_000_000]
    worst = min((r["build_tok_s"] for r in big), default=None)
    rates = [r["build_tok_s"] for r in rows if r["series"] == "more rollouts (exact)"]
    spread = max(rates) / min(rates)
    summary = {
        "date": date.today().isoformat(),
        "machine": machine(),
        "python": platform.python_version(),
        "numpy": metadata.version("numpy"),
        "pydantic": metadata.version("pydantic"),
        "command": "python benchmarks/bench_trees.py" + (" --quick" if args.quick else ""),
        "load_avg_start_end": [round(x, 2) for x in (*load_start, *os.getloadavg())],
        "repeat": args.repeat,
        "rows": rows,
        "goal_tok_s": GOAL_TOK_S,
        "worst_build_tok_s_at_10M_plus": worst,
        "rate_spread_more_rollouts": round(spread, 2),
        "verdict": "PASS" if worst is not None and worst >= GOAL_TOK_S else "FAIL",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(render(summary))
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        stem = RESULTS / f"trees-{summary['date']}"
        stem.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
        stem.with_suffix(".md").write_text(render(summary))
        print(f"wrote {stem}.json and .md", file=sys.stderr)


def render(s: dict[str, Any]) -> str:
    lines = [
        f"# Prefix-tree benchmark ({s['date']})",
        "",
        f"- Machine: {s['machine']}; Python {s['python']}, numpy {s['numpy']}, pydantic {s['pydantic']}.",
        f"- Command: `{s['command']}`; best of {s['repeat']} runs per row; load average (1/5/15 min) "
        f"at start {s['load_avg_start_end'][:3]}, at end {s['load_avg_start_end'][3:]}.",
        "- Synthetic rollouts: 40 turns (unless stated), 200 env + 100 generated tokens per turn, "
        "every 8th turn retried, one title side call; `rewrite`: every 5th turn re-serialized.",
        "- tokens = sum over calls of prompt + output tokens (what per-call training would process).",
        "",
        "| series | turns | rollouts | calls | tokens | build s | build tok/s | filter s | samples s "
        "| unique tree tokens | dead | forks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in s["rows"]:
        samples_s = "-" if r["samples_s"] is None else f"{r['samples_s']:.3f}"
        lines.append(
            f"| {r['series']} | {r['turns']} | {r['rollouts']} | {r['calls']:,} | {r['tokens']:,} "
            f"| {r['build_s']:.3f} | {r['build_tok_s'] / 1e6:.1f}M | {r['filter_s']:.3f} | {samples_s} "
            f"| {r['tree_tokens_unique']:,} | {r['dead_leaves']} | {r['rewrite_forks']} |"
        )
    lines += [
        "",
        "| goal | measured | verdict |",
        "|---|---|---|",
        f"| tree construction >= 10M tokens/s on >= 10M-token call sets, linear time "
        f"| worst {(s['worst_build_tok_s_at_10M_plus'] or 0) / 1e6:.1f}M tok/s; rate spread across "
        f"sizes {s['rate_spread_more_rollouts']}x | {s['verdict']} |",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
