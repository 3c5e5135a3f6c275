"""Where a decoding step of the batching engine spends its time (cProfile of the engine thread).

Workload: ``--requests`` concurrent prompts of SmolLM2-135M-Instruct (fp32), each a shared
``--shared``-token prefix plus ``--own`` tokens of its own (random ids), ``--new`` tokens sampled
each at ``--temperature`` / ``--top-p``. Prints generated tokens/s, the engine's counters and the
top functions by own time: the model's matmuls (``linear``), the per-request attention over each
request's KV (``scaled_dot_product_attention``) and sampling (``sort``/``multinomial``). Run it alone:

    .venv/bin/python benchmarks/profile_batching.py [--requests 16 --shared 900 --own 200 --new 128]
        [--attention cascade|grouped|per_request --sampler batched|per_row --matmul fp32|bf16|auto]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import torch

from coworkenv.models import embedded_checkpoint, load_causal_lm
from coworkenv.proxy.backends.batching import BatchEngine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--shared", type=int, default=900)
    ap.add_argument("--own", type=int, default=200)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", dest="top_p", type=float, default=0.95)
    ap.add_argument("--top", type=int, default=15, help="functions to print")
    ap.add_argument("--attention", default="cascade", help="cascade, grouped or per_request")
    ap.add_argument("--sampler", default="batched", help="batched or per_row")
    ap.add_argument("--matmul", default="fp32", help="fp32, bf16 or auto")
    args = ap.parse_args()
    load = os.getloadavg()

    model, tok = load_causal_lm(str(embedded_checkpoint()))
    model.eval()
    end_ids = frozenset({tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id})
    engine = BatchEngine(
        model,
        end_ids=end_ids,
        decode=tok.decode,
        seed=0,
        attention=args.attention,
        sampler=args.sampler,
        matmul=args.matmul,
    )
    prof = cProfile.Profile()
    loop = engine._loop

    def profiled_loop() -> None:  # the engine's own thread, profiled from its first step
        prof.enable()
        try:
            loop()
        finally:
            prof.disable()

    engine._loop = profiled_loop  # type: ignore[method-assign]
    gen = torch.Generator().manual_seed(0)
    shared = torch.randint(100, 40_000, (args.shared,), generator=gen).tolist()
    prompts = [
        shared + torch.randint(100, 40_000, (args.own,), generator=gen).tolist() for _ in range(args.requests)
    ]
    t0 = time.perf_counter()
    futures = [engine.submit(p, args.new, args.temperature, args.top_p) for p in prompts]
    results = [f.result() for f in futures]
    wall = time.perf_counter() - t0
    engine.close()
    generated = sum(len(r.output_ids) for r in results)
    print(
        f"load average at start {tuple(round(x, 2) for x in load)}; torch threads {torch.get_num_threads()}"
    )
    print(f"wall {wall:.1f} s, generated {generated} tokens, {generated / wall:.1f} tok/s")
    print(f"engine: {engine.options} {engine.stats.as_dict()}")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
