"""How much prefix sharing can save in SFT on the main job's curated data (token counts, no timing).

SFT throughput per forwarded token is bounded by the machine (``bench_sft.py``'s ``floor`` arm);
packing only cuts how many tokens are forwarded. This counts, for the job's curated conversations
(``--tasks`` procedural tasks, reference teacher, SmolLM2's codec, ``--max-len`` tokens each):

* ``tokens`` and ``supervised`` — what one epoch holds (unpacked, every token is forwarded);
* ``forwarded_per_step_packing`` — what the trainer forwards in one epoch: batches of ``--batch``
  bucketed by prefix and packed as the SFT trainer does (``pack_examples``, 8,192 nodes);
* ``forwarded_one_trie`` — a single prefix trie over the whole epoch: the least any prefix sharing
  can forward, whatever the batching; ``tokens / forwarded_one_trie`` is the most sharing can buy;
* ``supervised_share_*`` — supervised tokens per forwarded token under each.

The counts are deterministic (seeded synthesis, fixed shuffle).

Run:  .venv/bin/python benchmarks/sft_sharing.py [--tasks 48 140] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_sft import RESULTS, curated_data  # benchmarks/bench_sft.py


def trie_nodes(examples: Sequence[Any]) -> int:
    """Nodes of one prefix trie over ``examples`` (nodes merge when parent, token and mask agree)."""
    index: dict[tuple[int, int, int], int] = {}
    for e in examples:
        parent = -1
        for tok, m in zip(e.ids, e.mask, strict=True):
            parent = index.setdefault((parent, tok, m), len(index))
    return len(index)


def count(tasks: int, batch: int, max_len: int, tok: Any) -> dict[str, Any]:
    from coworkenv.rl.sft import _batches, build_examples, pack_examples, read_sft_jsonl

    data = curated_data(tasks, Path(tempfile.gettempdir()) / f"coworkenv-bench-sft-{tasks}")
    examples = build_examples(read_sft_jsonl(data), tok, max_len=max_len)
    tokens = sum(len(e.ids) for e in examples)
    supervised = sum(sum(e.mask[1:]) for e in examples)
    steps = _batches(examples, batch, random.Random(0), bucket=True)
    per_step = sum(len(u) for b in steps for u in pack_examples(b, 8192))
    one = trie_nodes(examples)
    return {
        "tasks": tasks,
        "examples": len(examples),
        "tokens": tokens,
        "supervised": supervised,
        "forwarded_per_step_packing": per_step,
        "forwarded_one_trie": one,
        "saving_per_step_packing": round(tokens / per_step, 3),
        "saving_one_trie": round(tokens / one, 3),
        "supervised_share_unpacked": round(supervised / tokens, 3),
        "supervised_share_per_step_packing": round(supervised / per_step, 3),
        "supervised_share_one_trie": round(supervised / one, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, nargs="+", default=[48, 140])
    ap.add_argument("--batch", type=int, default=8, help="conversations per step (the job's sft.batch)")
    ap.add_argument("--max-len", type=int, default=2048, help="tokens per example (the job's sft.max_len)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ["COWORKENV_NO_PROGRESS"] = "1"
    from coworkenv.models import load_causal_lm

    _, tok = load_causal_lm()
    doc = {
        "benchmark": "prefix sharing available to SFT on the main job's curated data (token counts)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "benchmarks/sft_sharing.py " + " ".join(sys.argv[1:]),
        "load": [round(x, 2) for x in os.getloadavg()],
        "setup": {"batch": args.batch, "max_len": args.max_len, "tokenizer": "SmolLM2-135M-Instruct"},
        "rows": [count(t, args.batch, args.max_len, tok) for t in args.tasks],
    }
    day = datetime.now(UTC).date().isoformat()
    out = args.out or RESULTS / f"sft-sharing-{day}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc["rows"], indent=1))


if __name__ == "__main__":
    main()
