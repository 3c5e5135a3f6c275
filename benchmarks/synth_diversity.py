"""Structural diversity of procedural synthesis: the 13 templates beside the compositional generator.

For ``--n`` tasks of each plan (``bench_synth.run``: the templates' own plan, and ``compose_plan``
over every registered service), every task fully validated, it reports the distinct (service set,
step pattern, condition kind) combinations, their parts, and request / record hash uniqueness. The
counts are deterministic (seeded); the timings it also records are only as good as the machine's
load, which it writes down beside the exact command.

Run:  .venv/bin/python benchmarks/synth_diversity.py [--n 1000] [--workers 2] [--seed 0] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_synth import HERE, run  # benchmarks/bench_synth.py


def compare(n: int, workers: int, seed: int) -> dict[str, Any]:
    plans = {p: run(n, workers, seed, p) for p in ("templates", "compose")}
    return {
        "benchmark": "synth-diversity",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": " ".join(["benchmarks/synth_diversity.py", *sys.argv[1:]]),
        "loadavg_at_end": os.getloadavg(),
        "params": {"n": n, "workers": workers, "seed": seed},
        "plans": {
            p: {
                "valid": r["valid"],
                "diversity": r["diversity"],
                "valid_per_min_contended": r["valid_per_min"],
                "loadavg_at_start": r["machine"]["loadavg_at_start"],
            }
            for p, r in plans.items()
        },
    }


def markdown(r: dict[str, Any]) -> str:
    keys = list(r["plans"]["templates"]["diversity"])
    lines = [
        f"# Procedural synthesis diversity ({r['date']})",
        "",
        f"`{r['command']}` — n={r['params']['n']} per plan, seed {r['params']['seed']}, every task "
        f"validated (gate, replay, mutations). Load average at end {r['loadavg_at_end']}.",
        "",
        "| metric | templates | compose |",
        "|---|---|---|",
        *(
            f"| {k.replace('_', ' ')} | {r['plans']['templates']['diversity'][k]} | "
            f"{r['plans']['compose']['diversity'][k]} |"
            for k in keys
        ),
        "| valid tasks/min (contended machine; not a throughput figure) | "
        + " | ".join(str(r["plans"][p]["valid_per_min_contended"]) for p in ("templates", "compose"))
        + " |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    r = compare(a.n, a.workers, a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    stem = a.out / f"synth-diversity-{r['date']}"
    stem.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
    md = markdown(r)
    stem.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
