"""The backend interface: one normalized request in, one turn out, with the engine's own tokens.

Contract: ``prompt_ids`` are exactly the token ids fed to the engine, ``output_ids`` exactly the ids
it generated, and ``logprobs[i]`` is the sampling-policy log-probability of ``output_ids[i]``
(``len(logprobs) == len(output_ids)``). Backends that cannot see tokens (pass-through to an external
API) return empty id lists and set ``token_exact=False``; such calls are never trained on.
A backend raises :class:`BackendError` for failures that are not the policy's (upstream down,
timeout, truncated stream): the proxy records them and answers the harness with an error.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coworkenv.errors import CoworkError
from coworkenv.proxy.messages import AssistantTurn, ChatRequest


class BackendError(CoworkError):
    """The engine failed to produce a turn (not the policy's fault)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class Completion(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn: AssistantTurn
    text: str = Field(description="The raw generated text (decoded output ids), before parsing.")
    prompt_ids: tuple[int, ...] = ()
    output_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    token_exact: bool = True
    policy_version: str = "0"
    model: str = ""
    usage_prompt_tokens: int = 0
    usage_completion_tokens: int = 0

    @model_validator(mode="after")
    def _aligned(self) -> Completion:
        if len(self.logprobs) != len(self.output_ids):
            raise ValueError(
                f"logprobs ({len(self.logprobs)}) and output_ids ({len(self.output_ids)}) must align"
            )
        return self


@runtime_checkable
class Backend(Protocol):
    """Anything that answers a :class:`ChatRequest`; ``policy_version`` names the weights in use."""

    name: str

    @property
    def policy_version(self) -> str: ...

    async def complete(self, request: ChatRequest) -> Completion: ...
