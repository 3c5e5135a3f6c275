"""The LLM generator: an OpenAI-compatible chat client with a disk cache and a call log.

:class:`LlmConfig` takes the base URL, model and key from explicit values, else from
``COWORKENV_LLM_BASE_URL`` / ``COWORKENV_LLM_MODEL`` / ``COWORKENV_LLM_API_KEY``, else from
``OPENAI_BASE_URL`` / ``OPENAI_MODEL`` / ``OPENAI_API_KEY``.

:class:`ChatClient` posts ``/chat/completions`` with httpx. Every call is keyed by the sha256 of
``(model, messages, parameters)``; a cached response is returned without any request, so reruns
are free and reproducible. Every call — hit or miss — appends one JSON line (key, model, cached,
usage, latency) to the log. An unreachable endpoint or an HTTP error raises :class:`LlmError` with
one clear line.

:class:`LlmGenerator` implements the :class:`~coworkenv.synth.base.Generator` protocol with the
prompts of :mod:`coworkenv.synth.prompts`; safety slots go through the Generator–Discriminator
(:mod:`coworkenv.synth.discriminator`) unless disabled.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from coworkenv.errors import CoworkError
from coworkenv.spec import TaskSpec
from coworkenv.synth.base import Diagnostic, Slot
from coworkenv.synth.plan import is_safety
from coworkenv.synth.prompts import ChatMessage, generation_messages, repair_messages


class LlmError(CoworkError):
    """The LLM endpoint could not be reached or answered with an error."""


def _env(*names: str) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


class LlmConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.2
    max_tokens: int | None = None
    timeout_s: float = 300.0

    @classmethod
    def resolve(
        cls, base_url: str | None = None, model: str | None = None, api_key: str | None = None, **kw: Any
    ) -> LlmConfig:
        """Explicit values first, then the environment; a missing URL or model is an LlmError."""
        url = base_url or _env("COWORKENV_LLM_BASE_URL", "OPENAI_BASE_URL")
        name = model or _env("COWORKENV_LLM_MODEL", "OPENAI_MODEL")
        if not url:
            raise LlmError(
                "no LLM endpoint: pass --llm-base-url or set COWORKENV_LLM_BASE_URL (or OPENAI_BASE_URL)"
            )
        if not name:
            raise LlmError("no LLM model: pass --llm-model or set COWORKENV_LLM_MODEL (or OPENAI_MODEL)")
        key = api_key or _env("COWORKENV_LLM_API_KEY", "OPENAI_API_KEY")
        return cls(base_url=url, model=name, api_key=key, **kw)


def default_cache_dir() -> Path:
    return Path(os.environ.get("COWORKENV_CACHE", Path.home() / ".cache" / "coworkenv")) / "llm"


def cache_key(model: str, messages: Sequence[ChatMessage], params: dict[str, Any]) -> str:
    blob = json.dumps({"model": model, "messages": list(messages), "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class ChatStats:
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatClient:
    """A cached, logged chat-completions client."""

    def __init__(
        self,
        config: LlmConfig,
        *,
        cache_dir: Path | None = None,
        log_path: Path | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.config = config
        self.cache_dir = cache_dir or default_cache_dir()
        self.log_path = log_path
        self._http = http or httpx.Client(timeout=config.timeout_s)
        self.stats = ChatStats()

    def _params(self, extra: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.config.temperature}
        if self.config.max_tokens is not None:
            params["max_tokens"] = self.config.max_tokens
        params.update(extra)
        return params

    def chat(self, messages: Sequence[ChatMessage], **extra: Any) -> str:
        """The assistant's reply text (from the cache when this exact call was made before)."""
        params = self._params(extra)
        key = cache_key(self.config.model, messages, params)
        path = self.cache_dir / key[:2] / f"{key}.json"
        t0 = time.perf_counter()
        self.stats.calls += 1
        if path.exists():
            entry = json.loads(path.read_text(encoding="utf-8"))
            self.stats.cache_hits += 1
            self._log(key, cached=True, usage=entry.get("usage", {}), seconds=time.perf_counter() - t0)
            return str(entry["content"])
        body = {"model": self.config.model, "messages": list(messages), **params}
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        try:
            resp = self._http.post(url, json=body, headers=headers)
        except httpx.TransportError as e:
            raise LlmError(f"cannot reach the LLM endpoint {url}: {type(e).__name__}: {e}") from None
        if resp.status_code >= 400:
            snippet = " ".join(resp.text.split())[:300]
            raise LlmError(f"LLM endpoint {url} answered HTTP {resp.status_code}: {snippet}")
        try:
            data = resp.json()
            content = data["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise LlmError(f"LLM endpoint {url} returned no chat completion: {resp.text[:300]!r}") from None
        usage = data.get("usage") or {}
        self.stats.prompt_tokens += int(usage.get("prompt_tokens", 0) or 0)
        self.stats.completion_tokens += int(usage.get("completion_tokens", 0) or 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"model": self.config.model, "content": content, "usage": usage}), encoding="utf-8"
        )
        tmp.replace(path)
        self._log(key, cached=False, usage=usage, seconds=time.perf_counter() - t0)
        return str(content)

    def _log(self, key: str, *, cached: bool, usage: dict[str, Any], seconds: float) -> None:
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        line = {
            "key": key,
            "model": self.config.model,
            "cached": cached,
            "usage": usage,
            "seconds": round(seconds, 4),
        }
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def extract_json(text: str) -> str:
    """The JSON object in a reply: code fences and surrounding prose stripped (best effort)."""
    t = text.strip()
    if t.startswith("```"):
        t = t.split("\n", 1)[1] if "\n" in t else ""
        if t.rstrip().endswith("```"):
            t = t.rstrip()[:-3]
        t = t.strip()
    if not t.startswith("{") and "{" in t and "}" in t:
        t = t[t.index("{") : t.rindex("}") + 1]
    return t


class LlmGenerator:
    """Generator over a :class:`ChatClient`; remembers each slot's last candidate for repair."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        *,
        examples: Sequence[TaskSpec] | None = None,
        discriminator: bool = True,
    ) -> None:
        self.client = client
        self.examples = examples
        self._last: dict[str, str] = {}
        self._gd: Any = None
        if discriminator:
            from coworkenv.synth.discriminator import GeneratorDiscriminator

            self._gd = GeneratorDiscriminator(client.chat, client.chat)

    def draft(self, slot: Slot, feedback: Sequence[Diagnostic] = (), *, attempt: int = 0) -> str:
        if self._gd is not None and is_safety(slot):
            return str(self._gd.draft(slot, feedback, attempt=attempt))
        previous = self._last.get(slot.task_id)
        if feedback and previous is not None:
            messages = repair_messages(slot, previous, feedback, self.examples)
        else:
            messages = generation_messages(slot, self.examples)
        text = extract_json(self.client.chat(messages))
        self._last[slot.task_id] = text
        return text
