"""What the compact tool block saves: tokens and SFT seconds per conversation, rollouts per hour.

The built-in loop's SmolLM2 codec writes the task's tools into the system prompt, either as full
JSON Schema lines (``smollm2-json``, the format until now) or as compact signatures (``smollm2``,
:mod:`coworkenv.proxy.codecs.signature`). Both sides do the same work:

* **tokens** — the main job's curated conversations (``--tasks`` procedural tasks, the reference
  teacher through the loop, curated as the job does), tokenized by each codec: tokens per
  conversation, of which the tool block and the supervised assistant turns (the same in both);
* **SFT** — SmolLM2-135M with LoRA r32/α64 (the job's default), packed, the machine's default
  precision, one optimizer step over the same ``--per-step`` conversations per arm, ``--rounds``
  times interleaved: seconds per conversation;
* **generation** — the embedded SmolLM2 serving the built-in loop greedily on the same
  ``--gen-tasks`` held-out tasks (seed 1), at most ``--max-turns`` calls of ``--max-new-tokens``:
  rollouts per hour and mean prompt tokens per model call.

    .venv/bin/python benchmarks/bench_tool_format.py            # 26 tasks, 8 conversations, 2 rounds

Writes ``benchmarks/results/tool-format-<date>.json``. Run it alone on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import machine_info  # benchmarks/_machine.py
from bench_sft import curated_data

RESULTS = Path(__file__).resolve().parent / "results"
FORMATS = {"json": "smollm2-json", "compact": "smollm2"}


def token_counts(data: Path, max_len: int) -> dict[str, Any]:
    from coworkenv.models import load_causal_lm
    from coworkenv.proxy.codecs.smollm2 import tool_block
    from coworkenv.rl.sft import build_examples, read_sft_jsonl

    _, tok = load_causal_lm("smollm2")
    rows = read_sft_jsonl(data)
    out: dict[str, Any] = {"conversations": len(rows)}
    for name, family in FORMATS.items():
        ex = build_examples(rows, tok, max_len=max_len, codec_family=family)
        blocks = [len(tok.encode(tool_block(tools, name))) for _, tools in rows if tools]  # type: ignore[arg-type]
        out[name] = {
            "tokens_per_conversation": round(sum(len(x.ids) for x in ex) / len(rows), 1),
            "tool_block_tokens": round(sum(blocks) / max(1, len(blocks)), 1),
            "supervised_per_conversation": round(sum(sum(x.mask) for x in ex) / len(rows), 1),
            "examples": len(ex),
        }
    return out


def sft_seconds(data: Path, family: str, per_step: int, max_len: int, out: Path) -> dict[str, Any]:
    from coworkenv.models import load_causal_lm
    from coworkenv.rl.config import SFTConfig
    from coworkenv.rl.sft import SFTTrainer, build_examples, read_sft_jsonl

    model, tok = load_causal_lm("smollm2")
    rows = read_sft_jsonl(data)[:per_step]
    ex = build_examples(rows, tok, max_len=max_len, codec_family=family)
    cfg = SFTConfig.model_validate(
        {
            "data": str(data),
            "epochs": 1,
            "batch_size": 1,
            "grad_accum": len(ex),
            "max_len": max_len,
            "run": {"out_dir": str(out), "resume": False, "progress": False},
        }
    )
    tr = SFTTrainer(cfg, model=model, tokenizer=tok, log_metrics=False)
    t0 = time.perf_counter()
    last = tr.train(ex)
    wall = time.perf_counter() - t0
    return {
        "wall_s": round(wall, 2),
        "s_per_conversation": round(wall / len(rows), 2),
        "forwarded": last.get("forwarded"),
        "precision": last.get("precision"),
    }


def generation(family: str, tasks: list[Any], args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend
    from coworkenv.proxy.backends.sampling import FixedSampling
    from coworkenv.rollout.runner import run_rollouts

    backend = EmbeddedBackend.from_checkpoint("smollm2", codec=family, max_new_tokens=args.max_new_tokens)
    try:
        t0 = time.perf_counter()
        summary = run_rollouts(
            tasks, ["loop"], 1, FixedSampling(backend, 0.0), out, args.concurrency, progress=False
        )
        wall = time.perf_counter() - t0
    finally:
        backend.close()
    prompts = []
    for f in sorted((out / "calls").glob("*.calls.jsonl")):
        prompts += [
            len(json.loads(x).get("prompt_ids") or []) for x in f.read_text().splitlines() if x.strip()
        ]
    return {
        "rollouts": summary.planned,
        "wall_s": round(wall, 1),
        "rollouts_per_hour": round(3600 * summary.planned / wall, 1),
        "model_calls": len(prompts),
        "mean_prompt_tokens": round(sum(prompts) / max(1, len(prompts)), 1),
    }


def heldout_tasks(n: int, max_turns: int, out: Path) -> list[Any]:
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import ProceduralGenerator, plan_slots

    run = synthesize(Plan(tuple(plan_slots(n, 1))), ProceduralGenerator(1), out=out)
    return [
        s.model_copy(
            update={"limits": s.limits.model_copy(update={"max_turns": min(s.limits.max_turns, max_turns)})}
        )
        for s in run.specs
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=40, help="procedural tasks behind the curated conversations")
    p.add_argument("--per-step", type=int, default=8, help="conversations in the SFT step")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-len", type=int, default=3072)
    p.add_argument("--gen-tasks", type=int, default=26)
    p.add_argument("--max-turns", type=int, default=5)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("COWORKENV_NO_PROGRESS", "1")
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-tool-format-"))
    data = curated_data(args.tasks, work / "job")
    tokens = token_counts(data, args.max_len)
    print(json.dumps(tokens, indent=1), flush=True)
    sft: dict[str, list[dict[str, Any]]] = {k: [] for k in FORMATS}
    for r in range(args.rounds):
        for name, family in FORMATS.items():
            sft[name].append(sft_seconds(data, family, args.per_step, args.max_len, work / f"sft-{name}-{r}"))
            print(name, sft[name][-1], flush=True)
    tasks = heldout_tasks(args.gen_tasks, args.max_turns, work / "heldout")
    gen = {name: generation(family, tasks, args, work / f"gen-{name}") for name, family in FORMATS.items()}
    print(json.dumps(gen, indent=1), flush=True)

    def med(name: str) -> float:
        return statistics.median(x["s_per_conversation"] for x in sft[name])

    result = {
        "benchmark": "compact tool signatures vs JSON Schema lines in the SmolLM2 codec (built-in loop)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            ["benchmarks/bench_tool_format.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "machine": machine_info(),
        "setup": vars(args) | {"out": None},
        "tokens": tokens,
        "sft": {
            name: {
                "rounds": rows,
                "s_per_conversation": {
                    "median": med(name),
                    "min": min(x["s_per_conversation"] for x in rows),
                    "max": max(x["s_per_conversation"] for x in rows),
                },
            }
            for name, rows in sft.items()
        },
        "generation": gen,
        "ratios": {
            "tokens_per_conversation_json_over_compact": round(
                tokens["json"]["tokens_per_conversation"] / tokens["compact"]["tokens_per_conversation"], 3
            ),
            "sft_s_per_conversation_json_over_compact": round(med("json") / med("compact"), 3),
            "rollouts_per_hour_compact_over_json": round(
                gen["compact"]["rollouts_per_hour"] / gen["json"]["rollouts_per_hour"], 3
            ),
        },
    }
    path = args.out or RESULTS / f"tool-format-{datetime.now(UTC):%Y-%m-%d}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["ratios"], indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
