"""SFT throughput on the main job's curated data: supervised and forwarded tokens/s, one run, same steps.

The data is what the main job trains on: ``--tasks`` procedural tasks (seed 0), the reference
teacher through the built-in loop, curated to SFT conversations, tokenized with SmolLM2's codec
(``--max-len`` tokens per example). Every arm trains SmolLM2-135M-Instruct with LoRA r32/α64 on the
same ``--steps`` × ``--per-step`` conversations (the same shuffle), each in its own process (peak
RSS is per arm); arms run one after another, ``--rounds`` times interleaved, and the table gives
the median and the range over rounds.

* ``before``  — the job's SFT until now: one conversation per forward (padding-free, batch 1),
  gradient accumulation over the step, activation checkpointing on;
* ``packed``  — each step's conversations in prefix tries (conversations that share a prompt
  forwarded as one trie, the others alone), tree attention, activation checkpointing off;
* ``packed_auto`` — the job's default (``sft.checkpointing = "auto"``): ``packed`` with tries capped
  at 4,096 tokens and activation checkpointing only for a forward over that (``checkpoint_over``);
* ``packed_ckpt`` — ``packed`` with activation checkpointing on every forward (what memory costs);
* ``floor``   — a bare forward + backward + AdamW step of the same LoRA model over random tokens,
  as many as ``packed`` forwarded in each step (plain causal sequences of the tries' sizes): the
  cost of the forwarded tokens themselves, with nothing of ours around it;
* ``trl``     — TRL's ``SFTTrainer`` on the same tokenized conversations (``completion_mask`` =
  our assistant mask, so the same tokens are supervised), batch 1 with gradient accumulation over
  the step, its default settings otherwise (no packing: TRL's padding-free packing needs
  flash-attention kernels, absent on CPU).

Precision (``--precision``, default ``auto`` = the job's default): bf16 autocast where the CPU
computes bf16 natively (AVX512-BF16 / AMX), fp32 elsewhere — for every arm, TRL's included, so the
comparison is like for like on either CPU family. Each row records the precision it ran in and the
document the CPU (model, flags, native bf16): a figure holds on the CPU family it names.

    .venv/bin/python benchmarks/bench_sft.py            # 2 steps × 8 conversations, 3 rounds
    .venv/bin/python benchmarks/bench_sft.py --quick    # 1 step × 4 conversations of ≤ 1024 tokens, 1 round
    .venv/bin/python benchmarks/bench_sft.py --precision fp32   # fp32 on every arm, whatever the CPU

Writes ``benchmarks/results/sft-<date>[-quick].json``. Run it alone on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import machine_info  # benchmarks/_machine.py

RESULTS = Path(__file__).resolve().parent / "results"
ARMS = ("before", "packed", "packed_auto", "packed_ckpt", "floor", "trl")


def curated_data(tasks: int, out: Path) -> Path:
    """synth → reference teacher → curate, as the main job does; returns the SFT JSONL."""
    from rich.console import Console

    from coworkenv.job import run as job
    from coworkenv.job.config import load_config

    data = out / "curate" / "sft.jsonl"
    if data.exists():
        return data
    cfg = load_config(None)
    cfg = cfg.model_copy(update={"out": out, "synth": cfg.synth.model_copy(update={"tasks": tasks})})
    st = job.JobState(cfg, Console(quiet=True))
    out.mkdir(parents=True, exist_ok=True)
    for stage in ("synth", "teacher", "curate"):
        if not st.done(stage):
            st.mark(stage, job.RUNNERS[stage](st))
    return data


def _examples(data: Path, max_len: int, n: int, seed: int) -> tuple[Any, list[Any]]:
    from coworkenv.models import load_causal_lm
    from coworkenv.rl.sft import build_examples, read_sft_jsonl

    model, tok = load_causal_lm()
    examples = build_examples(read_sft_jsonl(data), tok, max_len=max_len)
    rng = random.Random(seed)
    rng.shuffle(examples)
    return (model, tok), examples[:n]


def _cfg(
    data: Path, out: Path, *, pack: bool, ckpt: bool, per_step: int, steps: int, max_len: int,
    autocast: str, extra: dict[str, Any] | None = None,
) -> Any:  # fmt: skip
    from coworkenv.rl.config import SFTConfig

    return SFTConfig.model_validate(
        {
            "data": str(data),
            "model": {"gradient_checkpointing": ckpt},
            "pack": pack,
            "autocast": autocast,
            **(extra or {}),
            "batch_size": 1,
            "grad_accum": per_step,
            "epochs": 1,
            "max_len": max_len,
            "run": {"out_dir": str(out), "max_steps": steps, "resume": False, "seed": 0},
        }
    )


def run_arm(arm: str, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One arm in this process (called in a child): tokens and seconds per step."""
    import torch

    from coworkenv.rl.sft import use_bf16

    torch.set_num_threads(min(2, os.cpu_count() or 2))
    torch.manual_seed(0)
    bf16 = use_bf16({"fp32": "off"}.get(args.precision, args.precision))
    (model, tok), examples = _examples(data, args.max_len, args.steps * args.per_step, args.seed)
    supervised = sum(sum(e.mask[1:]) for e in examples)
    out = Path(tempfile.mkdtemp(prefix=f"bench-sft-{arm}-"))
    t0 = time.perf_counter()
    if arm in ("before", "packed", "packed_auto", "packed_ckpt"):
        from coworkenv.job.config import SFTSection
        from coworkenv.rl.sft import SFTTrainer

        cfg = _cfg(
            data, out, pack=arm != "before", ckpt=arm != "packed", per_step=args.per_step,
            steps=args.steps, max_len=args.max_len, autocast="bf16" if bf16 else "off",
            extra=SFTSection(checkpointing="auto").checkpoint_settings() if arm == "packed_auto" else None,
        )  # fmt: skip
        trainer = SFTTrainer(cfg, model=model, tokenizer=tok, log_metrics=True)
        assert trainer.bf16 is bf16
        t0 = time.perf_counter()
        res = trainer.train(examples)
        wall = time.perf_counter() - t0
        lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        forwarded = sum(int(x.get("forwarded", 0)) for x in lines)
        extra = {"final_loss": res.get("loss"), "steps": len(lines)}
    elif arm == "floor":
        wall, forwarded = _floor(model, examples, args, bf16)
        extra = {}
    elif arm == "trl":
        wall, forwarded = _trl(model, tok, examples, args, out, bf16=bf16)
        extra = {}
    else:
        raise SystemExit(f"unknown arm {arm!r}")
    return {
        "arm": arm,
        "precision": "bf16-autocast" if bf16 else "fp32",
        "wall_s": round(wall, 2),
        "supervised_tokens": supervised,
        "forwarded_tokens": forwarded,
        "supervised_tok_s": round(supervised / wall, 2),
        "forwarded_tok_s": round(forwarded / wall, 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        **extra,
    }


def _floor(model: Any, examples: list[Any], args: argparse.Namespace, bf16: bool) -> tuple[float, int]:
    """Forward + backward + AdamW over random token sequences of the packed tries' sizes."""
    import torch

    from coworkenv.rl.common import build_policy
    from coworkenv.rl.config import ModelConfig
    from coworkenv.rl.sft import _batches, pack_examples

    policy, _ = build_policy(ModelConfig(gradient_checkpointing=False), model, None)
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    sizes = [
        [len(u) for u in pack_examples(b, 8192)]
        for b in _batches(examples, args.per_step, random.Random(0), bucket=True)
    ][: args.steps]
    policy.train()
    t0 = time.perf_counter()
    for step in sizes:
        opt.zero_grad(set_to_none=True)
        for n in step:
            ids = torch.randint(0, 49152, (1, n))
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                decoder = policy.get_base_model().get_decoder()
                hidden = decoder(input_ids=ids, use_cache=False).last_hidden_state
                # the LM head on as many rows as a step supervises (ours applies it to those rows only)
                rows = hidden[0, : max(1, n // 8)]
                loss = policy.get_base_model().get_output_embeddings()(rows).float().logsumexp(-1).mean()
            loss.backward()
        opt.step()
    return time.perf_counter() - t0, sum(sum(s) for s in sizes)


def _trl(
    model: Any, tok: Any, examples: list[Any], args: argparse.Namespace, out: Path, *, bf16: bool
) -> tuple[float, int]:
    """TRL's SFTTrainer on the same tokenized examples and supervised tokens."""
    import datasets
    import trl
    from peft import LoraConfig

    ds = datasets.Dataset.from_list(
        [{"input_ids": list(e.ids), "completion_mask": list(e.mask)} for e in examples]
    )
    trainer = trl.SFTTrainer(
        model=model,
        processing_class=tok,
        train_dataset=ds,
        peft_config=LoraConfig(
            r=32,
            lora_alpha=64,
            lora_dropout=0.05,
            task_type="CAUSAL_LM",
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        ),
        args=trl.SFTConfig(
            output_dir=str(out),
            per_device_train_batch_size=1,
            gradient_accumulation_steps=args.per_step,
            max_steps=args.steps,
            learning_rate=2e-4,
            completion_only_loss=True,
            max_length=args.max_len,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            use_cpu=True,
            dataloader_num_workers=0,
            gradient_checkpointing=True,
            # TRL defaults to bf16 autocast; ours autocasts only where bf16 is native (emulated bf16
            # is ~15x slower on AVX2), so TRL runs in the precision our arms ran in (like for like)
            bf16=bf16,
            seed=0,
        ),
    )
    t0 = time.perf_counter()
    trainer.train()
    return time.perf_counter() - t0, sum(len(e.ids) for e in examples)


def _child(arm: str, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable, __file__, "--arm", arm, "--data", str(data), "--steps", str(args.steps),
        "--per-step", str(args.per_step), "--max-len", str(args.max_len), "--seed", str(args.seed),
        "--precision", args.precision,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"arm": arm, "error": proc.stderr[-1500:]}
    row: dict[str, Any] = json.loads(lines[-1])
    print(json.dumps(row), flush=True)
    return row


def _spread(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "min": min(xs), "max": max(xs)}


def summarize(rounds: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Per arm: median and range over rounds; ratios per round, then their median and range."""
    arms: dict[str, Any] = {}
    for arm in {r["arm"] for rs in rounds for r in rs}:
        vals = [r for rs in rounds for r in rs if r["arm"] == arm and "error" not in r]
        if not vals:
            arms[arm] = {"error": next(r["error"] for rs in rounds for r in rs if r["arm"] == arm)}
            continue
        sup = [v["supervised_tok_s"] for v in vals]
        fwd = [v["forwarded_tok_s"] for v in vals]
        arms[arm] = {
            "supervised_tok_s": _spread(sup),
            "forwarded_tok_s": _spread(fwd),
            "forwarded_tokens": vals[0]["forwarded_tokens"],
            "supervised_tokens": vals[0]["supervised_tokens"],
            "peak_rss_gb": max(v["peak_rss_gb"] for v in vals),
        }

    def ratio(num: str, den: str, key: str) -> dict[str, float] | None:
        per = []
        for rs in rounds:
            by = {r["arm"]: r for r in rs if "error" not in r}
            if num in by and den in by:
                per.append(by[num][key] / max(1e-9, by[den][key]))
        if not per:
            return None
        return {
            "median": round(statistics.median(per), 3),
            "min": round(min(per), 3),
            "max": round(max(per), 3),
        }

    return {
        "arms": arms,
        "ratios": {
            "packed_auto_vs_before_supervised": ratio("packed_auto", "before", "supervised_tok_s"),
            "packed_auto_vs_trl_supervised": ratio("packed_auto", "trl", "supervised_tok_s"),
            "packed_auto_vs_floor_forwarded": ratio("packed_auto", "floor", "forwarded_tok_s"),
            "packed_vs_before_supervised": ratio("packed", "before", "supervised_tok_s"),
            "packed_vs_trl_supervised": ratio("packed", "trl", "supervised_tok_s"),
            "packed_vs_floor_forwarded": ratio("packed", "floor", "forwarded_tok_s"),
            "packed_ckpt_vs_packed_supervised": ratio("packed_ckpt", "packed", "supervised_tok_s"),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=40, help="procedural tasks behind the curated data")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--per-step", type=int, default=8, help="conversations per optimizer step")
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="every arm's precision: auto = bf16 autocast where native, else fp32 (the job's default)",
    )
    ap.add_argument("--quick", action="store_true", help="1 step × 4 conversations ≤ 1024 tokens, 1 round")
    ap.add_argument("--arm", help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.arm, args.data, args)))
        return
    if args.quick:
        args.steps, args.per_step, args.max_len, args.rounds = 1, 4, 1024, 1
    os.environ["COWORKENV_NO_PROGRESS"] = "1"
    data = curated_data(args.tasks, Path(tempfile.gettempdir()) / f"coworkenv-bench-sft-{args.tasks}")
    load_before = [round(x, 2) for x in os.getloadavg()]
    rounds = [[_child(arm, data, args) for arm in args.arms.split(",")] for _ in range(args.rounds)]
    doc = {
        "benchmark": "SFT throughput on the main job's curated data (SmolLM2-135M, LoRA r32/α64)",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "benchmarks/bench_sft.py " + " ".join(sys.argv[1:]),
        "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "machine": machine_info(),
        "precision": args.precision,
        "setup": {
            "tasks": args.tasks,
            "steps": args.steps,
            "conversations_per_step": args.per_step,
            "max_len": args.max_len,
            "rounds": args.rounds,
            "cpus": os.cpu_count(),
        },
        "rounds": rounds,
        **summarize(rounds),
        "quick": args.quick,
    }
    day = datetime.now(UTC).date().isoformat()
    tag = "" if args.precision == "auto" else f"-{args.precision}"
    out = args.out or RESULTS / f"sft-{day}{tag}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"ratios": doc["ratios"], "out": str(out)}, indent=1))


if __name__ == "__main__":
    main()
