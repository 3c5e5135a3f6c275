"""Training configs (pydantic, validated before any work) and their loader.

Contract: :func:`load_config` reads a YAML or JSON file into :class:`SFTConfig` or :class:`RLConfig`
and raises :class:`~coworkenv.errors.SpecError` naming the file, the field and the offending value
(unknown estimator, negative clip, group size not dividing the batch, ...). Nothing is loaded,
downloaded or trained before validation passes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coworkenv.errors import SpecError, SpecIssue
from coworkenv.rl.advantages import ESTIMATORS


class LoRAConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    r: int = Field(32, gt=0)
    alpha: int = Field(64, gt=0)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name_or_path: str = "smollm2"
    dtype: Literal["float32", "bfloat16"] = "float32"
    lora: LoRAConfig | None = Field(default_factory=LoRAConfig, description="null = full fine-tuning")
    gradient_checkpointing: bool = Field(
        True,
        description="recompute each layer's activations in backward: ~1 layer of activations alive "
        "instead of all (a 4k-token sequence on SmolLM2: ~1 GB instead of ~10 GB), ~30% more compute",
    )


class OptimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lr: float = Field(2e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = Field(1.0, gt=0)
    warmup_steps: int = Field(0, ge=0)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    out_dir: Path = Path("runs/train")
    seed: int = 0
    save_every: int = Field(0, ge=0, description="optimizer steps between checkpoints; 0 = only at end")
    keep_checkpoints: int = Field(
        0, ge=0, description="newest resumable checkpoints kept on disk; 0 = keep every one"
    )
    resume: bool = True
    max_steps: int | None = Field(None, gt=0)
    progress: bool = True


class SFTConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sft"] = "sft"
    data: Path
    model: ModelConfig = ModelConfig()
    optim: OptimConfig = OptimConfig()
    run: RunConfig = RunConfig(out_dir=Path("runs/sft"))
    epochs: int = Field(3, gt=0)
    batch_size: int = Field(1, gt=0)
    grad_accum: int = Field(8, gt=0)
    max_len: int = Field(4096, gt=8)
    pack: bool = Field(
        True,
        description="pack each optimizer step's conversations into prefix tries: a system prompt and "
        "tool list shared by several conversations is forwarded once; loss and gradients are unchanged",
    )
    pack_tokens: int = Field(
        8192, gt=8, description="most tokens (trie nodes) forwarded at once when packing"
    )
    checkpoint_over: int | None = Field(
        None,
        gt=0,
        description="with model.gradient_checkpointing on: forwards of at most this many tokens run "
        "without it (checkpointing only where memory needs it; on SmolLM2-135M a forward keeps ~3 MB "
        "of activations per token without it). None: every forward is checkpointed",
    )
    autocast: Literal["auto", "off", "bf16"] = Field(
        "auto",
        description="bf16 autocast of the forward and backward (fp32 weights and optimizer): 'auto' "
        "turns it on only where the CPU computes bf16 natively (AVX512-BF16 / AMX) or on a GPU; on "
        "AVX2 it would be slower than fp32. Loss within 2% of fp32 (tests/test_rl_sft.py)",
    )


class RLConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["rl"] = "rl"
    samples: Path | None = Field(None, description="offline mode: a samples.jsonl file or directory")
    model: ModelConfig = ModelConfig()
    optim: OptimConfig = OptimConfig(lr=1e-5)
    run: RunConfig = RunConfig(out_dir=Path("runs/rl"))
    estimator: str = "grpo"
    group_size: int = Field(8, ge=2)
    batch_size: int = Field(8, gt=0, description="rollouts per optimizer step (multiple of group_size)")
    ppo_epochs: int = Field(1, gt=0)
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_beta: float = Field(0.0, ge=0)
    is_cap: float = Field(2.0, gt=0, description="c̄ of the truncated IS correction")
    aggregation: Literal["token_mean", "seq_mean", "fixed"] | None = None
    normalizer: float = Field(1536.0, gt=0)
    std_floor: float = Field(0.05, gt=0)
    zero_tol: float = Field(1e-6, ge=0)
    gigpo_omega: float = 1.0
    gdpo_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    value_coef: float = Field(0.5, ge=0)
    packing: bool = Field(True, description="tree-packed forward: each shared prefix once per rollout")
    pack_scope: Literal["rollout", "group"] = Field(
        "rollout",
        description="'group': one trie per rollout group, so a prompt all its rollouts start from "
        "(a CLI harness's long system prompt) is forwarded once per group",
    )
    micro_batch_tokens: int = Field(2048, gt=0, description="tokens per forward (memory grows with it)")
    max_len: int = Field(8192, gt=8)
    distributed: Literal["replicate", "fsdp"] = Field(
        "replicate",
        description="under torchrun / accelerate launch: 'replicate' (every process holds the whole "
        "model and optimizer state; gradients all-reduced) or 'fsdp' (FSDP2 fully_shard: parameters, "
        "gradients and optimizer state split across the processes, for a model one device cannot hold)",
    )

    @field_validator("estimator")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in ESTIMATORS:
            raise ValueError(f"unknown estimator {v!r}; choose one of {sorted(ESTIMATORS)}")
        return v

    @field_validator("clip_low", "clip_high")
    @classmethod
    def _clip(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"clip must be ≥ 0, got {v}")
        return v

    @model_validator(mode="after")
    def _batch(self) -> RLConfig:
        if self.batch_size % self.group_size:
            raise ValueError(
                f"batch_size={self.batch_size} is not a multiple of group_size={self.group_size}"
            )
        if self.clip_low >= 1.0:
            raise ValueError(f"clip_low={self.clip_low} must be < 1 (ratio floor 1 − clip_low)")
        return self

    @property
    def agg(self) -> Literal["token_mean", "seq_mean", "fixed"]:
        if self.aggregation is not None:
            return self.aggregation
        d = ESTIMATORS[self.estimator].default_aggregation
        return "fixed" if d == "fixed" else "token_mean"


C = TypeVar("C", SFTConfig, RLConfig)


def _issues(exc: ValidationError, data: Any) -> list[SpecIssue]:
    out = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        value = e.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        out.append(SpecIssue(loc, f"{e['msg']}{shown}"))
    return out


def parse_config(cls: type[C], data: Any, source: str | Path = "<config>") -> C:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, _issues(exc, data)) from None


def apply_overrides(data: dict[str, Any], overrides: Sequence[str], source: Path) -> dict[str, Any]:
    """``data`` with each ``dotted.key=value`` set (the value read as YAML: ``run.max_steps=2``,
    ``lora=null``, ``optim.lr=1e-4``); a malformed override is an error naming it."""
    out = copy.deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip() or any(not k for k in key.strip().split(".")):
            raise SpecError.single(source, "--set", f"{item!r}: write KEY=VALUE, e.g. run.max_steps=2")
        node = out
        *path, leaf = key.strip().split(".")
        for k in path:
            child = node.setdefault(k, {})
            if not isinstance(child, dict):
                raise SpecError.single(source, key, f"--set {item!r}: {k!r} is not a mapping")
            node = child
        try:
            node[leaf] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise SpecError.single(source, key, f"--set {item!r}: value is not valid YAML: {exc}") from None
    return out


def load_config(path: Path, cls: type[C], overrides: Sequence[str] = ()) -> C:
    """A config file, with ``--set`` overrides applied before validation."""
    if not path.exists():
        raise SpecError.single(path, "", "config file not found")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecError.single(path, "", f"not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError.single(path, "", "expected a mapping at the top level")
    return parse_config(cls, apply_overrides(data, overrides, path), path)
