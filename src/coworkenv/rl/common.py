"""Shared trainer plumbing: policy setup (full or LoRA), checkpoints, metrics, distributed helpers.

Contract:

* :func:`build_policy` returns a trainable model: LoRA adapters (peft) when ``ModelConfig.lora``
  is set, else every parameter trainable.
* :func:`merged_state_dict` is the plain (LoRA-merged) state dict of the policy — loadable into the
  base architecture with ``strict=True`` — without modifying the live model (what backends load).
* Checkpoints live in ``<out_dir>/checkpoints/step-<n>/``: ``trainable.pt`` (parameters that
  require grad, plus extra modules), ``optimizer.pt``, ``rng.pt`` and ``state.json``;
  ``<out_dir>/checkpoints/latest`` names the newest. :func:`latest_checkpoint` finds it.
* :class:`MetricsLog` appends one JSON object per step to ``<out_dir>/metrics.jsonl`` and mirrors
  scalars to TensorBoard when ``torch.utils.tensorboard`` is importable.
* Distributed: when ``WORLD_SIZE > 1`` (torchrun / accelerate launch) :func:`init_distributed`
  starts a gloo (CPU) or nccl group; :func:`all_reduce_grads` sums gradients across ranks (loss
  coefficients are global, so the sum is the full-batch gradient).
"""

from __future__ import annotations

import json
import os
import random
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from coworkenv.jsonl import jsonl_lines
from coworkenv.rl.config import ModelConfig


def build_policy(cfg: ModelConfig, model: Any | None = None, tokenizer: Any | None = None) -> tuple[Any, Any]:
    if model is None:
        from coworkenv.models import load_causal_lm

        model, tokenizer = load_causal_lm(cfg.name_or_path, dtype=cfg.dtype)
    if cfg.lora is not None:
        from peft import LoraConfig, get_peft_model

        names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
        targets = [t for t in cfg.lora.target_modules if t in names]
        lcfg = LoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=targets,
            task_type="CAUSAL_LM",
        )
        with warnings.catch_warnings():  # peft reads a property transformers 5 deprecated
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = get_peft_model(model, lcfg)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    if cfg.gradient_checkpointing:
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:  # transformers ≥ 5
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.lora is not None and hasattr(model, "enable_input_require_grads"):
            model.enable_input_require_grads()
    return model, tokenizer


def train_mode_without_dropout(model: Any, on: bool) -> None:
    """Training mode (so activation checkpointing is active) with every dropout off, so the
    policy's logprobs are deterministic — π_old, π_θ and the IS ratio see the same function."""
    model.train(on)
    if on:
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.eval()


def is_peft(model: Any) -> bool:
    return hasattr(model, "get_base_model") and hasattr(model, "peft_config")


def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """Plain-architecture weights with LoRA deltas folded in (the live model is untouched)."""
    if not is_peft(model):
        return {k: v.detach().clone() for k, v in model.state_dict().items()}
    base = model.get_base_model()
    out: dict[str, torch.Tensor] = {}
    deltas: dict[str, torch.Tensor] = {}
    for name, mod in base.named_modules():
        if hasattr(mod, "get_delta_weight") and hasattr(mod, "base_layer"):
            for adapter in getattr(mod, "active_adapters", ["default"]):
                d = mod.get_delta_weight(adapter).detach()
                deltas[f"{name}.weight"] = deltas.get(f"{name}.weight", 0) + d
    for key, val in base.state_dict().items():
        if "lora_" in key or "lora_dropout" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        t = val.detach().clone()
        if plain in deltas:
            t = t + deltas[plain].to(t.dtype)
        out[plain] = t
    return out


def save_merged(model: Any, tokenizer: Any, path: Path) -> Path:
    """A plain checkpoint directory (config + weights + tokenizer) that load_causal_lm reads."""
    from transformers import AutoModelForCausalLM

    base = model.get_base_model() if is_peft(model) else model
    plain = AutoModelForCausalLM.from_config(base.config)
    plain.load_state_dict(merged_state_dict(model), strict=True)
    path.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(path)
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(path)
    return path


def seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "torch": torch.get_rng_state()}


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])


def trainable_state(model: Any, extra: dict[str, torch.nn.Module] | None = None) -> dict[str, Any]:
    params = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    return {"params": params, "extra": {k: m.state_dict() for k, m in (extra or {}).items()}}


def save_checkpoint(
    out_dir: Path,
    step: int,
    model: Any,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    *,
    extra: dict[str, torch.nn.Module] | None = None,
    keep: int = 0,
) -> Path:
    """Write ``checkpoints/step-NNNNNN`` and point ``checkpoints/latest`` at it, so that a process
    killed at any instant leaves ``latest`` naming a complete checkpoint: the directory is written
    under a ``.tmp`` name and renamed, the marker replaced atomically, and only then are checkpoints
    older than the newest ``keep`` (0: none) deleted."""
    import shutil

    root = out_dir / "checkpoints"
    tmp = checkpoint_draft(out_dir, step)
    torch.save(trainable_state(model, extra), tmp / "trainable.pt")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(_rng_state(), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=2))
    d = publish_checkpoint(tmp)
    if keep:
        done = sorted(p for p in root.glob("step-*") if p.is_dir() and not p.name.endswith(".tmp"))
        for old in done[:-keep]:
            if old != d:
                shutil.rmtree(old, ignore_errors=True)
    return d


def checkpoint_draft(out_dir: Path, step: int) -> Path:
    """An empty ``checkpoints/step-NNNNNN.tmp`` to write a checkpoint into (a torn draft of an
    earlier, killed process is removed first); :func:`publish_checkpoint` makes it the newest."""
    import shutil

    tmp = out_dir / "checkpoints" / f"step-{step:06d}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def publish_checkpoint(tmp: Path) -> Path:
    """Rename a complete draft to ``step-NNNNNN`` and point ``latest`` at it, each atomically."""
    import shutil

    d = tmp.with_name(tmp.name.removesuffix(".tmp"))
    if d.exists():
        shutil.rmtree(d)
    tmp.replace(d)
    marker = d.parent / "latest.tmp"
    marker.write_text(d.name)
    marker.replace(d.parent / "latest")
    return d


def latest_checkpoint(out_dir: Path) -> Path | None:
    marker = out_dir / "checkpoints" / "latest"
    if not marker.exists():
        return None
    name = marker.read_text().strip()
    d = out_dir / "checkpoints" / name
    return d if name and (d / "state.json").exists() else None


def load_checkpoint(
    d: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    extra: dict[str, torch.nn.Module] | None = None,
) -> dict[str, Any]:
    blob = torch.load(d / "trainable.pt", weights_only=False)
    named = dict(model.named_parameters())
    with torch.no_grad():
        for n, t in blob["params"].items():
            named[n].copy_(t)
    for k, m in (extra or {}).items():
        m.load_state_dict(blob["extra"][k])
    optimizer.load_state_dict(torch.load(d / "optimizer.pt", weights_only=False))
    _set_rng_state(torch.load(d / "rng.pt", weights_only=False))
    state: dict[str, Any] = json.loads((d / "state.json").read_text())
    return state


class MetricsLog:
    def __init__(self, out_dir: Path, enabled: bool = True) -> None:
        self.path = out_dir / "metrics.jsonl"
        self.enabled = enabled
        self._tb: Any = None
        if enabled:
            out_dir.mkdir(parents=True, exist_ok=True)
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(out_dir / "tb"))
            except ImportError:
                self._tb = None

    def truncate(self, step: int) -> None:
        """Drop the rows after ``step``: on resume from a checkpoint at ``step``, the rows a killed
        process logged past it describe updates that are about to be redone, and would repeat."""
        if not self.enabled or not self.path.exists():
            return
        keep = []
        for line in jsonl_lines(self.path):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            if int(row.get("step", 0)) <= step:
                keep.append(line)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(x + "\n" for x in keep), encoding="utf-8")
        tmp.replace(self.path)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        row = {"step": step, "time": time.time(), **metrics}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, int | float):
                    self._tb.add_scalar(k, v, step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def world() -> tuple[int, int]:
    """(rank, world_size) from the launcher's environment (1 process when unset)."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def init_distributed() -> tuple[int, int]:
    rank, size = world()
    if size > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return rank, size


def all_reduce_grads(params: list[torch.nn.Parameter]) -> None:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)


def all_reduce_scalar(x: float) -> float:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return x
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item())


def shutdown_distributed() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
