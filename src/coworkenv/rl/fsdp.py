"""FSDP2 sharding of the RL trainer's policy under ``torchrun`` / ``accelerate launch``.

Contract (``RLConfig.distributed = "fsdp"`` with ``WORLD_SIZE > 1``):

* :func:`shard` applies ``fully_shard`` to every transformer block and then to a
  :class:`ShardedPolicy` root around the model, on the default process group (gloo on CPU, nccl
  on GPU): each process holds 1/N of every parameter, and an optimizer built afterwards holds 1/N
  of the optimizer state. The root's forward is the trainer's whole forward (decoder + LM head on
  the trained rows only), so FSDP gathers the parameters outside the blocks (embeddings, final
  norm, head — tied or not) around it. Gradients are reduce-scattered
  as **sums** (divide factor 1): the loss coefficients are global, so the sum is the full-batch
  gradient — the same number the replicated (all-reduce) path and a single process compute.
* FSDP gathers each block's parameters inside every forward and backward, which are collectives:
  :func:`lockstep` pads this process's micro-batches to the most any process has, with ``None``
  entries the caller runs on a filler unit with its loss multiplied by 0 (gradients unchanged).
* :func:`plain_copy` rebuilds the unsharded policy on rank 0 (a collective: every rank calls it)
  for what reads whole weights: pushing to a backend, saving a merged checkpoint. Only rank 0
  holds the full copy, and only while it is used.
* :func:`local_bytes` counts the parameter and optimizer-state bytes this process holds.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import torch

from coworkenv.rl.packing import Unit, forward_logprobs

T = TypeVar("T")


class ShardedPolicy(torch.nn.Module):
    """The FSDP root: ``forward(units, want_hidden)`` is :func:`forward_logprobs` of the policy."""

    def __init__(self, policy: Any) -> None:
        super().__init__()
        self.policy = policy

    def forward(
        self, units: Sequence[Unit], want_hidden: bool = False
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        return forward_logprobs(self.policy, units, want_hidden=want_hidden)


def _blocks(model: Any) -> list[torch.nn.Module]:
    """The repeated transformer blocks: the longest ``ModuleList`` in the model."""
    lists: list[list[torch.nn.Module]] = [
        list(m) for m in model.modules() if isinstance(m, torch.nn.ModuleList)
    ]
    return max(lists, key=len) if lists else []


def shard(model: Any) -> ShardedPolicy:
    """Shard ``model`` in place (each block, then a :class:`ShardedPolicy` root); the root."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    for block in _blocks(model):
        fully_shard(block)
    root = ShardedPolicy(model)
    fully_shard(root)
    for m in root.modules():
        if isinstance(m, FSDPModule):
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)  # plain SUM (gloo has no PREMUL_SUM)
    return root


def lockstep(batches: Sequence[T]) -> list[T | None]:
    """``batches`` padded with ``None`` to the largest count over the processes."""
    import torch.distributed as dist

    n = torch.tensor([len(batches)], dtype=torch.int64)
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    return [*batches, *([None] * (int(n.item()) - len(batches)))]


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's full value (a plain tensor is returned as is)."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def plain_copy(model: Any) -> Any | None:
    """On rank 0 an unsharded copy of ``model`` (peft wrapping included), else None; collective."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from transformers import AutoModelForCausalLM

    from coworkenv.rl.common import is_peft

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.get_rank() != 0:
        return None
    base = model.get_base_model() if is_peft(model) else model
    plain = AutoModelForCausalLM.from_config(base.config, dtype=base.dtype)
    if is_peft(model):
        from peft import get_peft_model

        plain = get_peft_model(plain, copy.deepcopy(model.peft_config["default"]))
    plain.load_state_dict(full, strict=True)
    plain.eval()
    return plain


def local_bytes(params: Iterable[torch.nn.Parameter], optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of parameters and optimizer state held by this process (local shards of DTensors)."""
    from torch.distributed.tensor import DTensor

    def nbytes(t: torch.Tensor) -> int:
        local = t.to_local() if isinstance(t, DTensor) else t
        return local.numel() * local.element_size()

    state = 0
    for s in optimizer.state.values():
        state += sum(nbytes(v) for v in s.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
    return {"param_bytes": sum(nbytes(p) for p in params), "optimizer_bytes": state}
