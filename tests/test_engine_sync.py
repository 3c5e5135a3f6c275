"""Weight sync to a remote engine through its API (fake vLLM / SGLang routes; the real vLLM is in
``test_vllm_live.py``): what each push sends, which adapter and version the next calls use, and
that calls in flight across an update keep the version that produced them (LoRA) or settle before
an in-place swap (full weights)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from coworkenv.proxy.backends.base import BackendError
from coworkenv.proxy.backends.engine_sync import EngineSync
from coworkenv.proxy.backends.upstream import UpstreamBackend
from coworkenv.proxy.messages import ChatRequest, Message

pytest.importorskip("transformers")


class FakePeft:
    """Enough of a peft model for the LoRA push: it is peft, and saves an adapter dir."""

    def __init__(self) -> None:
        self.peft_config: dict[str, Any] = {"default": {}}

    def get_base_model(self) -> Any:
        return self

    def save_pretrained(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "adapter_config.json").write_text("{}")


class FakeEngine:
    """The engine's routes over an httpx mock transport; ``hold`` parks generation calls."""

    def __init__(self, flavor: str = "vllm") -> None:
        self.flavor = flavor
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.lock = threading.Lock()
        self.refuse = False

    def _log(self, path: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.events.append((path, body))

    def admin(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self._log(request.url.path, body)
        if self.refuse:
            return httpx.Response(200, json={"success": False, "message": "bad checkpoint"})
        return httpx.Response(200, json={"success": True})

    async def generate(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self._log(request.url.path + ":start", body)
        while not self.hold.is_set():
            await asyncio.sleep(0.005)
        self._log(request.url.path + ":end", body)
        if self.flavor == "sglang":
            return httpx.Response(
                200, json={"text": "hi", "meta_info": {"output_token_logprobs": [[-0.1, 5, None]]}}
            )
        choice = {"text": "hi", "token_ids": [5], "logprobs": {"token_logprobs": [-0.1]}}
        return httpx.Response(200, json={"choices": [choice]})


@pytest.fixture
def tokenizer() -> Any:
    from coworkenv.proxy.backends.embedded import smollm2_tokenizer

    return smollm2_tokenizer()


def _pair(engine: FakeEngine, tokenizer: Any, tmp: Path, mode: str) -> tuple[UpstreamBackend, EngineSync]:
    url = "http://engine:8000" + ("" if engine.flavor == "sglang" else "/v1")
    backend = UpstreamBackend(
        url,
        tokenizer,
        model="base-model",
        flavor=engine.flavor,
        version="base",
        transport=httpx.MockTransport(engine.generate),
    )
    sync = EngineSync(backend, tmp, mode=mode, transport=httpx.MockTransport(engine.admin), keep=2)  # type: ignore[arg-type]
    return backend, sync


REQ = ChatRequest(messages=(Message(role="user", content="hello"),), max_tokens=4)


async def test_vllm_lora_push_loads_a_new_adapter_and_routes_next_calls(
    tokenizer: Any, tmp_path: Path
) -> None:
    engine = FakeEngine()
    backend, sync = _pair(engine, tokenizer, tmp_path, "lora")
    assert (await backend.complete(REQ)).policy_version == "base"
    assert engine.events[-1][1]["model"] == "base-model"
    push = sync.push(FakePeft(), "rl-1")
    assert engine.events[-1] == (
        "/v1/load_lora_adapter",
        {"lora_name": "rl-1", "lora_path": str(tmp_path / "rl-1"), "load_inplace": True},
    )
    assert (push.path / "adapter_config.json").exists()
    comp = await backend.complete(REQ)
    assert comp.policy_version == "rl-1"
    assert engine.events[-1][1]["model"] == "rl-1"  # vLLM routes to the adapter by name
    sync.push(FakePeft(), "rl-2")
    sync.push(FakePeft(), "rl-3")  # keep=2: rl-1 is unloaded once no new call can name it
    admin = [(p, b.get("lora_name")) for p, b in engine.events if not p.endswith(("start", "end"))]
    assert admin[-2:] == [("/v1/load_lora_adapter", "rl-3"), ("/v1/unload_lora_adapter", "rl-1")]
    assert sync.loaded == ["rl-2", "rl-3"]
    await backend.aclose()


async def test_a_call_in_flight_across_a_lora_update_keeps_its_version(
    tokenizer: Any, tmp_path: Path
) -> None:
    engine = FakeEngine()
    backend, sync = _pair(engine, tokenizer, tmp_path, "lora")
    engine.hold.clear()
    slow = asyncio.create_task(backend.complete(REQ))
    while not any(p.endswith("start") for p, _ in engine.events):
        await asyncio.sleep(0.005)
    await asyncio.to_thread(sync.push, FakePeft(), "rl-1")  # not blocked by the call in flight
    engine.hold.set()
    old, new = await slow, await backend.complete(REQ)
    assert (old.policy_version, new.policy_version) == ("base", "rl-1")
    sent = [b["model"] for p, b in engine.events if p.endswith("start")]
    assert sent == ["base-model", "rl-1"]
    await backend.aclose()


@pytest.mark.parametrize("flavor", ["vllm", "sglang"])
async def test_full_weights_swap_waits_for_calls_in_flight_and_holds_new_ones(
    tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flavor: str
) -> None:
    from coworkenv.proxy.backends import engine_sync

    monkeypatch.setattr(engine_sync, "save_full_checkpoint", lambda m, t, p: Path(p).mkdir(parents=True))
    engine = FakeEngine(flavor)
    backend, sync = _pair(engine, tokenizer, tmp_path, "full")
    engine.hold.clear()
    first = asyncio.create_task(backend.complete(REQ))
    while not any(p.endswith("start") for p, _ in engine.events):
        await asyncio.sleep(0.005)
    pushing = asyncio.create_task(asyncio.to_thread(sync.push, object(), "rl-1"))
    while not backend._swapping:  # the swap has begun: it waits for the call in flight
        if pushing.done():
            await pushing  # it failed: raise its error
        await asyncio.sleep(0.005)
    second = asyncio.create_task(backend.complete(REQ))  # arrives during the swap: held
    await asyncio.sleep(0.05)
    reload_path = "/update_weights_from_disk" if flavor == "sglang" else "/collective_rpc"
    assert [p for p, _ in engine.events] == [f"{backend.url[len('http://engine:8000') :]}:start"]
    engine.hold.set()
    push = await pushing
    a, b = await first, await second
    order = [p for p, _ in engine.events]
    gen = backend.url[len("http://engine:8000") :]
    assert order == [f"{gen}:start", f"{gen}:end", reload_path, f"{gen}:start", f"{gen}:end"]
    assert (a.policy_version, b.policy_version) == ("base", "rl-1")
    body = engine.events[2][1]
    if flavor == "sglang":
        assert body == {"model_path": str(tmp_path / "rl-1")}
    else:
        assert body == {"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path / "rl-1")}}
    assert push.mode == "full"
    assert push.load_s >= 0
    await backend.aclose()


async def test_sglang_lora_names_the_adapter_per_request_and_refusals_raise(
    tokenizer: Any, tmp_path: Path
) -> None:
    engine = FakeEngine("sglang")
    backend, sync = _pair(engine, tokenizer, tmp_path, "lora")
    sync.push(FakePeft(), "rl-1")
    assert engine.events[-1][0] == "/load_lora_adapter"
    assert (await backend.complete(REQ)).policy_version == "rl-1"
    assert engine.events[-1][1]["lora_path"] == "rl-1"
    engine.refuse = True
    with pytest.raises(BackendError, match="bad checkpoint"):
        sync.push(FakePeft(), "rl-2")
    assert backend.policy_version == "rl-1"  # a refused load changes nothing
    with pytest.raises(BackendError, match="LoRA-trained"):
        sync.push(object(), "rl-3")
    await backend.aclose()


def test_swap_times_out_when_calls_never_settle(tokenizer: Any, tmp_path: Path) -> None:
    backend, _ = _pair(FakeEngine(), tokenizer, tmp_path, "full")
    backend._inflight = 1  # a call that never ends
    t0 = time.monotonic()
    with pytest.raises(BackendError, match="in flight"), backend.swap("rl-1", timeout_s=0.05):
        pass
    assert time.monotonic() - t0 < 2
    assert backend.policy_version == "base"


def test_full_checkpoint_loads_back_into_the_architecture(tmp_path: Path) -> None:
    """What a full push writes is a plain checkpoint: it loads strictly and equals the merged policy."""
    import torch
    from transformers import AutoModelForCausalLM

    from coworkenv.proxy.backends.engine_sync import save_full_checkpoint
    from coworkenv.rl.common import build_policy, merged_state_dict
    from coworkenv.rl.config import ModelConfig
    from coworkenv.rl.tiny import tiny_llama

    policy, _ = build_policy(ModelConfig(gradient_checkpointing=False), tiny_llama(64), None)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(0.01)
    path = save_full_checkpoint(policy, None, tmp_path / "ck")
    back = AutoModelForCausalLM.from_pretrained(path)
    want = merged_state_dict(policy)
    got = back.state_dict()
    assert got.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], msg=k)
