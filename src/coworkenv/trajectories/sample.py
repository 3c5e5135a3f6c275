"""Training samples: the versioned format the trainer consumes (``samples.jsonl``, one per line).

Contract (checked by :meth:`TrainingSample._aligned`): ``token_ids``, ``loss_mask``, ``logprobs`` and
``weights`` have the same length. ``loss_mask[i] == 1`` exactly for tokens the engine generated
(never environment/prompt tokens); ``logprobs[i]`` is the rollout logprob there and 0.0 elsewhere;
``weights[i]`` is the tree weight — tokens of a prefix shared by ``n`` retained branches of the same
rollout carry ``1/n`` so each counts once per rollout (0.0 where the mask is 0). Every branch of a
rollout carries the rollout's terminal ``reward`` and ``reward_parts``; ``group_key`` is
``"<task_id>|<harness>"``. ``step_states`` lists, per generated segment (model call) on the branch,
the environment state identity used by GiGPO, aligned with ``segments``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

SAMPLE_SCHEMA_VERSION = 1


class Segment(BaseModel):
    """A generated span ``[start, end)`` of ``token_ids`` produced by one model call."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    call_seq: int = Field(ge=0)
    state_hash: str | None = None


class TrainingSample(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: int = SAMPLE_SCHEMA_VERSION
    rollout_id: str
    task_id: str
    harness: str
    group_key: str
    branch_id: int = Field(ge=0)
    policy_version: str = "0"
    token_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    weights: tuple[float, ...]
    segments: tuple[Segment, ...] = ()
    reward: float
    reward_parts: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _aligned(self) -> TrainingSample:
        n = len(self.token_ids)
        lens = {
            "loss_mask": len(self.loss_mask),
            "logprobs": len(self.logprobs),
            "weights": len(self.weights),
        }
        bad = {k: v for k, v in lens.items() if v != n}
        if bad:
            raise ValueError(f"misaligned sample: token_ids has {n} entries, {bad}")
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("loss_mask entries must be 0 or 1")
        for s in self.segments:
            if not s.start < s.end <= n:
                raise ValueError(f"segment [{s.start}, {s.end}) outside 0..{n}")
        return self
