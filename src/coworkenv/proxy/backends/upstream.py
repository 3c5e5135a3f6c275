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
"""

from __future__ import annotations

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
        self.url = f"{root}/generate" if flavor == "sglang" else f"{root}/v1/completions"
        self.tokenizer = tokenizer
        self.model = model
        self.codec = get_codec(codec, tokenizer) if isinstance(codec, str) else codec
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self._version = version
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = JsonPoster(timeout_s=timeout_s, headers=headers, transport=transport)

    @property
    def policy_version(self) -> str:
        return self._version

    def set_version(self, version: str) -> None:
        """Name the weights the engine now serves (after the trainer pushed them to it)."""
        self._version = version

    async def complete(self, request: ChatRequest) -> Completion:
        version = self._version
        rendered = self.codec.render(request, self.tokenizer)
        sampling = {
            "max_tokens": request.max_tokens or self.max_tokens,
            "temperature": self.temperature if request.temperature is None else request.temperature,
            "top_p": self.top_p if request.top_p is None else request.top_p,
            "stop": list(request.stop) or None,
        }
        if self.flavor == "sglang":
            ids, lps, text, finish = await self._sglang(list(rendered.ids), sampling)
        else:
            ids, lps, text, finish = await self._completions(list(rendered.ids), sampling)
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
        self, prompt: list[int], sampling: dict[str, Any]
    ) -> tuple[list[int], list[float], str, FinishReason]:
        payload: dict[str, Any] = {"model": self.model, "prompt": prompt, "logprobs": 1, **sampling}
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
        self, prompt: list[int], sampling: dict[str, Any]
    ) -> tuple[list[int], list[float], str, FinishReason]:
        params = {
            "max_new_tokens": sampling["max_tokens"],
            "temperature": sampling["temperature"],
            "top_p": sampling["top_p"],
            "skip_special_tokens": False,
        }
        if sampling["stop"]:
            params["stop"] = sampling["stop"]
        data = await self.http.post(
            self.url, {"input_ids": prompt, "sampling_params": params, "return_logprob": True}
        )
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
