"""How much prompt-lookup speculative decoding would save on captured model calls (issue 32).

Replays every captured call under ``DIR`` (``**/*.calls.jsonl``, as a run writes them) through
:func:`coworkenv.proxy.backends.lookup.acceptance`: at each step a draft of up to ``k`` tokens from
the sequence's own prompt and output, the leading ones equal to what was generated accepted, one
more token made by the verifying forward. Reports, per ``k``, generated tokens per forward (the
factor by which decode forwards would fall), the draft tokens' acceptance rate and the share of
forwards that had a draft. No model runs: this sizes the lever before the engine has it; what a
verifying forward costs over a plain decode step is the engine's to measure.

    .venv/bin/python benchmarks/lookup_acceptance.py ~/.cache/coworkenv/experiments/RUN/grpo-dr_grpo

Writes ``benchmarks/results/lookup-acceptance-<date>.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from _machine import machine_info, provenance

from coworkenv.proxy.backends.lookup import acceptance
from coworkenv.proxy.capture import read_calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "dir", type=Path, help="a run directory holding *.calls.jsonl files (searched recursively)"
    )
    ap.add_argument("--k", default="2,4,8", help="draft lengths, comma-separated")
    ap.add_argument("--max-calls", type=int, default=0, help="replay at most this many calls (0 = all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    files = sorted(args.dir.expanduser().rglob("*.calls.jsonl"))
    if not files:
        raise SystemExit(f"{args.dir}: no *.calls.jsonl under it (a run's calls/ directory holds them)")
    pairs: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    problems = 0
    for f in files:
        calls, bad = read_calls(f)
        problems += len(bad)
        pairs.extend((c.prompt_ids, c.output_ids) for c in calls if c.output_ids)
        if args.max_calls and len(pairs) >= args.max_calls:
            pairs = pairs[: args.max_calls]
            break
    started = dt.datetime.now(dt.UTC)
    rows = []
    for k in (int(x) for x in args.k.split(",") if x):
        for max_n, min_n in ((3, 2), (3, 1)):
            got = acceptance(pairs, k, max_n=max_n, min_n=min_n)
            row = {
                "k": k,
                "ngram": [max_n, min_n],
                "calls": got.calls,
                "generated_tokens": got.tokens,
                "forwards": got.spec_steps,
                "tokens_per_forward": round(got.tokens_per_step, 3),
                "acceptance_rate": round(got.acceptance_rate, 3),
                "drafted_share": round(got.drafted_steps / max(1, got.spec_steps), 3),
                "draft_tokens_per_forward": round(got.proposed / max(1, got.spec_steps), 3),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    doc = {
        **provenance("lookup-acceptance", started),
        "source": {
            "dir": str(args.dir),
            "files": len(files),
            "calls": len(pairs),
            "unreadable_lines": problems,
            "mean_prompt_tokens": round(sum(len(p) for p, _ in pairs) / max(1, len(pairs)), 1),
            "mean_output_tokens": round(sum(len(o) for _, o in pairs) / max(1, len(pairs)), 1),
        },
        "machine": machine_info(),
        "what": "replay only (no model): generated tokens per forward if every decode step verified a "
        "prompt-lookup draft of up to k tokens; the draft never changes what is sampled",
        "rows": rows,
    }
    out = (
        args.out or Path(__file__).parent / "results" / f"lookup-acceptance-{started.date().isoformat()}.json"
    )
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
