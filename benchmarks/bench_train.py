"""Training benchmarks on CPU: (i) tree-packed vs branch-by-branch RL steps, (ii) our GRPO step vs TRL.

(i)  The same branched rollouts (synthetic, :mod:`coworkenv.rl.synthetic`) trained with
     ``packing=True`` (each rollout's prefix tree forwarded once, tree attention mask) and
     ``packing=False`` (each root-to-leaf branch forwarded separately), at branching factors 2 and 4:
     tokens forwarded and median wall time of a full ``RLTrainer.step`` (π_old recompute + update).
(ii) One GRPO update on the same random Llama, batch (8 completions of one prompt) and lengths:
     ours (``RLTrainer.step``: π_old (fused into the update forward at 1 PPO epoch), IS weights,
     PPO-clip, AdamW) vs TRL's ``GRPOTrainer``
     update (``compute_loss`` + backward + AdamW step on prepared inputs; generation excluded on
     both sides). TRL is timed twice: as configured by default (π_old taken from the same forward,
     no extra pass) and with ``old_per_token_logps`` recomputed in a no-grad pass like ours.

Every comparison is timed in interleaved rounds (one step of each side per round, so load drift
hits both alike) and reported as the **median** over the rounds, with the spread of the per-round
paired ratio (min / median / max over ``--reps`` rounds) — never the best round. The JSON names the
date, the machine's load average at start and end, and the exact command.

Run:  .venv/bin/python benchmarks/bench_train.py [--quick] [--reps 9]
Writes benchmarks/results/train-<date>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import torch
from _machine import machine_info  # benchmarks/_machine.py

from coworkenv.rl.config import RLConfig, parse_config
from coworkenv.rl.rl import RLTrainer
from coworkenv.rl.synthetic import branched_group
from coworkenv.rl.tiny import save_tiny_checkpoint, tiny_llama
from coworkenv.trajectories.sample import TrainingSample

RESULTS = Path(__file__).resolve().parent / "results"
SHAPE = {"hidden": 256, "layers": 4, "heads": 4}
VOCAB = 8192


def _cfg(out: Path, **kw: Any) -> RLConfig:
    base: dict[str, Any] = {
        "model": {"lora": None},
        "run": {"out_dir": str(out), "resume": False},
        "optim": {"lr": 1e-5},
        "micro_batch_tokens": 8192,
        "max_len": 16384,
    }
    base.update(kw)
    return parse_config(RLConfig, base)


K = TypeVar("K")


def paired_spread(slow: list[float], fast: list[float]) -> dict[str, float | int]:
    """Per-round ratios ``slow[i] / fast[i]`` of interleaved rounds: min, median, max and count."""
    ratios = sorted(a / b for a, b in zip(slow, fast, strict=True))
    return {
        "min": ratios[0],
        "median": statistics.median(ratios),
        "max": ratios[-1],
        "rounds": len(ratios),
    }


def _spread_text(sp: dict[str, Any]) -> str:
    return f"{sp['median']:.2f}x (range {sp['min']:.2f}–{sp['max']:.2f} over {sp['rounds']} rounds)"


def _interleaved(
    trainers: dict[K, RLTrainer], samples: list[TrainingSample], reps: int
) -> tuple[dict[K, dict[str, Any]], dict[K, list[float]]]:
    """A warm-up step each (its metrics returned), then ``reps`` timed steps each, interleaved so
    load drift on a shared machine hits every side alike."""
    firsts = {k: tr.step(samples) for k, tr in trainers.items()}
    times: dict[K, list[float]] = {k: [] for k in trainers}
    for _ in range(reps):
        for k, tr in trainers.items():
            t0 = time.perf_counter()
            tr.step(samples)
            times[k].append(time.perf_counter() - t0)
    return firsts, times


def bench_packing(tmp: Path, reps: int, quick: bool) -> list[dict[str, Any]]:
    rows = []
    prefix, tail = (384, 128) if quick else (768, 192)
    for branches in (2, 4):
        samples = branched_group(
            group_size=4,
            branches=branches,
            prefix_len=prefix,
            branch_len=tail,
            vocab=VOCAB,
            seed=branches,
            rewards=[1, 0, 0, 1],
        )
        row: dict[str, Any] = {"branches": branches, "prefix_len": prefix, "branch_len": tail, "rollouts": 4}
        trainers = {
            packing: RLTrainer(
                _cfg(tmp / f"p{branches}{packing}", group_size=4, batch_size=4, packing=packing),
                model=tiny_llama(VOCAB, **SHAPE),
                log_metrics=False,
            )
            for packing in (True, False)
        }
        firsts, times = _interleaved(trainers, samples, reps)
        for p in (True, False):
            key = "packed" if p else "branchwise"
            row[key] = {
                "tokens_forwarded": firsts[p]["tokens_forwarded"],
                "step_s": statistics.median(times[p]),
                "times": times[p],
            }
        row["speedup_spread"] = paired_spread(times[False], times[True])
        row["speedup"] = row["speedup_spread"]["median"]
        row["token_ratio"] = row["branchwise"]["tokens_forwarded"] / row["packed"]["tokens_forwarded"]
        rows.append(row)
        print(f"packing b={branches}: {row['token_ratio']:.2f}x fewer tokens, {row['speedup']:.2f}x faster")
    return rows


def bench_scope(tmp: Path, reps: int, quick: bool) -> dict[str, Any]:
    """A harness-like group: every rollout starts from the same long prompt (system prompt, tools,
    request). Per-rollout trees forward it once per rollout; group scope once per group."""
    shared, prefix, tail = (1024, 128, 64) if quick else (2048, 256, 128)
    samples = branched_group(
        group_size=4,
        branches=2,
        prefix_len=prefix,
        branch_len=tail,
        vocab=VOCAB,
        seed=7,
        rewards=[1, 0, 0, 1],
        shared_prompt=shared,
    )
    trainers = {
        scope: RLTrainer(
            _cfg(tmp / f"scope-{scope}", group_size=4, batch_size=4, pack_scope=scope),
            model=tiny_llama(VOCAB, **SHAPE),
            log_metrics=False,
        )
        for scope in ("group", "rollout")
    }
    firsts, times = _interleaved(trainers, samples, reps)
    row: dict[str, Any] = {"rollouts": 4, "branches": 2, "shared_prompt": shared, "prefix_len": prefix}
    row["branch_len"] = tail
    for k in trainers:
        tok = firsts[k]["tokens_forwarded"]
        row[k] = {"tokens_forwarded": tok, "step_s": statistics.median(times[k]), "times": times[k]}
    row["speedup_spread"] = paired_spread(times["rollout"], times["group"])
    row["speedup"] = row["speedup_spread"]["median"]
    row["token_ratio"] = row["rollout"]["tokens_forwarded"] / row["group"]["tokens_forwarded"]
    print(f"pack scope: group {row['token_ratio']:.2f}x fewer tokens, {row['speedup']:.2f}x faster")
    return row


def _grpo_samples(
    prompt: list[int], completions: list[list[int]], rewards: list[float]
) -> list[TrainingSample]:
    out = []
    for i, (c, r) in enumerate(zip(completions, rewards, strict=True)):
        toks = prompt + c
        mask = [0] * len(prompt) + [1] * len(c)
        out.append(
            TrainingSample(
                rollout_id=f"r{i}",
                task_id="t",
                harness="h",
                group_key="t|h",
                branch_id=0,
                token_ids=tuple(toks),
                loss_mask=tuple(mask),
                logprobs=tuple(-2.0 * m for m in mask),
                weights=tuple(float(m) for m in mask),
                reward=r,
            )
        )
    return out


def bench_trl(tmp: Path, reps: int, quick: bool) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    g, plen, clen = 8, 128, (128 if quick else 256)
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, VOCAB - 1, (plen,), generator=gen).tolist()
    comps = [torch.randint(0, VOCAB - 1, (clen,), generator=gen).tolist() for _ in range(g)]
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0]

    samples = _grpo_samples(prompt, comps, rewards)

    ck = save_tiny_checkpoint(tmp / "trl-model", VOCAB, **SHAPE)
    tok = AutoTokenizer.from_pretrained(ck)
    tok.pad_token = tok.unk_token
    args = GRPOConfig(
        output_dir=str(tmp / "trl"),
        per_device_train_batch_size=g,
        num_generations=g,
        max_completion_length=clen,
        learning_rate=1e-5,
        use_cpu=True,
        report_to=[],
        beta=0.0,
        loss_type="grpo",
        logging_steps=1000,
        save_strategy="no",
        epsilon=0.2,
        epsilon_high=0.28,
        # TRL defaults to bf16 autocast; ours steps in fp32, and on a CPU without native bf16 the
        # emulated bf16 is ~15x slower, so both sides run fp32 (like for like)
        bf16=False,
    )
    model = tiny_llama(VOCAB, **SHAPE)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["t1 t2"] * g}),
        processing_class=tok,
    )
    # the same activation-checkpointing setting on both sides (TRL's GRPOConfig turns it on)
    ckpt = bool(model.is_activation_checkpointing)
    ours = RLTrainer(
        _cfg(
            tmp / "ours",
            group_size=g,
            batch_size=g,
            packing=True,
            model={"lora": None, "gradient_checkpointing": ckpt},
        ),
        model=tiny_llama(VOCAB, **SHAPE),
        log_metrics=False,
    )
    trainer.create_optimizer_and_scheduler(num_training_steps=100)
    opt = trainer.optimizer
    trainer.current_gradient_accumulation_steps = 1  # normally set inside Trainer.train's loop
    model.train()
    adv = torch.tensor(rewards)
    adv = (adv - adv.mean()) / adv.std(unbiased=False).clamp(min=0.05)
    inputs: dict[str, Any] = {
        "prompt_ids": torch.tensor([prompt] * g),
        "prompt_mask": torch.ones(g, plen, dtype=torch.long),
        "completion_ids": torch.tensor(comps),
        "completion_mask": torch.ones(g, clen, dtype=torch.long),
        "advantages": adv,
        "num_items_in_batch": torch.tensor(float(g * clen)),
    }

    def trl_update(recompute_old: bool) -> None:
        inp = dict(inputs)
        if recompute_old:
            with torch.no_grad():
                ids = torch.cat([inp["prompt_ids"], inp["completion_ids"]], 1)
                att = torch.cat([inp["prompt_mask"], inp["completion_mask"]], 1)
                inp["old_per_token_logps"], _, _ = trainer._get_per_token_logps_and_entropies(
                    model, ids, att, clen
                )
        opt.zero_grad()
        loss = trainer.compute_loss(model, inp)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    sides: dict[str, Callable[[], Any]] = {
        "ours": lambda: ours.step(samples),
        "trl": lambda: trl_update(False),
        "trl_old": lambda: trl_update(True),
    }
    for fn in sides.values():
        fn()  # warm-up
    t: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(reps):  # interleaved, so load drift on a shared machine hits every side alike
        for k, fn in sides.items():
            t0 = time.perf_counter()
            fn()
            t[k].append(time.perf_counter() - t0)
    ours_s, trl_s, trl_old_s = (statistics.median(t[k]) for k in ("ours", "trl", "trl_old"))
    ours_t, trl_t, trl_old_t = t["ours"], t["trl"], t["trl_old"]
    spread, spread_old = paired_spread(trl_t, ours_t), paired_spread(trl_old_t, ours_t)
    res = {
        "group": g,
        "prompt_len": plen,
        "completion_len": clen,
        "activation_checkpointing": ckpt,
        "precision": "fp32 on both sides (TRL's bf16 default turned off)",
        "ours_step_s": ours_s,
        "ours_times": ours_t,
        "trl_update_s": trl_s,
        "trl_times": trl_t,
        "trl_update_with_old_pass_s": trl_old_s,
        "trl_old_times": trl_old_t,
        # the median of the per-round paired ratios, and their spread (not the best round)
        "ratio_vs_trl": spread["median"],
        "ratio_vs_trl_spread": spread,
        "ratio_vs_trl_with_old_pass": spread_old["median"],
        "ratio_vs_trl_with_old_pass_spread": spread_old,
    }
    print(
        f"grpo step (median of {reps}): ours {ours_s:.3f}s, TRL {trl_s:.3f}s "
        f"(with π_old pass {trl_old_s:.3f}s); TRL/ours {_spread_text(spread)}"
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter sequences, fewer repetitions")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--only", choices=("packing", "scope", "trl"), default=None)
    a = ap.parse_args()
    reps = a.reps or (2 if a.quick else 9)
    load_start = os.getloadavg()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        packing = [] if a.only not in (None, "packing") else bench_packing(tmp, reps, a.quick)
        scope = {} if a.only not in (None, "scope") else bench_scope(tmp, reps, a.quick)
        trl = {} if a.only not in (None, "trl") else bench_trl(tmp, reps, a.quick)
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": metadata.version("transformers"),
        "trl": metadata.version("trl"),
        "threads": torch.get_num_threads(),
        "model": {"vocab": VOCAB, **SHAPE},
        "quick": a.quick,
        "reps": reps,
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "cpus": os.cpu_count(),
        "machine": machine_info(),
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "summary": "median over interleaved rounds; ratios: per-round paired ratio min/median/max",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"train-{meta['date'][:10]}"
    if a.only and stem.with_suffix(".json").exists():  # keep the part not rerun
        prev = json.loads(stem.with_suffix(".json").read_text())
        packing = packing or prev.get("packing", [])
        scope = scope or prev.get("scope", {})
        trl = trl or prev.get("trl", {})
    out = {"meta": meta, "packing": packing, "scope": scope, "trl": trl}
    stem.with_suffix(".json").write_text(json.dumps(out, indent=2) + "\n")
    md = [
        f"# Training benchmarks ({meta['date']}, CPU, {meta['threads']} threads, torch {meta['torch']})",
        "",
        f"Random Llama: vocab {VOCAB}, hidden {SHAPE['hidden']}, {SHAPE['layers']} layers. "
        f"Median of {reps} interleaved rounds; speed-ups are the median per-round paired ratio with its "
        f"range. Load average {meta['load_average_start'][0]:.1f} at start, "
        f"{meta['load_average_end'][0]:.1f} at end ({meta['cpus']} CPUs).",
        "",
        f"Command: `{meta['command']}`",
        "",
        "## (i) Tree-packed vs branch-by-branch RL step (4 rollouts, full fine-tuning)",
        "",
        "| branches | prefix/branch tokens | tokens fwd packed | tokens fwd branchwise | step packed (s) "
        "| step branchwise (s) | speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in packing:
        md.append(
            f"| {r['branches']} | {r['prefix_len']}/{r['branch_len']} | {r['packed']['tokens_forwarded']} "
            f"| {r['branchwise']['tokens_forwarded']} | {r['packed']['step_s']:.3f} "
            f"| {r['branchwise']['step_s']:.3f} | {_spread_text(r['speedup_spread'])} |"
        )
    if scope:
        md += [
            "",
            f"## Group-scope packing: a {scope['shared_prompt']}-token prompt shared by "
            f"{scope['rollouts']} rollouts (× {scope['branches']} branches)",
            "",
            "| tokens fwd group | tokens fwd per rollout | step group (s) | step per rollout (s) "
            "| speed-up |",
            "|---|---|---|---|---|",
            f"| {scope['group']['tokens_forwarded']} | {scope['rollout']['tokens_forwarded']} "
            f"| {scope['group']['step_s']:.3f} | {scope['rollout']['step_s']:.3f} "
            f"| {_spread_text(scope['speedup_spread'])} |",
        ]
    md += [
        "",
        f"## (ii) GRPO update vs TRL {meta['trl']} GRPOTrainer "
        f"(group {trl['group']}, prompt {trl['prompt_len']}, "
        f"completion {trl['completion_len']})",
        "",
        "| ours: full step, π_old fused (s) | TRL update, default (s) | TRL update + π_old pass (s) |",
        "|---|---|---|",
        f"| {trl['ours_step_s']:.3f} | {trl['trl_update_s']:.3f} "
        f"(TRL/ours {_spread_text(trl['ratio_vs_trl_spread'])}) "
        f"| {trl['trl_update_with_old_pass_s']:.3f} "
        f"(TRL/ours {_spread_text(trl['ratio_vs_trl_with_old_pass_spread'])}) |",
        "",
        "Ratios > 1 mean TRL is slower. Generation is excluded on both sides. Activation "
        f"checkpointing: {'on' if trl.get('activation_checkpointing') else 'off'} on both sides. "
        f"Precision: {trl.get('precision', 'not recorded')}.",
    ]
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(f"wrote {stem}.json/.md")


if __name__ == "__main__":  # pragma: no cover
    main()
