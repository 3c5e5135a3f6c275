"""How much faster this machine does K processes' CPU work than one's: the ceiling any multi-process
scaling measured here can reach (issue 29: "throughput grows ≥ 0.8× linearly with proxy processes
until the cores run out").

A cloud VM's vCPUs may be hyperthreads of one physical core, or share a memory bus with noisy
neighbours: two processes then do less than twice one's work whatever the code. This runs the same
fixed pure-Python work — JSON encode and decode of a chat request the size of the rig's, and a
sort, what the proxy's stack spends its CPU on — in one process for ``--seconds``, then in K
processes started together (a barrier), ``--repeats`` times alternated, and writes each round's
work per second and the ratio K-together / one-alone. ``bench_scale.py --procs K``'s throughput
ratio is read against this one, measured in the same quiet window.

    .venv/bin/python benchmarks/cpu_scaling.py --procs 2 --out results/cpu-scaling.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from statistics import median
from typing import Any

from _machine import machine_info, provenance  # benchmarks/_machine.py

REQUEST = {
    "model": "policy",
    "messages": [{"role": "user", "content": "word " * 400}] * 6,
    "tools": [
        {"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object"}}}
        for i in range(20)
    ],
}


def unit() -> int:
    """One unit of work: the request encoded, decoded and its keys sorted."""
    text = json.dumps(REQUEST)
    back = json.loads(text)
    return len(sorted(str(m) for m in back["messages"])) + len(text)


def work(seconds: float) -> float:
    """Units per second of CPU work, over ``seconds`` of wall time."""
    n, t0 = 0, time.perf_counter()
    while (t := time.perf_counter() - t0) < seconds:
        unit()
        n += 1
    return n / t


def _child(barrier: Any, seconds: float, out: Any) -> None:
    barrier.wait()
    out.put(work(seconds))


def together(k: int, seconds: float) -> list[float]:
    """Units per second of each of ``k`` processes started together."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(k), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(barrier, seconds, out)) for _ in range(k)]
    for p in procs:
        p.start()
    rates = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return rates


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    started = dt.datetime.now(dt.UTC)
    load0 = os.getloadavg()
    rounds = []
    for i in range(a.repeats):
        alone = together(1, a.seconds)[0]
        many = together(a.procs, a.seconds)
        rounds.append(
            {
                "round": i,
                "alone_per_s": round(alone, 1),
                "together_per_s": [round(x, 1) for x in many],
                "ratio": round(sum(many) / alone, 3),
            }
        )
        print(
            f"round {i}: one alone {alone:.0f}/s, {a.procs} together {sum(many):.0f}/s: "
            f"{rounds[-1]['ratio']:.2f}x"
        )
    ratios = [r["ratio"] for r in rounds]
    out = {
        **provenance("cpu-scaling", started),
        "machine": {**machine_info(), "load_average_start": load0, "load_average_end": os.getloadavg()},
        "setup": {
            "procs": a.procs,
            "seconds": a.seconds,
            "work": "JSON encode + decode + sort of a "
            f"{len(json.dumps(REQUEST)) // 1024} KB chat request, pure Python",
        },
        "rounds": rounds,
        "ratio": {"median": median(ratios), "min": min(ratios), "max": max(ratios)},
        "linear": a.procs,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
