"""Fixed sampling for an evaluation: a backend whose every request is decoded at given settings.

Contract: :class:`FixedSampling` wraps a backend. Each request's ``temperature`` (and ``top_p``
when one is given) is replaced before the inner backend sees it, whatever the harness asked for,
so an evaluation decodes the way its report says. Temperature 0 is greedy decoding on the backends
that support it (embedded, vLLM, SGLang). Everything else (name, policy version, tokenizer, weight
pushes, ``close``) is the inner backend's: attribute access is delegated, and the weights are
shared, so an evaluation through the wrapper always sees the inner backend's current policy.
"""

from __future__ import annotations

from typing import Any

from coworkenv.proxy.backends.base import Backend, Completion
from coworkenv.proxy.messages import ChatRequest


class FixedSampling:
    """``inner`` with every request sampled at ``temperature`` (and ``top_p`` when not None)."""

    def __init__(self, inner: Backend, temperature: float, top_p: float | None = None) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
        self.inner = inner
        self.temperature = temperature
        self.top_p = top_p

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def policy_version(self) -> str:
        return self.inner.policy_version

    async def complete(self, request: ChatRequest) -> Completion:
        update: dict[str, Any] = {"temperature": self.temperature}
        if self.top_p is not None:
            update["top_p"] = self.top_p
        return await self.inner.complete(request.model_copy(update=update))

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)
