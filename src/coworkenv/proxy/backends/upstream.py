"""Token-exact remote engines: vLLM, SGLang or any OpenAI-compatible server that takes token ids.

The request is rendered locally with the codec and a Hugging Face tokenizer (the model's own), and
the *token ids* are sent, so ``prompt_ids`` are exactly what the engine saw. Flavors:

* ``vllm`` / ``openai``: ``POST {base}/v1/completions`` with ``prompt`` = the id list,
  ``logprobs=1``; vLLM extras ``return_tokens_as_token_ids`` and ``return_token_ids`` let the
  generated ids come back exactly (``choices[0].token_ids``, else ``token_id:N`` strings in
  ``logprobs.tokens``; a plain OpenAI-compatible server's token strings are mapped through the
  tokenizer's vocabulary). ``logprobs.token_logprobs`` are the logprobs.
* ``sglang``: the native ``POST {base}/generate`` with ``input_ids`` and ``return_logprob``
  (``meta_info.output_token_logprobs`` = ``[logprob, id, text]`` triples).

Which distribution the logprobs come from is the engine's setting: for the same meaning as the
embedded backend (the processed sampling distribution) start vLLM with
``--logprobs-mode processed_logprobs``; by default vLLM reports the raw model's. A prompt echoed
back that differs from ours, missing logprobs or misaligned ids raise ``BackendError``.

Policy versions (what :mod:`~coworkenv.proxy.backends.engine_sync` updates): a call takes the
version and the LoRA adapter it is sent to together when it starts, and its capture carries that
version. :meth:`UpstreamBackend.serve` switches both for the calls that start after it (an adapter
is named per request, so a call in flight keeps its own); :meth:`UpstreamBackend.swap` brackets an
in-place weight update: new calls wait, calls in flight settle first, and the calls after it carry
the new version, so no captured call straddles two policies.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from coworkenv.proxy.backends._http import JsonPoster
from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.codecs import Codec, get_codec
from coworkenv.proxy.codecs.base import count_tool_calls
from coworkenv.proxy.messages import ChatRequest, FinishReason

FLAVORS = ("vllm", "openai", "sglang")


def _finish(value: Any) -> FinishReason:
    if isinstance(value, dict):
        value = value.get("type")
    return "length" if value == "length" else "stop"


class UpstreamBackend:
    name = "upstream"

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        *,
        model: str = "",
        flavor: str = "vllm",
        codec: Codec | str = "smollm2",
        max_tokens: int = 1024,
        temperature: float = 1.0,
        top_p: float = 1.0,
        timeout_s: float = 300.0,
        api_key: str | None = None,
        version: str = "0",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"unknown upstream flavor {flavor!r}; choose one of {', '.join(FLAVORS)}")
        self.flavor = flavor
        self.name = flavor
        base = base_url.rstrip("/")
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        self.root = root
        self.url = f"{root}/generate" if flavor == "sglang" else f"{root}/v1/completions"
        self.tokenizer = tokenizer
        self.model = model
        self.codec = get_codec(codec, tokenizer) if isinstance(codec, str) else codec
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self._version = version
        self._adapter: str | None = None
        self._gate = threading.Lock()  # guards the four fields below
        self._inflight = 0
        self._swapping = False
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = JsonPoster(timeout_s=timeout_s, headers=headers, transport=transport)

    @property
    def policy_version(self) -> str:
        return self._version

    @property
    def adapter(self) -> str | None:
        """The LoRA adapter new calls are sent to (None: the engine's base model)."""
        return self._adapter

    def set_version(self, version: str) -> None:
        """Name the weights the engine now serves (after the trainer pushed them to it)."""
        with self._gate:
            self._version = version

    def serve(self, version: str, *, adapter: str | None = None) -> None:
        """From the next call on, send to ``adapter`` (None: the base model) and label ``version``."""
        with self._gate:
            self._version, self._adapter = version, adapter

    @contextmanager
    def swap(self, version: str, *, timeout_s: float = 600.0) -> Iterator[None]:
        """Bracket an in-place weight update: waits until no call is in flight (new calls are held
        meanwhile), runs the body, then labels the calls after it ``version`` and releases them."""
        with self._gate:
            if self._swapping:
                raise BackendError("busy", f"{self.root}: a weight swap is already in progress")
            self._swapping = True
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                with self._gate:
                    if self._inflight == 0:
                        break
                if time.monotonic() > deadline:
                    raise BackendError("timeout", f"{self.root}: calls still in flight after {timeout_s:g}s")
                time.sleep(0.005)
            yield
            with self._gate:
                self._version, self._adapter = version, None
        finally:
            with self._gate:
                self._swapping = False

    async def _enter(self) -> tuple[str, str | None]:
        while True:
            with self._gate:
                if not self._swapping:
                    self._inflight += 1
                    return self._version, self._adapter
            await asyncio.sleep(0.005)

    def _leave(self) -> None:
        with self._gate:
            self._inflight -= 1

    async def complete(self, request: ChatRequest) -> Completion:
        version, adapter = await self._enter()
        try:
            return await self._complete(request, version, adapter)
        finally:
            self._leave()

    async def _complete(self, request: ChatRequest, version: str, adapter: str | None) -> Completion:
        rendered = self.codec.render(request, self.tokenizer)
        sampling = {
            "max_tokens": request.max_tokens or self.max_tokens,
            "temperature": self.temperature if request.temperature is None else request.temperature,
            "top_p": self.top_p if request.top_p is None else request.top_p,
            "stop": list(request.stop) or None,
        }
        if self.flavor == "sglang":
            ids, lps, text, finish = await self._sglang(list(rendered.ids), sampling, adapter)
        else:
            ids, lps, text, finish = await self._completions(list(rendered.ids), sampling, adapter)
        if len(ids) != len(lps):
            raise BackendError("bad_response", f"{self.url}: {len(ids)} token ids but {len(lps)} logprobs")
        turn = self.codec.parse(
            text, request.tools, first_call_index=count_tool_calls(request.messages), finish_reason=finish
        )
        return Completion(
            turn=turn,
            text=text,
            prompt_ids=rendered.ids,
            output_ids=tuple(ids),
            logprobs=tuple(lps),
            policy_version=version,
            model=self.model or request.model,
            usage_prompt_tokens=len(rendered.ids),
            usage_completion_tokens=len(ids),
        )

    async def _completions(
        self, prompt: list[int], sampling: dict[str, Any], adapter: str | None
    ) -> tuple[list[int], list[float], str, FinishReason]:
        model = adapter or self.model  # vLLM routes a request to a LoRA adapter by its name
        payload: dict[str, Any] = {"model": model, "prompt": prompt, "logprobs": 1, **sampling}
        if self.flavor == "vllm":
            payload.update(return_tokens_as_token_ids=True, return_token_ids=True, skip_special_tokens=False)
        data = await self.http.post(self.url, {k: v for k, v in payload.items() if v is not None})
        try:
            choice = data["choices"][0]
            logprobs = choice["logprobs"]
            lps = [float(x) for x in logprobs["token_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError(
                "bad_response", f"{self.url}: no choices[0].logprobs.token_logprobs in the answer ({exc!r})"
            ) from None
        echoed = choice.get("prompt_token_ids")
        if echoed is not None and list(echoed) != prompt:
            raise BackendError("token_mismatch", f"{self.url}: the engine saw different prompt ids than sent")
        ids = choice.get("token_ids")
        if ids is None:
            ids = [self._token_id(t) for t in logprobs.get("tokens") or []]
        text = choice.get("text")
        if not isinstance(text, str):
            text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
        return [int(i) for i in ids], lps, text, _finish(choice.get("finish_reason"))

    def _token_id(self, token: Any) -> int:
        if isinstance(token, str) and token.startswith("token_id:"):
            return int(token.split(":", 1)[1])
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if not isinstance(tid, int):
            raise BackendError(
                "bad_response", f"{self.url}: token {token!r} is not in the tokenizer's vocabulary"
            )
        return tid

    async def _sglang(
        self, prompt: list[int], sampling: dict[str, Any], adapter: str | None
    ) -> tuple[list[int], list[float], str, FinishReason]:
        params = {
            "max_new_tokens": sampling["max_tokens"],
            "temperature": sampling["temperature"],
            "top_p": sampling["top_p"],
            "skip_special_tokens": False,
        }
        if sampling["stop"]:
            params["stop"] = sampling["stop"]
        body: dict[str, Any] = {"input_ids": prompt, "sampling_params": params, "return_logprob": True}
        if adapter is not None:
            body["lora_path"] = adapter  # SGLang names a loaded adapter per request
        data = await self.http.post(self.url, body)
        try:
            meta = data["meta_info"]
            triples = meta["output_token_logprobs"]
            lps = [float(t[0]) for t in triples]
            ids = [int(t[1]) for t in triples]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError(
                "bad_response", f"{self.url}: no meta_info.output_token_logprobs in the answer ({exc!r})"
            ) from None
        text = data.get("text")
        if not isinstance(text, str):
            text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
        return ids, lps, text, _finish(meta.get("finish_reason"))

    async def aclose(self) -> None:
        await self.http.aclose()
