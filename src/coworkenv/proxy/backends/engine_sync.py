"""Pushing the trainer's policy to a remote engine (vLLM, SGLang) through the engine's own API.

Contract: :meth:`EngineSync.push` makes the engine serve the model's current weights under the
name ``version``, then points the :class:`~coworkenv.proxy.backends.upstream.UpstreamBackend` at
them (every later call sends to them and is captured with ``version``); it returns a :class:`Push`
saying how long saving and the engine's load took. No engine restarts. Two modes:

* ``lora`` — the peft adapter is saved to ``<workdir>/<version>`` and hot-loaded as a *new* adapter
  named ``version``: vLLM ``POST /v1/load_lora_adapter`` (the server needs ``--enable-lora``, a
  ``--max-lora-rank`` at least the adapter's and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``),
  SGLang ``POST /load_lora_adapter``. Every request names its adapter, so a call in flight across
  an update finishes on the adapter it started with and is labelled with that version. Adapters
  older than the last ``keep`` are unloaded (after the switch, so no new call names them).
* ``full`` — the merged weights are saved as a checkpoint ``<workdir>/<version>`` and loaded in
  place: SGLang ``POST /update_weights_from_disk``; vLLM ``POST /collective_rpc`` with method
  ``reload_weights`` and ``weights_path`` (a dev-mode route: start the server with
  ``VLLM_SERVER_DEV_MODE=1``). Checkpoints older than the last ``keep`` are deleted. The swap runs inside
  :meth:`UpstreamBackend.swap`, which holds new calls and waits for calls in flight to settle, so
  no captured call mixes two policies.

Failures are :class:`~coworkenv.proxy.backends.base.BackendError` (``http_4xx`` with the engine's
message when, e.g., runtime LoRA updating is off).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from coworkenv.proxy.backends.base import BackendError
from coworkenv.proxy.backends.upstream import UpstreamBackend

SyncMode = Literal["lora", "full"]


@dataclass(frozen=True)
class Push:
    """One update handed to the engine: the version it serves now and where the time went."""

    version: str
    mode: SyncMode
    path: Path
    save_s: float
    load_s: float
    """From the load request sent to the engine's answer (the engine serves it from then on)."""


class EngineSync:
    def __init__(
        self,
        backend: UpstreamBackend,
        workdir: Path,
        *,
        mode: SyncMode = "lora",
        keep: int = 2,
        timeout_s: float = 600.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if mode not in ("lora", "full"):
            raise ValueError(f"unknown weight-sync mode {mode!r}; use 'lora' or 'full'")
        self.backend = backend
        self.workdir = Path(workdir)
        self.mode: SyncMode = mode
        self.keep = max(1, keep)
        self.loaded: list[str] = []
        self.timeout_s = timeout_s
        self.transport = transport  # tests; a client is opened per push (pushes are rare)

    def push(self, model: Any, version: str, *, tokenizer: Any = None) -> Push:
        """Save ``model`` and make the engine serve it as ``version`` (see the module docstring)."""
        if self.mode == "lora":
            return self._push_lora(model, version)
        return self._push_full(model, tokenizer, version)

    # ---------------------------------------------------------------- LoRA adapters

    def _push_lora(self, model: Any, version: str) -> Push:
        from coworkenv.rl.common import is_peft

        if not is_peft(model):
            raise BackendError(
                "bad_request", "LoRA weight sync needs a LoRA-trained policy (train.lora = true)"
            )
        t0 = time.perf_counter()
        path = self.workdir / version
        shutil.rmtree(path, ignore_errors=True)
        model.save_pretrained(str(path))
        saved = time.perf_counter()
        body: dict[str, Any] = {"lora_name": version, "lora_path": str(path)}
        if self.backend.flavor != "sglang":
            # an engine that outlives a job already holds e.g. "rl-1" from an earlier run: replace it
            body["load_inplace"] = True
        self._post(self._route("load_lora_adapter"), body)
        loaded = time.perf_counter()
        self.backend.serve(version, adapter=version)
        self.loaded.append(version)
        while len(self.loaded) > self.keep:
            old = self.loaded.pop(0)
            self._post(self._route("unload_lora_adapter"), {"lora_name": old})
        return Push(version, "lora", path, saved - t0, loaded - saved)

    # ---------------------------------------------------------------- full weights

    def _push_full(self, model: Any, tokenizer: Any, version: str) -> Push:
        t0 = time.perf_counter()
        path = self.workdir / version
        shutil.rmtree(path, ignore_errors=True)
        save_full_checkpoint(model, tokenizer, path)
        saved = time.perf_counter()
        with self.backend.swap(version):
            if self.backend.flavor == "sglang":
                self._post(self._route("update_weights_from_disk"), {"model_path": str(path)})
            else:
                rpc = {"method": "reload_weights", "kwargs": {"weights_path": str(path)}}
                self._post(self._route("collective_rpc"), rpc)
            loaded = time.perf_counter()
        self.loaded.append(version)
        while len(self.loaded) > self.keep:
            shutil.rmtree(self.workdir / self.loaded.pop(0), ignore_errors=True)
        return Push(version, "full", path, saved - t0, loaded - saved)

    # ---------------------------------------------------------------- HTTP

    def _route(self, name: str) -> str:
        root = self.backend.root
        if self.backend.flavor == "sglang" or name == "collective_rpc":
            return f"{root}/{name}"
        return f"{root}/v1/{name}"

    def _post(self, url: str, payload: dict[str, Any]) -> None:
        try:
            with httpx.Client(timeout=self.timeout_s, transport=self.transport) as http:
                resp = http.post(url, json=payload)
        except httpx.TimeoutException as exc:
            raise BackendError("timeout", f"POST {url}: {exc}") from exc
        except httpx.TransportError as exc:
            raise BackendError("connect", f"POST {url}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            kind = "http_5xx" if resp.status_code >= 500 else "http_4xx"
            raise BackendError(kind, f"POST {url}: HTTP {resp.status_code}: {resp.text[:300]}")
        if resp.headers.get("content-type", "").startswith("application/json"):
            body = resp.json()
            if isinstance(body, dict) and body.get("success") is False:  # SGLang's answer shape
                raise BackendError("http_4xx", f"POST {url}: the engine refused: {body.get('message')}")


def save_full_checkpoint(model: Any, tokenizer: Any, path: Path) -> Path:
    """The merged (LoRA folded in) weights as a checkpoint dir an engine loads: ``model.safetensors``,
    the config and the tokenizer. Written straight from the state dict (no second model is built,
    which on CPU costs more than the write); a tied output head is stored once, as HF does."""
    from safetensors.torch import save_file

    from coworkenv.rl.common import is_peft, merged_state_dict

    base = model.get_base_model() if is_peft(model) else model
    weights = merged_state_dict(model)
    if getattr(base.config, "tie_word_embeddings", False):
        weights.pop("lm_head.weight", None)
    path.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"), {"format": "pt"}
    )
    base.config.save_pretrained(path)
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(path)
    return path
